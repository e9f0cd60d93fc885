// Package eventschema validates webhook deliveries (body, headers, and the event data alone)
// against the AsyncAPI document embedded by package asyncapi.
//
// There is no AsyncAPI parser for Go here: the document is loaded as plain YAML, converted to
// JSON-compatible values and added as one resource to santhosh-tekuri/jsonschema (draft 7, the
// dialect of AsyncAPI schemas, with formats asserted). The schemas of a message —
// components/messages/<Name>/payload, its headers and the `data` member of its payload — are
// compiled on first use and cached. Internal $refs resolve; a dangling one is a compile error.
// All functions are safe for concurrent use.
package eventschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/asyncapi"
)

// ErrUnknownEvent is wrapped by the errors of the Validate functions when the event name is not
// the name of a message of the document.
var ErrUnknownEvent = errors.New("unknown event")

// Parts of a delivery, as named in Error.Part.
const (
	PartPayload = "payload"
	PartHeaders = "headers"
	PartData    = "data"
)

// Error is returned when a value does not match its schema. It lists every problem found.
type Error struct {
	Event    string    // event name
	Part     string    // PartPayload, PartHeaders or PartData
	Problems []Problem // sorted by path
}

// Problem is one schema violation.
type Problem struct {
	// Path is the JSON pointer of the failing value within the validated part ("" is the whole
	// part): /data/conversation/id in a payload, /X-Svc-Signature in headers.
	Path    string
	Message string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "eventschema: invalid %s %s: ", e.Event, e.Part)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		path := p.Path
		if path == "" {
			path = "(root)"
		}
		fmt.Fprintf(&b, "%s: %s", path, p.Message)
	}
	return b.String()
}

// ValidatePayload validates a webhook body (the envelope with its data) against the payload
// schema of the message named event. It returns an *Error listing the failing instance paths,
// or an error wrapping ErrUnknownEvent.
func ValidatePayload(event string, body []byte) error {
	v, m, err := messageOf(event)
	if err != nil {
		return err
	}
	return v.validate(event, PartPayload, []string{m.payloadPtr}, body)
}

// ValidateData validates only the `data` member of a webhook body, for the message named event,
// against the data part of that message's payload schema. It returns an *Error (paths relative
// to data), or an error wrapping ErrUnknownEvent.
func ValidateData(event string, data []byte) error {
	v, m, err := messageOf(event)
	if err != nil {
		return err
	}
	return v.validate(event, PartData, m.dataPtrs, data)
}

// ValidateHeaders validates HTTP request headers against the headers schema of the message named
// event. Header names match case-insensitively; headers the schema does not name are allowed.
// A header sent several times is checked as its values joined by ", ". It returns an *Error, or
// an error wrapping ErrUnknownEvent.
func ValidateHeaders(event string, h http.Header) error {
	v, m, err := messageOf(event)
	if err != nil {
		return err
	}
	inst := make(map[string]any, len(h))
	for name, values := range h {
		for _, declared := range m.headerNames {
			if strings.EqualFold(name, declared) {
				name = declared
				break
			}
		}
		joined := strings.Join(values, ", ")
		if prev, ok := inst[name].(string); ok { // same header under two spellings
			joined = prev + ", " + joined
		}
		inst[name] = joined
	}
	body, err := json.Marshal(inst)
	if err != nil {
		return err
	}
	return v.validate(event, PartHeaders, []string{m.headersPtr}, body)
}

// messageOf returns the loaded document and the message named event.
func messageOf(event string) (*validator, *messageInfo, error) {
	v, err := load()
	if err != nil {
		return nil, nil, err
	}
	m, err := v.message(event)
	if err != nil {
		return nil, nil, err
	}
	return v, m, nil
}

// resourceURL names the document inside the compiler; nothing is ever fetched from it.
const resourceURL = "https://gateway.invalid/asyncapi/asyncapi.json"

type messageInfo struct {
	component   string   // key under components/messages
	payloadPtr  string   // JSON pointer of the payload schema
	headersPtr  string   // JSON pointer of the headers schema
	dataPtrs    []string // JSON pointers of every schema the payload applies to `data`
	headerNames []string // header names the headers schema declares
}

type validator struct {
	doc      any                     // the document as JSON-compatible values
	messages map[string]*messageInfo // by event name
	printer  *message.Printer

	mu       sync.Mutex // guards compiler and schemas
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by JSON pointer
}

// load parses the embedded document once.
var load = sync.OnceValues(func() (*validator, error) {
	return newValidator(asyncapi.Document)
})

