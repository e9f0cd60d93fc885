package openapi_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/chatmsg/gateway/openapi"
)

// load parses and validates the embedded document; every test starts from it.
func load(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate openapi.yaml: %v", err)
	}
	return doc
}

type operation struct {
	method, path string
	op           *openapi3.Operation
}

func operations(doc *openapi3.T) []operation {
	var ops []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, operation{method: method, path: path, op: op})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int {
		return strings.Compare(a.method+" "+a.path, b.method+" "+b.path)
	})
	return ops
}

func secured(doc *openapi3.T, op *openapi3.Operation) bool {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	for _, r := range reqs {
		if len(r) > 0 {
			return true
		}
	}
	return false
}

func TestDocumentIsValid(t *testing.T) {
	t.Parallel()
	load(t)
}

func TestEveryOperationIsComplete(t *testing.T) {
	t.Parallel()
	doc := load(t)
	seen := map[string]string{}
	for _, o := range operations(doc) {
		name := o.method + " " + o.path
		if o.op.OperationID == "" {
			t.Errorf("%s: no operationId", name)
		} else if prev, dup := seen[o.op.OperationID]; dup {
			t.Errorf("%s: operationId %q already used by %s", name, o.op.OperationID, prev)
		}
		seen[o.op.OperationID] = name
		if len(o.op.Tags) == 0 {
			t.Errorf("%s: no tag", name)
		}
		if o.op.RequestBody != nil && o.op.RequestBody.Value != nil {
			for ct, mt := range o.op.RequestBody.Value.Content {
				if mt.Example == nil && len(mt.Examples) == 0 {
					t.Errorf("%s: request %s has no example", name, ct)
				}
			}
		}
		for status, resp := range o.op.Responses.Map() {
			if len(resp.Value.Content) == 0 {
				t.Errorf("%s: response %s has no content", name, status)
			}
			for ct, mt := range resp.Value.Content {
				if mt.Example == nil && len(mt.Examples) == 0 {
					t.Errorf("%s: response %s %s has no example", name, status, ct)
				}
			}
		}
		if secured(doc, o.op) && o.op.Responses.Value("401") == nil {
			t.Errorf("%s: secured but has no 401 response", name)
		}
		if strings.HasPrefix(o.path, "/api/") {
			if !secured(doc, o.op) {
				t.Errorf("%s: /api operation without security", name)
			}
			if o.op.Responses.Value("500") == nil {
				t.Errorf("%s: no 500 response", name)
			}
			// Every capability has landed: nothing answers 501. The
			// simulator controls, absent under the real connector, document
			// that 404 (SimulatorInactive) and carry x-simulator.
			simulator := strings.HasPrefix(o.path, "/api/chatapp-simulator/")
			if o.op.Responses.Value("501") != nil {
				t.Errorf("%s: documents 501", name)
			}
			if simulator && (o.op.Extensions["x-simulator"] != true || o.op.Responses.Value("404") == nil) {
				t.Errorf("%s: a simulator control without x-simulator and its 404", name)
			}
			status, ok := o.op.Extensions["x-validation-status"]
			if !ok {
				t.Errorf("%s: no x-validation-status", name)
				continue
			}
			code, ok := status.(float64)
			if !ok {
				t.Errorf("%s: x-validation-status is %T, want a number", name, status)
				continue
			}
			if o.op.Responses.Value(strconv.Itoa(int(code))) == nil && !noInput(o.op) {
				t.Errorf("%s: x-validation-status %v has no matching response", name, code)
			}
		}
	}
}

// noInput reports whether an operation takes neither parameters nor a body,
// so its x-validation-status can never be used.
func noInput(op *openapi3.Operation) bool {
	return len(op.Parameters) == 0 && op.RequestBody == nil
}

