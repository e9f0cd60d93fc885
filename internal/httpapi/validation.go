package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/chatmsg/gateway/internal/fault"
)

// issue is one validation failure, with the field it concerns and the
// message the document prescribes for it.
type issue struct {
	field   string
	message string
	rank    int // required < invalid value < combinator: the first issue is the answer's message
	// rule names the check that failed, for the log (never the value).
	rule string
}

// validationFault turns kin-openapi's validation error into an Invalid
// fault whose messages come from the document's x-required-message,
// x-invalid-message and x-message extensions.
func validationFault(r *http.Request, op *openapi3.Operation, err error) *fault.Error {
	var issues []issue
	collectIssues(r, op, err, &issues)
	if len(issues) == 0 {
		issues = append(issues, issue{field: "request", message: "The request is invalid."})
	}
	slices.SortStableFunc(issues, func(a, b issue) int { return a.rank - b.rank })
	fields := map[string][]string{}
	for _, is := range issues {
		if !slices.Contains(fields[is.field], is.message) {
			fields[is.field] = append(fields[is.field], is.message)
		}
	}
	// The cause logged is a summary of the issues: kin-openapi's own error
	// text quotes the schema and the submitted value, which a hostile request
	// makes as large as it likes.
	return &fault.Error{Kind: fault.Invalid, Message: issues[0].message, Fields: fields, Err: issueSummary(issues)}
}

// issueSummary is the bounded log form of validation issues: the first few
// fields and the rules they broke.
func issueSummary(issues []issue) error {
	var b strings.Builder
	for i, is := range issues {
		if i == 4 {
			fmt.Fprintf(&b, "; and %d more", len(issues)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(clip(is.field, 64))
		if is.rule != "" {
			b.WriteString(": " + is.rule)
		}
	}
	return errors.New("request validation: " + b.String())
}

func collectIssues(r *http.Request, op *openapi3.Operation, err error, out *[]issue) {
	var multi openapi3.MultiError
	if errors.As(err, &multi) && !isSingle(err) {
		for _, e := range multi {
			collectIssues(r, op, e, out)
		}
		return
	}
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		*out = append(*out, issue{field: "request", message: "The request is invalid.", rank: 1, rule: "unknown"})
		return
	}
	switch {
	case reqErr.Parameter != nil:
		is := parameterIssue(reqErr)
		is.rule = "parameter in " + reqErr.Parameter.In + ": " + errorRule(reqErr.Err)
		*out = append(*out, is)
	case reqErr.RequestBody != nil:
		root := bodySchema(r, reqErr.RequestBody)
		if errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired) {
			// No body at all reads like an empty object: answer with the
			// first required field's message, as an empty JSON object would.
			if root != nil && len(root.Required) > 0 {
				is := requiredIssue(root, nil, root.Required[0])
				is.rule = "body required"
				*out = append(*out, is)
				return
			}
			*out = append(*out, issue{field: "body", message: "The request body is required.", rule: "body required"})
			return
		}
		var schemaErrs []*openapi3.SchemaError
		collectSchemaErrors(reqErr.Err, &schemaErrs)
		if len(schemaErrs) == 0 {
			if is, ok := partIssue(root, reqErr.Err); ok {
				is.rule = "multipart part type"
				*out = append(*out, is)
				return
			}
			msg := "The request body could not be read as JSON."
			if ct := r.Header.Get("Content-Type"); ct != "" && !bodyAccepts(reqErr.RequestBody, ct) {
				msg = fmt.Sprintf("The content type %s is not accepted here.", mediaType(ct))
			} else if strings.HasPrefix(mediaType(ct), "multipart/") {
				msg = "The multipart body could not be read."
			}
			*out = append(*out, issue{field: "body", message: msg, rank: 1, rule: "decode"})
			return
		}
		for _, se := range schemaErrs {
			if discriminated(se) {
				*out = append(*out, discriminatedIssues(root, se, decodedBody(r, reqErr.RequestBody))...)
				continue
			}
			if inner := originErrors(se); se.SchemaField == "allOf" && len(se.JSONPointer()) == 0 && len(inner) > 0 {
				// A body-level allOf (the connection bodies' "id or key")
				// answers with what failed inside it, which carries its
				// own message.
				for _, e := range inner {
					is := schemaIssue(e.Schema, e)
					is.rule = "allOf: " + schemaRule(e)
					*out = append(*out, is)
				}
				continue
			}
			is := schemaIssue(root, se)
			is.rule = schemaRule(se)
			*out = append(*out, is)
		}
	default:
		*out = append(*out, issue{field: "request", message: "The request is invalid.", rank: 1, rule: "unknown"})
	}
}

