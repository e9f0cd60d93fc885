package providersim

import (
	"strings"
	"testing"
)

// TestEveryRelaxationIsNeeded: the validator departs from the provider's
// document only where it must. Without any one relaxation, something it
// has to accept — one of the document's own examples, or what the platform
// and the gateway send (biz_opaque_callback_data) — is refused.
func TestEveryRelaxationIsNeeded(t *testing.T) {
	t.Parallel()
	full := MustLoadDocument()
	probes := map[string][]byte{}
	for _, op := range []string{OpSendMessage, OpWebhook} {
		ex, err := full.RequestExamples(op)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range ex {
			probes[op+" "+name] = []byte(strings.ReplaceAll(string(b), `"type":"\u003cHEADER_TYPE\u003e"`, `"type":"text"`))
		}
	}
	probes[OpSendMessage+" with callback data"] = []byte(`{"messaging_product":"whatsapp","recipient_type":"individual","to":"5511977776666",` +
		`"type":"text","text":{"body":"x"},"biz_opaque_callback_data":"42"}`)
	validate := func(d *Document, key string) error {
		return d.ValidateRequest(strings.SplitN(key, " ", 2)[0], probes[key])
	}
	for key := range probes {
		if err := validate(full, key); err != nil {
			t.Fatalf("%s fails with every relaxation: %v", key, err)
		}
	}
	for i, r := range Relaxations {
		if r.Where == "" || len(r.Why) < 40 {
			t.Errorf("relaxation %d has no place or reason: %+v", i, r)
		}
		without := append(append([]Relaxation{}, Relaxations[:i]...), Relaxations[i+1:]...)
		d, err := compileDocument(without)
		if err != nil {
			t.Fatalf("without %q: %v", r.Where, err)
		}
		needed := false
		for key := range probes {
			if validate(d, key) != nil {
				needed = true
				break
			}
		}
		if !needed {
			t.Errorf("relaxation %q is not needed by any example or probe", r.Where)
		}
	}
}
