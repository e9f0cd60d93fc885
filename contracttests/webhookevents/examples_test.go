//go:build contract

package webhookevents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/pact-foundation/pact-go/v2/matchers"
	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
)

// Formats the contract states with regexes. Pact regexes are unanchored:
// each carries ^…$.
const (
	uuidRE      = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	timestampRE = `^[0-9]+$`
	signatureRE = `^sha256=[0-9a-f]{64}$`
	attemptRE   = `^[1-5]$`
	// dateTimeRE is the document's "ISO 8601 with offset": RFC 3339 with Z
	// or ±hh:mm, optional fractional seconds.
	dateTimeRE = `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`
)

var (
	uuidPattern     = regexp.MustCompile(uuidRE)
	dateTimePattern = regexp.MustCompile(dateTimeRE)
)

// example is the first example of one message of the AsyncAPI document.
type example struct {
	Event string
	// Variant names a further example of a message event (its name in the
	// document); "" for an event's first example.
	Variant string
	Headers map[string]string
	// Payload is the envelope with numbers as json.Number, so that
	// re-encoding it gives the literal the document wrote.
	Payload map[string]any
}

// documentExamples returns the example of every event of the catalog, in
// catalog order; an event without an example is an error (the pact takes
// its data from there, so that the pact and the catalog agree).
func documentExamples() ([]example, error) {
	firsts, _, err := readExamples()
	return firsts, err
}

// messageVariants are the further examples of the two message events, in
// document order: the shapes a message takes as it changes (a group
// member's message, revoked, edited, refused with status 6). Each is an
// interaction of its own, so the pact covers those shapes too.
func messageVariants() ([]example, error) {
	_, rest, err := readExamples()
	var out []example
	for _, ex := range rest {
		if ex.Event == events.OmnichatMessageReceived || ex.Event == events.OmnichatMessageSent {
			out = append(out, ex)
		}
	}
	return out, err
}