// partIssue answers a form part whose text is not of its property's type
// (a multipart boolean other than true or false, a non-integer id) with the
// property's x-invalid-message, as the JSON body gets for the same field:
// kin-openapi reports those as a ParseError naming the part, before any
// schema validation.
func partIssue(root *openapi3.Schema, err error) (issue, bool) {
	var pe *openapi3filter.ParseError
	if root == nil || !errors.As(err, &pe) {
		return issue{}, false
	}
	path := pe.Path()
	if len(path) == 0 {
		return issue{}, false
	}
	name, ok := path[0].(string)
	if !ok {
		return issue{}, false
	}
	prop := root.Properties[name]
	if prop == nil || prop.Value == nil {
		return issue{}, false
	}
	msg := stringExt(prop.Value.Extensions, "x-invalid-message")
	if msg == "" && prop.Value.Items != nil && prop.Value.Items.Value != nil {
		msg = stringExt(prop.Value.Items.Value.Extensions, "x-invalid-message")
	}
	if msg == "" {
		msg = fmt.Sprintf("The %s field is invalid.", humanize(name))
	}
	return issue{field: name, message: msg, rank: 1}, true
}

// isSingle reports whether err is itself a RequestError (which wraps a
// MultiError of schema errors that belong together).
func isSingle(err error) bool {
	var reqErr *openapi3filter.RequestError
	return errors.As(err, &reqErr) && !isMultiAtTop(err)
}

func isMultiAtTop(err error) bool { _, ok := err.(openapi3.MultiError); return ok }

func collectSchemaErrors(err error, out *[]*openapi3.SchemaError) {
	if err == nil {
		return
	}
	if multi, ok := err.(openapi3.MultiError); ok {
		for _, e := range multi {
			collectSchemaErrors(e, out)
		}
		return
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		*out = append(*out, se)
		return
	}
	var multi openapi3.MultiError
	if errors.As(err, &multi) {
		collectSchemaErrors(multi, out)
	}
}

// errorRule names the kind of a parameter failure without its text, which
// quotes the value.
func errorRule(err error) string {
	var se *openapi3.SchemaError
	var pe *openapi3filter.ParseError
	switch {
	case errors.Is(err, openapi3filter.ErrInvalidRequired):
		return "required"
	case errors.Is(err, openapi3filter.ErrInvalidEmptyValue):
		return "empty"
	case errors.As(err, &se):
		return "schema " + se.SchemaField
	case errors.As(err, &pe):
		return "parse"
	}
	return "invalid"
}

func parameterIssue(e *openapi3filter.RequestError) issue {
	p := e.Parameter
	if errors.Is(e.Err, openapi3filter.ErrInvalidRequired) || errors.Is(e.Err, openapi3filter.ErrInvalidEmptyValue) {
		msg := stringExt(p.Extensions, "x-required-message")
		if msg == "" {
			msg = fmt.Sprintf("The %s field is required.", humanize(p.Name))
		}
		return issue{field: p.Name, message: msg}
	}
	msg := stringExt(p.Extensions, "x-invalid-message")
	if msg == "" {
		msg = fmt.Sprintf("The %s field is invalid.", humanize(p.Name))
	}
	return issue{field: p.Name, message: msg, rank: 1}
}

func schemaIssue(root *openapi3.Schema, se *openapi3.SchemaError) issue {
	path := se.JSONPointer()
	switch se.SchemaField {
	case "required":
		if len(path) == 0 {
			return issue{field: "body", message: "The request is invalid."}
		}
		return requiredIssue(se.Schema, path[:len(path)-1], path[len(path)-1])
	case "anyOf", "oneOf", "not":
		msg := stringExt(se.Schema.Extensions, "x-message")
		if msg == "" {
			msg = "The request does not satisfy the combination rules of its fields."
		}
		field := strings.Join(path, ".")
		if field == "" {
			field = "body"
		}
		return issue{field: field, message: msg, rank: 2}
	}
	field := strings.Join(path, ".")
	// The closest schema along the path that carries a message wins, so an
	// array property's message covers its items.
	chain := schemaChain(root, path)
	for i := len(chain) - 1; i >= 0; i-- {
		if msg := stringExt(chain[i].Extensions, "x-invalid-message"); msg != "" {
			return issue{field: topField(path), message: msg, rank: 1}
		}
	}
	if msg := stringExt(se.Schema.Extensions, "x-invalid-message"); msg != "" {
		return issue{field: topField(path), message: msg, rank: 1}
	}
	if field == "" {
		field = "body"
	}
	return issue{field: topField(path), message: fmt.Sprintf("The %s field is invalid.", humanize(field)), rank: 1}
}

func requiredIssue(parent *openapi3.Schema, parentPath []string, prop string) issue {
	field := strings.Join(append(slices.Clone(parentPath), prop), ".")
	if parent != nil {
		if ref := parent.Properties[prop]; ref != nil && ref.Value != nil {
			if msg := stringExt(ref.Value.Extensions, "x-required-message"); msg != "" {
				return issue{field: field, message: msg}
			}
		}
	}
	return issue{field: field, message: fmt.Sprintf("The %s field is required.", humanize(prop))}
}

// schemaChain returns the schemas from root along path (properties, items,
// additionalProperties), stopping where the path leaves the schema.
func schemaChain(root *openapi3.Schema, path []string) []*openapi3.Schema {
	if root == nil {
		return nil
	}
	chain := []*openapi3.Schema{root}
	cur := root
	for _, key := range path {
		var next *openapi3.SchemaRef
		if p, ok := cur.Properties[key]; ok {
			next = p
		} else if cur.Items != nil {
			next = cur.Items
		} else if cur.AdditionalProperties.Schema != nil {
			next = cur.AdditionalProperties.Schema
		}
		if next == nil || next.Value == nil {
			break
		}
		cur = next.Value
		chain = append(chain, cur)
	}
	return chain
}