// TestExamplesMatchSchemas validates every request and response example
// against its schema with the same validator the server uses.
func TestExamplesMatchSchemas(t *testing.T) {
	t.Parallel()
	doc := load(t)
	check := func(where string, mt *openapi3.MediaType, ct string) {
		if mt.Schema == nil || mt.Schema.Value == nil || !strings.Contains(ct, "json") {
			return
		}
		values := map[string]any{}
		if mt.Example != nil {
			values["example"] = mt.Example
		}
		for name, ex := range mt.Examples {
			values[name] = ex.Value.Value
		}
		for name, v := range values {
			if err := mt.Schema.Value.VisitJSON(v); err != nil {
				t.Errorf("%s %s example %q: %v", where, ct, name, err)
			}
		}
	}
	for _, o := range operations(doc) {
		name := o.method + " " + o.path
		if o.op.RequestBody != nil {
			for ct, mt := range o.op.RequestBody.Value.Content {
				check(name+" request", mt, ct)
			}
		}
		for status, resp := range o.op.Responses.Map() {
			for ct, mt := range resp.Value.Content {
				check(name+" "+status, mt, ct)
			}
		}
	}
}

// TestRouterFindsRoutes guards the relative server URL: the validator's
// router must match requests whatever host the gateway is reached on.
func TestRouterFindsRoutes(t *testing.T) {
	t.Parallel()
	doc := load(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	for _, tc := range []struct{ method, url, want string }{
		{http.MethodGet, "http://127.0.0.1:8080/api/chatapps", "listChatapps"},
		{http.MethodPost, "http://gateway.example.com/api/api-send-message", "sendMessage"},
		{http.MethodPut, "http://localhost/api/channel-webhooks/21", "updateChannelWebhook"},
		{http.MethodGet, "http://[::1]:9000/readyz", "getReadyz"},
	} {
		req, err := http.NewRequest(tc.method, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		route, _, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s %s: %v", tc.method, tc.url, err)
			continue
		}
		if route.Operation.OperationID != tc.want {
			t.Errorf("%s %s: got %s, want %s", tc.method, tc.url, route.Operation.OperationID, tc.want)
		}
	}
}

// TestValidationExtensionsPresent checks that every input the validator can
// refuse carries the message the server must answer with: x-invalid-message
// on each parameter and request-body property, x-required-message on each
// required one, x-message on each anyOf/oneOf/not rule of a request body.
func TestValidationExtensionsPresent(t *testing.T) {
	t.Parallel()
	doc := load(t)
	for _, o := range operations(doc) {
		if !strings.HasPrefix(o.path, "/api/") {
			continue
		}
		name := o.method + " " + o.path
		params := append(openapi3.Parameters{}, doc.Paths.Value(o.path).Parameters...)
		params = append(params, o.op.Parameters...)
		for _, p := range params {
			if p.Value.Extensions["x-invalid-message"] == nil {
				t.Errorf("%s: parameter %s has no x-invalid-message", name, p.Value.Name)
			}
			if p.Value.Required && p.Value.Extensions["x-required-message"] == nil {
				t.Errorf("%s: required parameter %s has no x-required-message", name, p.Value.Name)
			}
		}
		if o.op.RequestBody == nil {
			continue
		}
		for ct, mt := range o.op.RequestBody.Value.Content {
			s := mt.Schema.Value
			if (len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.Not != nil) && s.Extensions["x-message"] == nil {
				t.Errorf("%s %s: combinator without x-message", name, ct)
			}
			for prop, ps := range s.Properties {
				if ps.Value.Extensions["x-invalid-message"] == nil {
					t.Errorf("%s %s: property %s has no x-invalid-message", name, ct, prop)
				}
			}
			for _, prop := range s.Required {
				ps := s.Properties[prop]
				if ps == nil {
					t.Errorf("%s %s: required property %s is not defined", name, ct, prop)
					continue
				}
				if ps.Value.Extensions["x-required-message"] == nil {
					t.Errorf("%s %s: required property %s has no x-required-message", name, ct, prop)
				}
			}
		}
	}
}
