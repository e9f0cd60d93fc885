package providersim_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/providersim"
)

// TestSentReceipts: with SentReceipts the simulator posts each accepted
// message's signed `sent` status, carrying the sender's callback data, and
// keeps trying while the receiver does not take it (a gateway that is down
// or restarting), as the platform does.
func TestSentReceipts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	refusals := 2
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Hub-Signature-256") != providersim.Sign("sec", b) {
			t.Errorf("unsigned or badly signed webhook")
		}
		if refusals > 0 {
			refusals--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		bodies = append(bodies, b)
	}))
	t.Cleanup(hook.Close)

	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler), SentReceipts: true})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	ctl := providersim.Control{URL: srv.URL, HTTP: srv.Client()}
	if err := ctl.AddAccount(context.Background(), providersim.Account{PhoneNumberID: "111", BusinessAccountID: "222",
		AccessToken: "tok", AppSecret: "sec", WebhookURL: hook.URL}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/111/messages", strings.NewReader(
		`{"messaging_product":"whatsapp","to":"5511977776666","type":"text","text":{"body":"hi"},"biz_opaque_callback_data":"42"}`))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sent providersim.SendResponse
	_ = json.NewDecoder(resp.Body).Decode(&sent)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(sent.Messages) != 1 {
		t.Fatalf("send: %d %+v", resp.StatusCode, sent)
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("%d receipts taken after two refusals, want 1", len(bodies))
	}
	var generic map[string]any
	if err := json.Unmarshal(bodies[0], &generic); err != nil {
		t.Fatal(err)
	}
	st := generic["entry"].([]any)[0].(map[string]any)["changes"].([]any)[0].(map[string]any)["value"].(map[string]any)["statuses"].([]any)[0].(map[string]any)
	if st["id"] != sent.Messages[0].ID || st["status"] != "sent" || st["biz_opaque_callback_data"] != "42" {
		t.Fatalf("receipt %v for message %s", st, sent.Messages[0].ID)
	}
}
