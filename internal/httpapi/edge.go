package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"github.com/chatmsg/gateway/internal/fault"
)

// What one request may cost at the edge, checked before the validator
// decodes anything: a hostile request must be refused for the price of a
// scan over its bytes, never a decode, a schema walk or a log line that
// grows with it. README.md ("Limits at the HTTP edge") lists them.
const (
	// jsonBodyLimit bounds JSON bodies: the largest field of the document
	// (a 65,536-character text, up to 6 bytes per escaped character) fits
	// with room to spare.
	jsonBodyLimit = 1 << 20
	// providerBodyLimit bounds provider webhooks (declared application/*):
	// the provider batches at most a few MB of notifications per delivery.
	providerBodyLimit = 3 << 20
	// multipartBodyLimit is the document's largest file (a 100 MB document)
	// plus the form's other parts; only operations that take
	// multipart/form-data, and only for a multipart request, get it.
	multipartBodyLimit = 101 << 20
	// maxJSONDepth is the deepest nesting of arrays and objects accepted in
	// a JSON body or a JSON query parameter; the document's deepest shape
	// nests 5.
	maxJSONDepth = 64
	// maxJSONValues bounds the array items and object members of one JSON
	// text: decoding and validating each costs far more than its bytes
	// (800 KB of {"a":1} items took 40 MB), and the document's longest
	// array holds 500 items.
	maxJSONValues = 20000
	// maxQueryBytes bounds the raw query string, maxParamBytes each of its
	// decoded values (the longest documented query value is a filter text
	// or a JSON date range, well under a kilobyte).
	maxQueryBytes = 8 << 10
	maxParamBytes = 2 << 10
	// maxTextPartBytes bounds a multipart text part (the longest is a
	// 65,536-character text).
	maxTextPartBytes = 512 << 10
	// maxLogValue bounds every logged attribute that can carry client input.
	maxLogValue = 256
)

// bodyLimit is the size cap of r's body on op, by the request's media type
// and what op accepts: multipart only where op takes multipart.
func bodyLimit(op *openapi3.Operation, r *http.Request) (limit int64, human string) {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return jsonBodyLimit, "1 MB"
	}
	content := op.RequestBody.Value.Content
	mt := mediaType(r.Header.Get("Content-Type"))
	switch {
	case mt == "multipart/form-data" && content.Get("multipart/form-data") != nil:
		return multipartBodyLimit, "100 MB"
	case content["application/*"] != nil:
		return providerBodyLimit, "3 MB"
	}
	return jsonBodyLimit, "1 MB"
}

// tooLarge is the answer to a body over its limit: 413 where op documents
// it, else op's validation status; the message names the limit.
func tooLarge(human string) *fault.Error {
	return &fault.Error{
		Kind: fault.Invalid, Message: "The request body may not be greater than " + human,
		Fields: map[string][]string{"body": {"The request body may not be greater than " + human}},
		Err:    fmt.Errorf("%w: over %s", errBodyTooLarge, human),
	}
}

// edgeFault is a refusal of the edge checks, in the shape validation
// failures have: the field's documented message, and a short cause for the
// log that never quotes the input.
func edgeFault(is issue, cause string) *fault.Error {
	return &fault.Error{
		Kind: fault.Invalid, Message: is.message,
		Fields: map[string][]string{is.field: {is.message}},
		Err:    errors.New(clip(is.field, 64) + ": " + cause),
	}
}

