package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Contract is the loaded OpenAPI document: the router that finds the
// operation of a request, and the per-operation facts (validation status,
// documented error bodies) the pipeline and the error writer read from it.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router
}

// LoadContract parses and validates the OpenAPI document.
func LoadContract(ctx context.Context, yaml []byte) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(yaml)
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("openapi document is invalid: %w", err)
	}
	// Route on paths alone: the document's server URL is a placeholder for
	// wherever the service is deployed.
	routing := *doc
	routing.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(&routing)
	if err != nil {
		return nil, fmt.Errorf("build openapi router: %w", err)
	}
	return &Contract{Doc: doc, router: router}, nil
}

// FindRoute returns the operation a request addresses.
func (c *Contract) FindRoute(r *http.Request) (*routers.Route, map[string]string, error) {
	return c.router.FindRoute(r)
}

// documented reports whether op declares a response for status.
func documented(op *openapi3.Operation, status int) bool {
	return op != nil && op.Responses != nil && op.Responses.Value(strconv.Itoa(status)) != nil
}

// responseSchema returns the JSON schema op documents for status, if any.
func responseSchema(op *openapi3.Operation, status int) *openapi3.Schema {
	if op == nil || op.Responses == nil {
		return nil
	}
	ref := op.Responses.Value(strconv.Itoa(status))
	if ref == nil || ref.Value == nil {
		return nil
	}
	mt := ref.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	return mt.Schema.Value
}

// isPlainText reports whether op documents status as text/plain only.
func isPlainText(op *openapi3.Operation, status int) bool {
	if op == nil || op.Responses == nil {
		return false
	}
	ref := op.Responses.Value(strconv.Itoa(status))
	return ref != nil && ref.Value != nil && ref.Value.Content.Get("text/plain") != nil && ref.Value.Content.Get("application/json") == nil
}

// validationStatus is the status op prescribes for a request that fails
// schema validation (x-validation-status), 422 when it says nothing.
func validationStatus(op *openapi3.Operation) int {
	if op != nil {
		switch v := op.Extensions["x-validation-status"].(type) {
		case float64:
			return int(v)
		case int:
			return v
		case string:
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return http.StatusUnprocessableEntity
}

// stringExt reads a string extension.
func stringExt(ext map[string]any, name string) string {
	s, _ := ext[name].(string)
	return s
}

// hasProperty reports whether schema (or one of its allOf parts) declares prop.
func hasProperty(s *openapi3.Schema, prop string) bool {
	if s == nil {
		return false
	}
	if _, ok := s.Properties[prop]; ok {
		return true
	}
	return slices.ContainsFunc(s.AllOf, func(r *openapi3.SchemaRef) bool { return r != nil && hasProperty(r.Value, prop) })
}

// ruleMessage returns a message the operation carries in x-rule-messages.
func ruleMessage(op *openapi3.Operation, key string) string {
	if op == nil {
		return ""
	}
	m, _ := op.Extensions["x-rule-messages"].(map[string]any)
	s, _ := m[key].(string)
	return s
}

// multipartInvalidMessage is the x-invalid-message the document gives a
// property of the operation's multipart/form-data body, for the checks the
// schema cannot express on a text part (a JSON object carried as text).
func multipartInvalidMessage(op *openapi3.Operation, prop string) string {
	if op != nil && op.RequestBody != nil && op.RequestBody.Value != nil {
		if mt := op.RequestBody.Value.Content.Get("multipart/form-data"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil {
			if p := mt.Schema.Value.Properties[prop]; p != nil && p.Value != nil {
				if msg := stringExt(p.Value.Extensions, "x-invalid-message"); msg != "" {
					return msg
				}
			}
		}
	}
	return fmt.Sprintf("The %s field is invalid.", humanize(prop))
}
