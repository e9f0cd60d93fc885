package httpapi_test

import (
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestSendMultipartInvalidValues checks that a multipart send with a part
// that is not of its documented type answers the same x-invalid-message the
// JSON body gets for that field (booleans are the texts true and false),
// not a generic "could not be read".
func TestSendMultipartInvalidValues(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		base := func(extra map[string]string) map[string]string {
			form := map[string]string{"platform": "chatapp", "sender_key": "5511988887777", "contact_key": "5511977776666",
				"contact_is_group": "false", "text": "x"}
			for k, v := range extra {
				form[k] = v
			}
			return form
		}
		cases := []struct {
			name    string
			form    map[string]string
			message string
		}{
			{"contact_is_group not a boolean", base(map[string]string{"contact_is_group": "maybe"}), "contact_is_group must be true or false"},
			{"enqueue not a boolean", base(map[string]string{"enqueue": "yes"}), "Enqueue must be true or false"},
			{"provider_template_id not an integer", base(map[string]string{"platform": "ofc_chatapp", "provider_template_id": "abc"}),
				"provider_template_id must be an integer"},
			{"named_variable_values not a JSON object", base(map[string]string{"platform": "ofc_chatapp", "provider_template_id": "1",
				"named_variable_values": "notjson"}), "Named variable values must be a JSON object of strings"},
			// The platform rules (the body's oneOf on platform) hold for form parts as for JSON.
			{"chatapp without contact_is_group", map[string]string{"platform": "chatapp", "sender_key": "5511988887777",
				"contact_key": "5511977776666", "text": "x"}, "contact_is_group is required with platform chatapp"},
			{"template on chatapp", base(map[string]string{"provider_template_id": "3"}),
				"provider_template_id is only accepted with platform ofc_chatapp"},
			{"platform missing", map[string]string{"sender_key": "5511988887777", "contact_key": "5511977776666", "text": "x"},
				"Platform is required"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: ten.Token, Form: tc.form})
				if resp.Status != 509 {
					t.Fatalf("status %d, want 509: %s", resp.Status, resp.Body)
				}
				if got := resp.Map(t)["message"]; got != tc.message {
					t.Fatalf("message %q, want %q", got, tc.message)
				}
			})
		}
	})
}