// checkParameters refuses query, path and header inputs that are too large,
// nested too deep, or carry NUL bytes or invalid UTF-8, before the validator
// parses them or a handler stores them. The operation's parameters come from
// the document, so a new operation is covered without code.
func checkParameters(r *http.Request, route *routers.Route, pathParams map[string]string) *fault.Error {
	op := route.Operation
	declared := func(name, in string) *openapi3.Parameter {
		for _, list := range []openapi3.Parameters{op.Parameters, route.PathItem.Parameters} {
			if p := list.GetByInAndName(in, name); p != nil {
				return p
			}
		}
		return nil
	}
	paramIssue := func(name, in string) issue {
		if p := declared(name, in); p != nil {
			if msg := stringExt(p.Extensions, "x-invalid-message"); msg != "" {
				return issue{field: name, message: msg}
			}
		}
		return issue{field: clip(name, 64), message: fmt.Sprintf("The %s field is invalid.", humanize(clip(name, 64)))}
	}

	for name, v := range pathParams {
		// The router hands path parameters over still escaped.
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		if why := badText(v); why != "" {
			return edgeFault(paramIssue(name, openapi3.ParameterInPath), "path parameter "+why)
		}
	}
	if len(r.URL.RawQuery) > maxQueryBytes {
		msg := fmt.Sprintf("The query string may not be longer than %d bytes.", maxQueryBytes)
		return edgeFault(issue{field: "query", message: msg}, "query string too long")
	}
	// Pairs are walked in place rather than parsed into a map: unescaping
	// allocates only for escaped text, and pairs that cannot be unescaped
	// are skipped, as URL.Query (which the validator reads) skips them.
	for rest := r.URL.RawQuery; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(rawName)
		v, err2 := url.QueryUnescape(rawValue)
		if err1 != nil || err2 != nil {
			continue
		}
		if why := badText(name); why != "" {
			return edgeFault(issue{field: "query", message: "The query string is invalid."}, "query name "+why)
		}
		if len(v) > maxParamBytes {
			is := paramIssue(name, openapi3.ParameterInQuery)
			is.message = fmt.Sprintf("The %s field may not be longer than %d bytes.", humanize(is.field), maxParamBytes)
			return edgeFault(is, "query parameter too long")
		}
		if why := badText(v); why != "" {
			return edgeFault(paramIssue(name, openapi3.ParameterInQuery), "query parameter "+why)
		}
		if p := declared(name, openapi3.ParameterInQuery); p != nil && p.Content.Get("application/json") != nil {
			if _, err := scanJSON([]byte(v)); err != nil {
				return edgeFault(paramIssue(name, openapi3.ParameterInQuery), "query parameter "+err.Error())
			}
		}
	}
	for _, list := range []openapi3.Parameters{op.Parameters, route.PathItem.Parameters} {
		for _, ref := range list {
			if ref == nil || ref.Value == nil || ref.Value.In != openapi3.ParameterInHeader {
				continue
			}
			for _, v := range r.Header.Values(ref.Value.Name) {
				if why := badText(v); why != "" {
					return edgeFault(paramIssue(ref.Value.Name, openapi3.ParameterInHeader), "header "+why)
				}
			}
		}
	}
	return nil
}

// readJSONBody reads a JSON body (already capped by http.MaxBytesReader),
// scans it for depth and bad strings, and puts the bytes back for the
// validator. It returns the top-level members sent as null, which the
// generated types cannot tell from absent ones.
func readJSONBody(r *http.Request, op *openapi3.Operation) (nulls map[string]bool, ferr *fault.Error, err error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(data))
	// The validator reads the body and then asks GetBody for a fresh
	// reader: this one reads the same bytes, not a second copy.
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	res, scanErr := scanJSON(data)
	if scanErr == nil {
		return res.nulls, nil, nil
	}
	var bad *badStringError
	if errors.As(scanErr, &bad) {
		field := clip(bad.member, 64)
		if field == "" {
			field = "body"
		}
		return nil, edgeFault(invalidFieldIssue(bodySchema(r, op.RequestBody.Value), field), "body "+bad.why), nil
	}
	msg := fmt.Sprintf("The request body may not nest arrays and objects deeper than %d levels.", maxJSONDepth)
	if errors.Is(scanErr, errTooLarge) {
		msg = fmt.Sprintf("The request body may not hold more than %d values.", maxJSONValues)
	}
	return nil, edgeFault(issue{field: "body", message: msg}, scanErr.Error()), nil
}

// badText says why s may not be stored ("" when it may): a NUL byte, which
// PostgreSQL cannot store in text, or invalid UTF-8.
func badText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return "has a NUL byte"
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	return ""
}