func newValidator(src []byte) (*validator, error) {
	var raw any
	if err := yaml.Unmarshal(src, &raw); err != nil {
		return nil, fmt.Errorf("eventschema: parse AsyncAPI document: %w", err)
	}
	// Round-trip through JSON: YAML's value types become JSON's (numbers as json.Number).
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("eventschema: convert AsyncAPI document: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, fmt.Errorf("eventschema: convert AsyncAPI document: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // the document is self-contained: load nothing
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("eventschema: %w", err)
	}
	v := &validator{
		doc:      doc,
		messages: map[string]*messageInfo{},
		printer:  message.NewPrinter(language.English),
		compiler: c,
		schemas:  map[string]*jsonschema.Schema{},
	}
	msgs, _ := lookup(doc, "/components/messages").(map[string]any)
	if len(msgs) == 0 {
		return nil, errors.New("eventschema: the AsyncAPI document has no components/messages")
	}
	for component, m := range msgs {
		name, _ := lookup(m, "/name").(string)
		if name == "" {
			return nil, fmt.Errorf("eventschema: message %s has no name", component)
		}
		base := "/components/messages/" + escape(component)
		info := &messageInfo{
			component:  component,
			payloadPtr: base + "/payload",
			headersPtr: base + "/headers",
		}
		v.collectData(info.payloadPtr, &info.dataPtrs)
		if len(info.dataPtrs) == 0 {
			return nil, fmt.Errorf("eventschema: message %s: payload has no data property", component)
		}
		v.collectHeaderNames(info.headersPtr, &info.headerNames)
		v.messages[name] = info
	}
	return v, nil
}

func (v *validator) message(event string) (*messageInfo, error) {
	m, ok := v.messages[event]
	if !ok {
		return nil, fmt.Errorf("eventschema: %w %q", ErrUnknownEvent, event)
	}
	return m, nil
}

// schema compiles (once) the schema at the JSON pointer ptr of the document.
func (v *validator) schema(ptr string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.schemas[ptr]; ok {
		return s, nil
	}
	s, err := v.compiler.Compile(resourceURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("eventschema: compile %s: %w", ptr, err)
	}
	v.schemas[ptr] = s
	return s, nil
}

// validate checks the JSON text body against every schema at ptrs.
func (v *validator) validate(event, part string, ptrs []string, body []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return &Error{Event: event, Part: part, Problems: []Problem{{Message: "not valid JSON: " + err.Error()}}}
	}
	var problems []Problem
	for _, ptr := range ptrs {
		s, err := v.schema(ptr)
		if err != nil {
			return err
		}
		err = s.Validate(inst)
		var verr *jsonschema.ValidationError
		switch {
		case err == nil:
		case errors.As(err, &verr):
			problems = v.leaves(verr, problems)
		default:
			return fmt.Errorf("eventschema: validate %s %s: %w", event, part, err)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.SortFunc(problems, func(a, b Problem) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return &Error{Event: event, Part: part, Problems: slices.Compact(problems)}
}

// leaves appends the innermost errors of e, the ones that name a concrete violation.
func (v *validator) leaves(e *jsonschema.ValidationError, out []Problem) []Problem {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			out = v.leaves(c, out)
		}
		return out
	}
	msg := e.ErrorKind.LocalizedString(v.printer)
	if _, ok := e.ErrorKind.(*kind.Not); ok {
		msg = v.notMessage(e.SchemaURL)
	}
	path := ""
	for _, tok := range e.InstanceLocation {
		path += "/" + escape(tok)
	}
	return append(out, Problem{Path: path, Message: msg})
}

// notMessage explains a failed `not`: `not: {}` means the value must be absent.
func (v *validator) notMessage(schemaURL string) string {
	_, ptr, _ := strings.Cut(schemaURL, "#")
	not, ok := lookup(v.doc, ptr+"/not").(map[string]any)
	if ok && len(not) == 0 {
		return "must be absent"
	}
	if js, err := json.Marshal(not); err == nil && ok {
		return "must not match " + string(js)
	}
	return "'not' failed"
}

// collectData appends the pointers of the schemas that the schema at ptr applies to its `data`
// property, following $ref and allOf.
func (v *validator) collectData(ptr string, out *[]string) {
	v.walk(ptr, 0, func(ptr string, props map[string]any) {
		if _, ok := props["data"]; ok {
			*out = append(*out, ptr+"/properties/data")
		}
	})
}

// collectHeaderNames appends the property names of the headers schema at ptr, following $ref
// and allOf.
func (v *validator) collectHeaderNames(ptr string, out *[]string) {
	v.walk(ptr, 0, func(_ string, props map[string]any) {
		for name := range props {
			if !slices.Contains(*out, name) {
				*out = append(*out, name)
			}
		}
	})
	slices.Sort(*out)
}

// walk calls visit with the properties of the schema at ptr and of every schema it applies
// through $ref and allOf (ptr is where those properties are).
func (v *validator) walk(ptr string, depth int, visit func(ptr string, props map[string]any)) {
	node, ok := lookup(v.doc, ptr).(map[string]any)
	if !ok || depth > 16 {
		return
	}
	if ref, ok := node["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
		v.walk(ref[1:], depth+1, visit)
		return // draft 7: keywords beside $ref are ignored
	}
	if props, ok := node["properties"].(map[string]any); ok {
		visit(ptr, props)
	}
	if all, ok := node["allOf"].([]any); ok {
		for i := range all {
			v.walk(ptr+"/allOf/"+strconv.Itoa(i), depth+1, visit)
		}
	}
}

// lookup returns the value at a JSON pointer, or nil.
func lookup(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// escape encodes a JSON pointer token.
func escape(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}