func bodySchema(r *http.Request, body *openapi3.RequestBody) *openapi3.Schema {
	mt := body.Content.Get(mediaType(r.Header.Get("Content-Type")))
	if mt == nil {
		mt = body.Content.Get("application/json")
	}
	if mt == nil || mt.Schema == nil {
		return nil
	}
	return mt.Schema.Value
}

func bodyAccepts(body *openapi3.RequestBody, ct string) bool {
	return body.Content.Get(mediaType(ct)) != nil
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

func topField(path []string) string {
	if len(path) == 0 {
		return "body"
	}
	return path[0]
}

func humanize(name string) string { return strings.ReplaceAll(name, "_", " ") }

// schemaRule names the failed rule of a schema error for the log: where in
// the body, and which keyword.
func schemaRule(e *openapi3.SchemaError) string {
	return clip(strings.Join(e.JSONPointer(), "."), 96) + " " + e.SchemaField
}

// discriminated reports whether se is the failure of a body-level oneOf
// picked by a discriminator (the send body's rules per platform).
func discriminated(se *openapi3.SchemaError) bool {
	return se.Schema != nil && se.Schema.Discriminator != nil && len(se.JSONPointer()) == 0 &&
		(se.SchemaField == "oneOf" || se.SchemaField == "discriminator")
}

// discriminatedIssues answers a failed discriminated oneOf with the messages
// of the fields, as if the rules were written on the body itself.
// kin-openapi stops at the first failing oneOf, so the body's own properties
// are checked again here without it (only on this failure path), and the
// picked branch's errors (required, not) carry their own x- messages. The
// body's issues come first: with equal rank, the earlier wins, and the
// document's required fields outrank a platform's rule.
func discriminatedIssues(root *openapi3.Schema, se *openapi3.SchemaError, body any) []issue {
	var out []issue
	if body == nil {
		// A failed discriminator carries the property's value, not the body's.
		if se.SchemaField != "oneOf" {
			name := se.Schema.Discriminator.PropertyName
			if se.Value == nil {
				return []issue{requiredIssue(root, nil, name)}
			}
			msg := fmt.Sprintf("The %s field is invalid.", humanize(name))
			if p := root.Properties[name]; p != nil && p.Value != nil {
				if m := stringExt(p.Value.Extensions, "x-invalid-message"); m != "" {
					msg = m
				}
			}
			return []issue{{field: name, message: msg, rank: 1, rule: "discriminator"}}
		}
		body = se.Value
	}
	plain := *se.Schema
	plain.OneOf, plain.Discriminator = nil, nil
	if err := plain.VisitJSON(body, openapi3.MultiErrors(), openapi3.VisitAsRequest()); err != nil {
		var errs []*openapi3.SchemaError
		collectSchemaErrors(err, &errs)
		for _, e := range errs {
			is := schemaIssue(root, e)
			is.rule = schemaRule(e)
			out = append(out, is)
		}
	}
	if se.SchemaField == "oneOf" {
		// The origin wraps the errors of the one branch the discriminator
		// picked.
		for _, e := range originErrors(se) {
			is := schemaIssue(e.Schema, e)
			is.rule = "platform rule: " + schemaRule(e)
			out = append(out, is)
		}
	}
	if len(out) == 0 {
		// A discriminator that names no branch fails the body's own enum
		// above; anything else still gets a message.
		msg := stringExt(se.Schema.Extensions, "x-message")
		if msg == "" {
			msg = "The request does not satisfy the combination rules of its fields."
		}
		out = append(out, issue{field: "body", message: msg, rank: 2, rule: "discriminator"})
	}
	return out
}

// decodedBody decodes the request body again, as the validator did, for the
// rare failure that needs the whole body to be answered (a discriminator).
// The validator left the body replayable (GetBody) and bounded; nil when it
// cannot be had.
func decodedBody(r *http.Request, rb *openapi3.RequestBody) any {
	ct := mediaType(r.Header.Get("Content-Type"))
	mt := rb.Content.Get(ct)
	decode := openapi3filter.RegisteredBodyDecoder(ct)
	if r.GetBody == nil || mt == nil || mt.Schema == nil || decode == nil {
		return nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	v, err := decode(body, r.Header, mt.Schema, func(name string) *openapi3.Encoding { return mt.Encoding[name] })
	if err != nil {
		return nil
	}
	return v
}

// originErrors returns the schema errors a combinator's failure wraps (the
// members of an allOf, the branch a discriminator picked), nil when there
// are none.
func originErrors(se *openapi3.SchemaError) []*openapi3.SchemaError {
	var errs []*openapi3.SchemaError
	for err := se.Origin; err != nil; {
		if multi, ok := err.(openapi3.MultiError); ok {
			collectSchemaErrors(multi, &errs)
			break
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	return errs
}