// invalidFieldIssue is the document's x-invalid-message for a body member
// (the closest one along its schema), or a generic message.
func invalidFieldIssue(root *openapi3.Schema, field string) issue {
	chain := schemaChain(root, []string{field})
	for i := len(chain) - 1; i >= 1; i-- {
		if msg := stringExt(chain[i].Extensions, "x-invalid-message"); msg != "" {
			return issue{field: field, message: msg, rank: 1}
		}
	}
	return issue{field: field, message: fmt.Sprintf("The %s field is invalid.", humanize(clip(field, 64))), rank: 1}
}

// scanResult is what one pass over a JSON text learned.
type scanResult struct {
	// nulls are the members of a top-level object sent as null.
	nulls map[string]bool
}

// badStringError is a JSON string (member name or value) that may not be
// stored; member is the top-level member it sits under.
type badStringError struct {
	member string
	why    string
}

func (e *badStringError) Error() string { return "string " + e.why }

var (
	errTooDeep  = fmt.Errorf("nested deeper than %d", maxJSONDepth)
	errTooLarge = fmt.Errorf("more than %d values", maxJSONValues)
)

// scanJSON walks a JSON text once, without decoding it: it refuses nesting
// deeper than maxJSONDepth and strings with a NUL (raw or \u0000) or invalid
// UTF-8, and records the top-level members whose value is null. Malformed
// JSON is not its concern: it stops early or passes, and the decoder that
// follows answers it.
func scanJSON(data []byte) (scanResult, error) {
	var (
		res       scanResult
		depth     int
		topObject bool   // the text is an object
		wantKey   bool   // at depth 1 of the top object, the next string is a member name
		member    []byte // the current top-level member's name, still quoted; decoded only when needed
		afterKey  bool   // at depth 1, between a member name's ':' and its value
		values    int    // containers and separators seen: a bound on the values
	)
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '{', '[':
			if depth == 0 && c == '{' {
				topObject = true
			}
			afterKey = false
			depth++
			if depth > maxJSONDepth {
				return res, errTooDeep
			}
			if values++; values > maxJSONValues {
				return res, errTooLarge
			}
			wantKey = topObject && depth == 1 && c == '{'
		case '}', ']':
			depth--
			if depth < 0 {
				return res, nil
			}
		case ',':
			if values++; values > maxJSONValues {
				return res, errTooLarge
			}
			if topObject && depth == 1 {
				wantKey, afterKey = true, false
			}
		case ':':
			if topObject && depth == 1 {
				afterKey = true
			}
		case 'n':
			if afterKey && depth == 1 && member != nil && bytes.HasPrefix(data[i:], []byte("null")) {
				if res.nulls == nil {
					res.nulls = map[string]bool{}
				}
				res.nulls[unquoteKey(member)] = true
			}
			afterKey = false
		case '"':
			end, why := scanString(data, i+1)
			if why != "" {
				at := ""
				if member != nil && !(depth == 1 && wantKey) {
					at = unquoteKey(member)
				}
				return res, &badStringError{member: at, why: why}
			}
			if end < 0 {
				return res, nil
			}
			if topObject && depth == 1 && wantKey {
				member = data[i : end+1]
				wantKey = false
			}
			afterKey = false
			i = end
		case ' ', '\t', '\r', '\n':
		default:
			afterKey = false
		}
	}
	return res, nil
}

// scanString checks the JSON string starting after its opening quote at
// start and returns the index of its closing quote (-1 when unterminated).
func scanString(data []byte, start int) (end int, why string) {
	for i := start; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			return i, ""
		case c == '\\':
			if i+1 < len(data) && data[i+1] == 'u' && bytes.HasPrefix(data[i+2:], []byte("0000")) {
				return 0, "has a NUL byte"
			}
			i += 2
		case c == 0:
			return 0, "has a NUL byte"
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, "is not valid UTF-8"
			}
			i += size
		}
	}
	return -1, ""
}

// unquoteKey decodes a member name, escapes included.
func unquoteKey(quoted []byte) string {
	if len(quoted) < 2 {
		return ""
	}
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return string(quoted[1 : len(quoted)-1])
	}
	return s
}

// clip bounds a logged value that can carry client input, cutting on a
// rune boundary and saying how much was left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d more bytes)", s[:cut], len(s)-cut)
}
