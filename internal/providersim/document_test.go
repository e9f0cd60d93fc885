package providersim_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/providersim"
)

// examplePlaceholders are values of the document's examples that stand for
// something the reader fills in where the schema wants one of a few words:
// the test fills them as a reader would; the validator is not relaxed for
// them.
var examplePlaceholders = map[string][2]string{
	"Send Multi-Product Message": {`"type":"\u003cHEADER_TYPE\u003e"`, `"type":"text"`},
}

// TestDocumentExamplesPass: every send example and every webhook example of
// the provider's document passes the validator with its relaxations.
func TestDocumentExamplesPass(t *testing.T) {
	t.Parallel()
	doc := providersim.MustLoadDocument()
	for _, tc := range []struct {
		op    string
		count int
	}{{providersim.OpSendMessage, 50}, {providersim.OpWebhook, 16}} {
		t.Run(tc.op, func(t *testing.T) {
			ex, err := doc.RequestExamples(tc.op)
			if err != nil {
				t.Fatal(err)
			}
			if len(ex) != tc.count {
				t.Errorf("%d examples, want %d", len(ex), tc.count)
			}
			names := make([]string, 0, len(ex))
			for n := range ex {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				body := string(ex[n])
				if p, ok := examplePlaceholders[n]; ok {
					if !strings.Contains(body, p[0]) {
						t.Fatalf("example %q no longer has the placeholder %s", n, p[0])
					}
					body = strings.ReplaceAll(body, p[0], p[1])
				}
				if err := doc.ValidateRequest(tc.op, []byte(body)); err != nil {
					t.Errorf("example %q: %v", n, err)
				}
			}
		})
	}
}

// TestDocumentRefuses: the relaxations leave the document's rules in force.
func TestDocumentRefuses(t *testing.T) {
	t.Parallel()
	doc := providersim.MustLoadDocument()
	base := `"messaging_product":"whatsapp","recipient_type":"individual","to":"5511977776666"`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"edit is no message type", `{` + base + `,"type":"edit","edit":{"message_id":"wamid.x","text":{"body":"x"}}}`, `"edit" is not a message type`},
		{"revoke is no message type", `{` + base + `,"type":"revoke","revoke":{"message_id":"wamid.x"}}`, `"revoke" is not a message type`},
		{"unknown property", `{` + base + `,"type":"text","text":{"body":"x"},"colour":"red"}`, "colour"},
		{"unknown text property", `{` + base + `,"type":"text","text":{"body":"x","bold":true}}`, "bold"},
		{"no recipient", `{"messaging_product":"whatsapp","type":"text","text":{"body":"x"}}`, "to"},
		{"media by id and link", `{` + base + `,"type":"image","image":{"id":"1","link":"https://x.test/a.png"}}`, "/image"},
		{"media without id or link", `{` + base + `,"type":"document","document":{"filename":"a.pdf"}}`, "/document"},
		{"template without language", `{` + base + `,"type":"template","template":{"name":"t"}}`, "language"},
		{"button without sub_type", `{` + base + `,"type":"template","template":{"name":"t","language":{"code":"pt_BR"},"components":[{"type":"button","index":"0","parameters":[{"type":"text","text":"x"}]}]}}`, "sub_type"},
		{"callback data too long", `{` + base + `,"type":"text","text":{"body":"x"},"biz_opaque_callback_data":"` + strings.Repeat("a", 513) + `"}`, "biz_opaque_callback_data"},
		{"not JSON", `{`, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := doc.ValidateRequest(providersim.OpSendMessage, []byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error naming %s", err, tc.want)
			}
			if err != nil && len(err.Error()) > 310 {
				t.Errorf("refusal of %d bytes", len(err.Error()))
			}
		})
	}
}
