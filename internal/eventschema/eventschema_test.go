package eventschema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/eventschema"
)

// docMessage is a message of the AsyncAPI document, read independently of the package under test.
type docMessage struct {
	Component    string
	Name         string         `yaml:"name"`
	Description  string         `yaml:"description"`
	Scope        string         `yaml:"x-scope"`
	Subscribable *bool          `yaml:"x-subscribable"`
	Examples     []docExample   `yaml:"examples"`
	Headers      map[string]any `yaml:"headers"`
}

type docExample struct {
	Name    string            `yaml:"name"`
	Headers map[string]string `yaml:"headers"`
	Payload map[string]any    `yaml:"payload"`
}

// documentMessages returns components.messages in document order.
func documentMessages(t *testing.T) []docMessage {
	t.Helper()
	var doc struct {
		Components struct {
			Messages yaml.Node `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(asyncapi.Document, &doc); err != nil {
		t.Fatal(err)
	}
	n := doc.Components.Messages
	var out []docMessage
	for i := 0; i+1 < len(n.Content); i += 2 {
		var m docMessage
		if err := n.Content[i+1].Decode(&m); err != nil {
			t.Fatalf("message %s: %v", n.Content[i].Value, err)
		}
		m.Component = n.Content[i].Value
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Fatal("no messages in the document")
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clone deep-copies a JSON-like value through JSON.
func clone(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(mustJSON(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func headerOf(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

func firstParagraph(s string) string {
	para, _, _ := strings.Cut(strings.TrimSpace(s), "\n\n")
	return strings.Join(strings.Fields(para), " ")
}

func TestDocumentExamplesValidate(t *testing.T) {
	t.Parallel()
	for _, m := range documentMessages(t) {
		t.Run(m.Component, func(t *testing.T) {
			t.Parallel()
			if len(m.Examples) == 0 {
				t.Fatal("message has no examples")
			}
			for _, ex := range m.Examples {
				if err := eventschema.ValidatePayload(m.Name, mustJSON(t, ex.Payload)); err != nil {
					t.Errorf("example %s payload: %v", ex.Name, err)
				}
				if err := eventschema.ValidateHeaders(m.Name, headerOf(ex.Headers)); err != nil {
					t.Errorf("example %s headers: %v", ex.Name, err)
				}
				if err := eventschema.ValidateData(m.Name, mustJSON(t, ex.Payload["data"])); err != nil {
					t.Errorf("example %s data: %v", ex.Name, err)
				}
				// Consistency the schemas cannot express.
				if got := ex.Headers["X-Svc-Delivery"]; got != ex.Payload["delivery_id"] {
					t.Errorf("example %s: X-Svc-Delivery %q != delivery_id %v", ex.Name, got, ex.Payload["delivery_id"])
				}
				if got, want := ex.Payload["description"], firstParagraph(m.Description); got != want {
					t.Errorf("example %s: description %q, want the catalog text %q", ex.Name, got, want)
				}
			}
		})
	}
}

// TestGeneratedTypesMatchExamples decodes every example into the generated Go types, rejecting
// unknown fields, and checks that encoding them again gives the same JSON, which validates.
func TestGeneratedTypesMatchExamples(t *testing.T) {
	t.Parallel()
	for _, m := range documentMessages(t) {
		t.Run(m.Component, func(t *testing.T) {
			t.Parallel()
			for _, ex := range m.Examples {
				body := mustJSON(t, ex.Payload)
				var env events.Envelope
				strictDecode(t, body, &env)
				if env.Event != m.Name {
					t.Errorf("example %s: envelope event %q", ex.Name, env.Event)
				}
				data := events.NewData(m.Name)
				if data == nil {
					t.Fatalf("NewData(%q) = nil", m.Name)
				}
				strictDecode(t, env.Data, data)
				again := mustJSON(t, data)
				if err := eventschema.ValidateData(m.Name, again); err != nil {
					t.Errorf("example %s: re-encoded %T: %v", ex.Name, data, err)
				}
				var want, got any
				_ = json.Unmarshal(env.Data, &want)
				_ = json.Unmarshal(again, &got)
				if !reflect.DeepEqual(want, got) {
					t.Errorf("example %s: %T round trip changed the data:\n got %s\nwant %s", ex.Name, data, again, env.Data)
				}
			}
		})
	}
	if events.NewData("no.such.event") != nil {
		t.Error("NewData of an unknown event is not nil")
	}
}

func strictDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode into %T: %v\n%s", v, err, b)
	}
}

func TestCatalogMatchesDocument(t *testing.T) {
	t.Parallel()
	msgs := documentMessages(t)
	if len(events.Catalog) != len(msgs) {
		t.Fatalf("catalog has %d events, document %d messages", len(events.Catalog), len(msgs))
	}
	for i, m := range msgs {
		info := events.Catalog[i]
		if info.Name != m.Name {
			t.Errorf("catalog[%d] = %q, document order has %q", i, info.Name, m.Name)
		}
		if string(info.Scope) != m.Scope {
			t.Errorf("%s: scope %q, document %q", m.Name, info.Scope, m.Scope)
		}
		if m.Subscribable == nil || info.Subscribable != *m.Subscribable {
			t.Errorf("%s: subscribable %v, document %v", m.Name, info.Subscribable, m.Subscribable)
		}
		if want := firstParagraph(m.Description); info.Description != want {
			t.Errorf("%s: description %q, document %q", m.Name, info.Description, want)
		}
		if got, ok := events.Lookup(m.Name); !ok || got != info {
			t.Errorf("Lookup(%q) = %+v, %v", m.Name, got, ok)
		}
	}

	// The events of the API document's catalog, with their scope.
	want := map[string]events.Scope{
		events.OmnichatMessageReceived:      events.ScopeChannel,
		events.OmnichatMessageSent:          events.ScopeChannel,
		events.OmnichatConversationCreated:  events.ScopeChannel,
		events.OmnichatConversationAssigned: events.ScopeChannel,
		events.OmnichatConversationClosed:   events.ScopeChannel,
		events.CrmBusinessCreated:           events.ScopeCompany,
		events.CrmBusinessUpdated:           events.ScopeCompany,
		events.CrmBusinessStageChanged:      events.ScopeCompany,
		events.CrmBusinessWon:               events.ScopeCompany,
		events.CrmBusinessLost:              events.ScopeCompany,
		events.CrmBusinessArchived:          events.ScopeCompany,
		events.ContactImportCompleted:       events.ScopeCompany,
		// Extension: the chat-app connection state.
		events.ChatappConnectionStateChanged: events.ScopeChannel,
	}
	sub := events.Subscribable()
	if len(sub) != len(want) {
		t.Errorf("Subscribable() has %d events, want %d", len(sub), len(want))
	}
	for _, info := range sub {
		if scope, ok := want[info.Name]; !ok || scope != info.Scope {
			t.Errorf("subscribable %q scope %q; want scope %q (listed: %v)", info.Name, info.Scope, scope, ok)
		}
	}
	ping, ok := events.Lookup(events.Ping)
	if !ok || ping.Name != "ping" || ping.Subscribable || ping.Scope != events.ScopeNone {
		t.Errorf("ping = %+v, %v; want not subscribable, scope none", ping, ok)
	}
	if _, ok := events.Lookup("omnichat.message.deleted"); ok {
		t.Error("Lookup of an unknown event succeeded")
	}
}

// example returns a deep copy of the first example of the message named event.
func example(t *testing.T, event string) (map[string]string, map[string]any) {
	t.Helper()
	for _, m := range documentMessages(t) {
		if m.Name == event {
			ex := m.Examples[0]
			h := make(map[string]string, len(ex.Headers))
			for k, v := range ex.Headers {
				h[k] = v
			}
			return h, clone(t, ex.Payload)
		}
	}
	t.Fatalf("no message %q", event)
	return nil, nil
}

func data(p map[string]any) map[string]any { return p["data"].(map[string]any) }

func TestBrokenPayloadsFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		event    string
		mutate   func(p map[string]any)
		wantPath string // a problem at this path
		wantMsg  string // whose message contains this
	}{
		{"missing field", events.OmnichatMessageReceived,
			func(p map[string]any) { delete(data(p), "uuid") }, "/data", "missing property 'uuid'"},
		{"missing envelope field", events.CrmBusinessWon,
			func(p map[string]any) { delete(p, "delivery_id") }, "", "missing property 'delivery_id'"},
		{"wrong type", events.OmnichatMessageReceived,
			func(p map[string]any) { data(p)["id"] = "884213" }, "/data/id", "got string, want integer"},
		{"wrong type in nested object", events.OmnichatMessageSent,
			func(p map[string]any) { data(p)["conversation"].(map[string]any)["is_group"] = "no" }, "/data/conversation/is_group", "want boolean"},
		{"null where not nullable", events.OmnichatMessageSent,
			func(p map[string]any) { data(p)["text"] = nil }, "/data/text", "got null, want string"},
		{"wrong event const", events.OmnichatMessageReceived,
			func(p map[string]any) { p["event"] = events.OmnichatMessageSent }, "/event", "value must be 'omnichat.message.received'"},
		{"received from an attendant", events.OmnichatMessageReceived,
			func(p map[string]any) { data(p)["message_source_id"] = 1 }, "/data/message_source_id", "value must be 2"},
		{"sent by the contact", events.OmnichatMessageSent,
			func(p map[string]any) { data(p)["message_source_id"] = 2 }, "/data/message_source_id", "must not match"},
		{"unknown enum value", events.OmnichatConversationCreated,
			func(p map[string]any) { data(p)["channel_type_id"] = 9 }, "/data/channel_type_id", "value must be one of 1, 2, 3, 4, 5, 6"},
		{"change_context on created", events.OmnichatConversationCreated,
			func(p map[string]any) {
				data(p)["change_context"] = map[string]any{"previous_user_id": nil, "assigned_user_id": 57}
			}, "/data/change_context", "must be absent"},
		{"change_context on business created", events.CrmBusinessCreated,
			func(p map[string]any) { data(p)["change_context"] = map[string]any{} }, "/data/change_context", "must be absent"},
		{"missing change_context on assigned", events.OmnichatConversationAssigned,
			func(p map[string]any) { delete(data(p), "change_context") }, "/data", "missing property 'change_context'"},
		{"assigned without assigned user", events.OmnichatConversationAssigned,
			func(p map[string]any) { data(p)["assigned_user"] = nil }, "/data/assigned_user", "got null, want object"},
		{"incomplete change_context on closed", events.OmnichatConversationClosed,
			func(p map[string]any) { delete(data(p)["change_context"].(map[string]any), "previous_status_id") },
			"/data/change_context", "missing property 'previous_status_id'"},
		{"closed while in progress", events.OmnichatConversationClosed,
			func(p map[string]any) { data(p)["status_id"] = 3 }, "/data/status_id", "value must be one of 4, 5"},
		{"updated with an unknown field", events.CrmBusinessUpdated,
			func(p map[string]any) {
				data(p)["change_context"].(map[string]any)["change"].(map[string]any)["field"] = "title"
			}, "/data/change_context/change/field", "value must be one of 'value', 'owner', 'score'"},
		{"updated owner with a name", events.CrmBusinessUpdated,
			func(p map[string]any) {
				data(p)["change_context"] = map[string]any{"change": map[string]any{"field": "owner", "previous": 57, "new": "Ana"}}
			}, "/data/change_context/change/new", "want null or integer"},
		{"won without sold_at", events.CrmBusinessWon,
			func(p map[string]any) { data(p)["sold_at"] = nil }, "/data/sold_at", "got null, want string"},
		{"bad date-time", events.OmnichatMessageReceived,
			func(p map[string]any) { data(p)["revoked_at"] = "yesterday" }, "/data/revoked_at", "not valid date-time"},
		{"date-time without offset", events.ContactImportCompleted,
			func(p map[string]any) { p["occurred_at"] = "2025-03-14T11:00:00" }, "/occurred_at", "not valid date-time"},
		{"bad uuid", events.Ping,
			func(p map[string]any) { p["delivery_id"] = "delivery-1" }, "/delivery_id", "not valid uuid"},
		{"ping data not an object", events.Ping,
			func(p map[string]any) { p["data"] = []any{} }, "/data", "got array, want object"},
		{"negative counter", events.ContactImportCompleted,
			func(p map[string]any) { data(p)["failed_contacts"] = -1 }, "/data/failed_contacts", "minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, payload := example(t, tt.event)
			tt.mutate(payload)
			err := eventschema.ValidatePayload(tt.event, mustJSON(t, payload))
			requireProblem(t, err, eventschema.PartPayload, tt.wantPath, tt.wantMsg)

			// ValidateData reports the same problem, relative to data.
			if rel, ok := strings.CutPrefix(tt.wantPath, "/data"); ok {
				err := eventschema.ValidateData(tt.event, mustJSON(t, payload["data"]))
				requireProblem(t, err, eventschema.PartData, rel, tt.wantMsg)
			}
		})
	}
}

func TestBrokenHeadersFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		mutate   func(h http.Header)
		wantPath string
		wantMsg  string
	}{
		{"bad signature", func(h http.Header) { h.Set("X-Svc-Signature", "sha256=ABCDEF") },
			"/X-Svc-Signature", "does not match pattern"},
		{"signature without prefix", func(h http.Header) {
			h.Set("X-Svc-Signature", strings.TrimPrefix(h.Get("X-Svc-Signature"), "sha256="))
		}, "/X-Svc-Signature", "does not match pattern"},
		{"missing signature", func(h http.Header) { h.Del("X-Svc-Signature") }, "", "missing property 'X-Svc-Signature'"},
		{"wrong event", func(h http.Header) { h.Set("X-Svc-Event", "ping") }, "/X-Svc-Event", "value must be 'omnichat.conversation.assigned'"},
		{"attempt 6", func(h http.Header) { h.Set("X-Svc-Attempt", "6") }, "/X-Svc-Attempt", "does not match pattern"},
		{"attempt 0", func(h http.Header) { h.Set("X-Svc-Attempt", "0") }, "/X-Svc-Attempt", "does not match pattern"},
		{"timestamp not digits", func(h http.Header) { h.Set("X-Svc-Timestamp", "2025-03-14T10:24:00Z") },
			"/X-Svc-Timestamp", "does not match pattern"},
		{"delivery not a uuid", func(h http.Header) { h.Set("X-Svc-Delivery", "42") }, "/X-Svc-Delivery", "not valid uuid"},
		{"wrong user agent", func(h http.Header) { h.Set("User-Agent", "Go-http-client/1.1") }, "/User-Agent", "value must be 'Svc-Webhooks/1.0'"},
		{"not JSON", func(h http.Header) { h.Set("Content-Type", "text/plain") }, "/Content-Type", "does not match pattern"},
		{"signature twice", func(h http.Header) { h.Add("X-Svc-Signature", h.Get("X-Svc-Signature")) },
			"/X-Svc-Signature", "does not match pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hm, _ := example(t, events.OmnichatConversationAssigned)
			h := headerOf(hm)
			tt.mutate(h)
			err := eventschema.ValidateHeaders(events.OmnichatConversationAssigned, h)
			requireProblem(t, err, eventschema.PartHeaders, tt.wantPath, tt.wantMsg)
		})
	}
}

func TestHeadersAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	hm, _ := example(t, events.CrmBusinessLost)
	h := http.Header{}
	for k, v := range hm {
		h[strings.ToLower(k)] = []string{v} // not canonicalized, as a raw map could hold them
	}
	h["content-type"] = []string{"application/json; charset=utf-8"}
	h.Set("Accept-Encoding", "gzip") // undeclared headers are allowed
	if err := eventschema.ValidateHeaders(events.CrmBusinessLost, h); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownEventAndBadJSON(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"payload": eventschema.ValidatePayload("omnichat.message.deleted", []byte(`{}`)),
		"data":    eventschema.ValidateData("", []byte(`{}`)),
		"headers": eventschema.ValidateHeaders("PING", http.Header{}),
	} {
		if !errors.Is(err, eventschema.ErrUnknownEvent) {
			t.Errorf("%s: err = %v, want ErrUnknownEvent", name, err)
		}
	}
	err := eventschema.ValidatePayload(events.Ping, []byte(`{"event":"ping"`))
	requireProblem(t, err, eventschema.PartPayload, "", "not valid JSON")
	err = eventschema.ValidatePayload(events.Ping, []byte(`{} {}`))
	requireProblem(t, err, eventschema.PartPayload, "", "not valid JSON")
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	msgs := documentMessages(t)
	var wg sync.WaitGroup
	for range 8 {
		for _, m := range msgs {
			wg.Go(func() {
				ex := m.Examples[0]
				if err := eventschema.ValidatePayload(m.Name, mustJSON(t, ex.Payload)); err != nil {
					t.Error(err)
				}
				if err := eventschema.ValidateHeaders(m.Name, headerOf(ex.Headers)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
}

// requireProblem checks that err is an *eventschema.Error for part with a problem at path whose
// message contains msg, and that the error text names that path.
func requireProblem(t *testing.T, err error, part, path, msg string) {
	t.Helper()
	var verr *eventschema.Error
	if !errors.As(err, &verr) {
		t.Fatalf("err = %v (%T), want *eventschema.Error", err, err)
	}
	if verr.Part != part {
		t.Errorf("part = %q, want %q", verr.Part, part)
	}
	for _, p := range verr.Problems {
		if p.Path == path && strings.Contains(p.Message, msg) {
			shown := path
			if shown == "" {
				shown = "(root)"
			}
			if !strings.Contains(err.Error(), shown+": ") {
				t.Errorf("error text %q does not name the path %q", err, shown)
			}
			return
		}
	}
	t.Errorf("no problem at %q containing %q in:\n%v", path, msg, err)
}
