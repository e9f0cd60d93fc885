package providersim_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/providersim"
)

func start(t *testing.T) (*httptest.Server, providersim.Control) {
	t.Helper()
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	ctl := providersim.Control{URL: srv.URL, HTTP: srv.Client()}
	if err := ctl.AddAccount(context.Background(), providersim.Account{PhoneNumberID: "111", BusinessAccountID: "222", AccessToken: "tok", AppSecret: "sec"}); err != nil {
		t.Fatal(err)
	}
	return srv, ctl
}

func post(t *testing.T, srv *httptest.Server, path, token, body string) (int, providersim.ErrorBody) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb providersim.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb
}

// TestSendValidation: the simulator checks sends the way the platform does,
// so the gateway's requests are really checked.
func TestSendValidation(t *testing.T) {
	t.Parallel()
	srv, ctl := start(t)
	ctx := context.Background()
	if _, err := ctl.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: "222", Templates: []providersim.Template{
		{Name: "t", Language: "pt_BR", Components: []providersim.TemplateDefComponent{{Type: "BODY", Text: "{{1}} {{2}}"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		token  string
		body   string
		status int
		code   int
	}{
		{"text", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":"hi"}}`, 200, 0},
		{"wrong token", "bad", `{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":"hi"}}`, 401, 190},
		{"empty text", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":""}}`, 400, 100},
		{"bad recipient", "tok", `{"messaging_product":"whatsapp","to":"abc","type":"text","text":{"body":"hi"}}`, 400, 100},
		{"unknown media id", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"image","image":{"id":"nope"}}`, 400, 100},
		{"template with its parameters", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"template","template":{"name":"t","language":{"code":"pt_BR"},"components":[{"type":"body","parameters":[{"type":"text","text":"a"},{"type":"text","text":""}]}]}}`, 200, 0},
		{"template missing a parameter", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"template","template":{"name":"t","language":{"code":"pt_BR"},"components":[{"type":"body","parameters":[{"type":"text","text":"a"}]}]}}`, 400, 132000},
		{"unknown template", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"template","template":{"name":"x","language":{"code":"pt_BR"}}}`, 400, 132001},
		{"edit is no message type", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"edit","edit":{"message_id":"m","text":{"body":"x"}}}`, 400, 100},
		{"revoke is no message type", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"revoke","revoke":{"message_id":"m"}}`, 400, 100},
		{"unknown field", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":"hi"},"edit":{}}`, 400, 100},
		{"malformed authorization", "", `{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":"hi"}}`, 401, 190},
		{"mark as read", "tok", `{"messaging_product":"whatsapp","status":"read","message_id":"wamid.x"}`, 200, 0},
	}
	// The accepted sends among the cases that ran (one may run alone), for
	// the count of stored messages below; marking as read stores none.
	stored := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := post(t, srv, "/111/messages", tc.token, tc.body)
			if status != tc.status || eb.Error.Code != tc.code {
				t.Errorf("%d code %d, want %d code %d (%+v)", status, eb.Error.Code, tc.status, tc.code, eb)
			}
			if tc.status == http.StatusOK && !strings.Contains(tc.body, `"status":"read"`) {
				stored++
			}
		})
	}
	if err := ctl.Refuse(ctx, providersim.FaultRequest{PhoneNumberID: "111", Reason: providersim.ReasonMarketingLimit, Count: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		status, eb := post(t, srv, "/111/messages", "tok", `{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":"hi"}}`)
		if want := map[bool]int{true: 400, false: 200}[i < 2]; status != want || (i < 2 && eb.Error.ErrorData.Details == "") {
			t.Errorf("send %d after 2 queued refusals: %d %+v", i, status, eb)
		}
	}
	list, err := ctl.Messages(ctx, "111")
	if err != nil || len(list) != stored+1 {
		t.Fatalf("accepted sends: %d %v, want %d", len(list), err, stored+1)
	}
	// The count load tools poll agrees with the list (refusals are no message).
	if st, err := ctl.Stats(ctx); err != nil || st.Messages != len(list) {
		t.Fatalf("stats: %+v %v, want %d messages", st, err, len(list))
	}
}