// readExamples returns the first example of every event of the catalog in
// catalog order, and the further examples of each.
func readExamples() (firsts, rest []example, err error) {
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Name     string `yaml:"name"`
				Examples []struct {
					Name    string            `yaml:"name"`
					Headers map[string]string `yaml:"headers"`
					Payload map[string]any    `yaml:"payload"`
				} `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(asyncapi.Document, &doc); err != nil {
		return nil, nil, fmt.Errorf("asyncapi.yaml: %w", err)
	}
	byName := map[string][]example{}
	for _, m := range doc.Components.Messages {
		for i, e := range m.Examples {
			raw, err := json.Marshal(e.Payload)
			if err != nil {
				return nil, nil, fmt.Errorf("%s example: %w", m.Name, err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var payload map[string]any
			if err := dec.Decode(&payload); err != nil {
				return nil, nil, fmt.Errorf("%s example: %w", m.Name, err)
			}
			ex := example{Event: m.Name, Headers: e.Headers, Payload: payload}
			if i > 0 {
				ex.Variant = e.Name
			}
			byName[m.Name] = append(byName[m.Name], ex)
		}
	}
	firsts = make([]example, 0, len(events.Catalog))
	for _, info := range events.Catalog {
		exs := byName[info.Name]
		if len(exs) == 0 {
			return nil, nil, fmt.Errorf("the AsyncAPI document has no example for %s", info.Name)
		}
		firsts = append(firsts, exs[0])
		rest = append(rest, exs[1:]...)
	}
	return firsts, rest, nil
}

// description is the interaction name of an event in the pact.
func description(event string) string { return "a delivery of " + event }

// description is the interaction name of the example in the pact: the
// event's, with the variant's name for a further example.
func (ex example) description() string {
	if ex.Variant == "" {
		return description(ex.Event)
	}
	return description(ex.Event) + " (" + ex.Variant + ")"
}

// body encodes v the way the FFI hands the example to the consumer:
// compact, object keys sorted, no HTML escaping. The consumer signs these
// bytes; if the FFI ever encoded differently the consumer's signature
// check would say so.
func body(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// received is what a subscriber receives for ex, whatever carries it: the
// envelope bytes, their pact matchers, and the example's headers signed for
// real (the document's signatures are illustrative; this one is
// HMAC(testSecret, timestamp + "." + raw)), checked against the event and
// the user agent.
func received(t *testing.T, ex example) (raw []byte, content map[string]any, headers http.Header) {
	t.Helper()
	raw, err := body(ex.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if content, err = envelopeMatchers(ex); err != nil {
		t.Fatal(err)
	}
	headers = http.Header{}
	for k, v := range ex.Headers {
		headers.Set(k, v)
	}
	headers.Set(subscriber.HeaderSignature, subscriber.Sign(testSecret, headers.Get(subscriber.HeaderTimestamp), raw))
	if headers.Get(subscriber.HeaderEvent) != ex.Event || headers.Get("User-Agent") != userAgent {
		t.Fatalf("example headers %v disagree with the event or the user agent", headers)
	}
	return raw, content, headers
}

// envelopeMatchers is the envelope of ex with the rules subscribers rely
// on: event exact (it selects the data type), delivery_id a UUID,
// company_id an integer, occurred_at a date-time with offset, description
// a string, data per its generated type.
func envelopeMatchers(ex example) (map[string]any, error) {
	p := ex.Payload
	for _, k := range []string{"event", "delivery_id", "company_id", "occurred_at", "description", "data"} {
		if _, ok := p[k]; !ok {
			return nil, fmt.Errorf("%s example: envelope has no %s", ex.Event, k)
		}
	}
	companyID, err := p["company_id"].(json.Number).Int64()
	if err != nil {
		return nil, fmt.Errorf("%s example: company_id: %w", ex.Event, err)
	}
	data, err := dataMatchers(p["data"], reflect.TypeOf(events.NewData(ex.Event)).Elem(), "$.data")
	if err != nil {
		return nil, fmt.Errorf("%s example: %w", ex.Event, err)
	}
	return map[string]any{
		"event":       p["event"],
		"delivery_id": matchers.Regex(p["delivery_id"].(string), uuidRE),
		"company_id":  matchers.Integer(int(companyID)),
		"occurred_at": matchers.Regex(p["occurred_at"].(string), dateTimeRE),
		"description": matchers.Like(p["description"]),
		"data":        data,
	}, nil
}

// dataMatchers walks an example value alongside its generated Go type and
// puts a matcher on every leaf: integers (ids, enums, counters) must be
// integers, other numbers numbers, strings strings (UUID and date-time
// strings their format), booleans booleans. A null stays an exact null:
// Pact has no "type or null" rule, so nullable fields are pinned to the
// example's choice (the AsyncAPI schema validation in the webhooks tests
// covers the other branch). A field of the example that the Go type lacks
// is an error: the catalog and the generated types disagree.
func dataMatchers(v any, t reflect.Type, path string) (any, error) {
	if v == nil {
		return nil, nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: example is %T, type %s is an object", path, v, t)
		}
		fields := jsonFields(t)
		out := make(map[string]any, len(obj))
		for k, fv := range obj {
			ft, ok := fields[k]
			if !ok {
				return nil, fmt.Errorf("%s.%s: in the example but not in %s", path, k, t)
			}
			m, err := dataMatchers(fv, ft, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = m
		}
		return out, nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: example %v is not a number", path, v)
		}
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("%s: example %s is not an integer", path, n)
		}
		return matchers.Integer(int(i)), nil
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return nil, fmt.Errorf("%s: example %v is not a number", path, v)
		}
		return matchers.Like(v), nil
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: example %v is not a string", path, v)
		}
		switch {
		case uuidPattern.MatchString(s):
			return matchers.Regex(s, uuidRE), nil
		case dateTimePattern.MatchString(s):
			return matchers.Regex(s, dateTimeRE), nil
		}
		return matchers.Like(s), nil
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return nil, fmt.Errorf("%s: example %v is not a boolean", path, v)
		}
		return matchers.Like(v), nil
	case reflect.Interface:
		// Values whose type depends on another field (crm.business.updated
		// previous/new): the example's type.
		return matchers.Like(v), nil
	}
	return nil, fmt.Errorf("%s: no matcher for Go type %s", path, t)
}

// jsonFields maps the JSON names of t's fields to their types, with the
// fields of embedded structs promoted as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out[tag] = f.Type
	}
	return out
}
