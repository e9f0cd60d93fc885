//go:build contract

package webhookevents

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// nodeTools is the npm project that pins the standardwebhooks package
// (installed by contracttests/tools/run.sh).
const nodeTools = "../tools/standardwebhooks"

// captured is one request as the receiver got it.
type captured struct {
	Name       string            `json:"name"`
	Headers    map[string]string `json:"headers"`
	BodyBase64 string            `json:"body_base64"`
}

// TestStandardWebhooksIndependentCheck has the real gateway (router, River
// workers, delivery lanes) deliver to a receiver on 127.0.0.1 for a
// subscription with signature_scheme standard-webhooks, then verifies every
// captured request with the npm standardwebhooks package under node: an
// implementation of the specification we did not write. The deliveries are
// a ping, a message event whose body has non-ASCII text, and a redelivery of
// the ping (new timestamp and signature, same webhook-id).
func TestStandardWebhooksIndependentCheck(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the Standard Webhooks check: ", err)
	}
	if _, err := os.Stat(filepath.Join(nodeTools, "node_modules", "standardwebhooks")); err != nil {
		t.Fatalf("%s/node_modules is missing: run contracttests/tools/run.sh (it runs npm ci there)", nodeTools)
	}
	examples, err := documentExamples()
	if err != nil {
		t.Fatal(err)
	}
	var received example
	for _, ex := range examples {
		if ex.Event == events.OmnichatMessageReceived {
			received = ex
		}
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		var mu sync.Mutex
		var got []captured
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			c := captured{Name: r.Header.Get("X-Svc-Event"), Headers: map[string]string{}, BodyBase64: base64.StdEncoding.EncodeToString(body)}
			for k := range r.Header {
				c.Headers[strings.ToLower(k)] = r.Header.Get(k)
			}
			mu.Lock()
			got = append(got, c)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		waitFor := func(n int) []captured {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				out := append([]captured(nil), got...)
				mu.Unlock()
				if len(out) >= n {
					return out
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d deliveries arrived, want %d", len(out), n)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}

		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ten := h.Tenant("Acme")
		resp := h.Do(apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token, JSON: map[string]any{
			"name": "standard", "url": srv.URL + "/hook", "signature_scheme": "standard-webhooks"}})
		var created struct {
			Data struct {
				ID int `json:"id"`
			} `json:"data"`
			Secret string `json:"secret"`
		}
		if resp.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		resp.JSON(t, &created)
		sub := created.Data.ID

		if resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", sub), Token: ten.Token}); resp.Status != http.StatusOK {
			t.Fatalf("test: %d %s", resp.Status, resp.Body)
		}
		pingID := waitFor(1)[0].Headers["webhook-id"]

		data, err := json.Marshal(received.Payload["data"])
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.Replace(data, []byte(`"text":"`), []byte(`"text":"Olá — ✓ <b> & `), 1)
		ch := int64(12)
		err = h.App.DB.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
			return h.App.Webhooks.Publish(ctx, tx, webhooks.Event{Name: events.OmnichatMessageReceived, CompanyID: ten.CompanyID,
				CompanyChannelID: &ch, OccurredAt: time.Now(), Data: json.RawMessage(data)})
		})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(2)
		// The ping's log entry is written with the end of its delivery; then
		// it can be redelivered.
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries/%s/redeliver", sub, pingID), Token: ten.Token})
			if resp.Status == http.StatusOK {
				break
			}
			if resp.Status != 509 || time.Now().After(deadline) {
				t.Fatalf("redeliver: %d %s", resp.Status, resp.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		deliveries := waitFor(3)

		input, err := json.Marshal(map[string]any{"secret": created.Secret,
			"wrong_secret": "whsec_" + strings.Repeat("ab", 32), "deliveries": deliveries})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, "verify.mjs")
		cmd.Dir = nodeTools
		cmd.Stdin = bytes.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node verify.mjs: %v\n%s", err, stderr.String())
		}
		var results []struct {
			Name                string  `json:"name"`
			Verified            bool    `json:"verified"`
			Error               *string `json:"error"`
			DeliveryID          *string `json:"delivery_id"`
			TamperedRejected    bool    `json:"tampered_rejected"`
			WrongSecretRejected bool    `json:"wrong_secret_rejected"`
		}
		if err := json.Unmarshal(out, &results); err != nil {
			t.Fatalf("node output %q: %v", out, err)
		}
		if len(results) != len(deliveries) {
			t.Fatalf("node checked %d deliveries, want %d", len(results), len(deliveries))
		}
		for i, r := range results {
			id := deliveries[i].Headers["webhook-id"]
			if !r.Verified || r.DeliveryID == nil || *r.DeliveryID != id || !r.TamperedRejected || !r.WrongSecretRejected {
				t.Errorf("delivery %d (%s): standardwebhooks says %+v (error %v)", i, r.Name, r, deref(r.Error))
			}
			if deliveries[i].Headers["x-svc-signature"] != "" {
				t.Errorf("delivery %d carries X-Svc-Signature too", i)
			}
		}
		if deliveries[2].Headers["webhook-id"] != pingID || deliveries[2].BodyBase64 != deliveries[0].BodyBase64 {
			t.Errorf("the redelivery is not the ping again: %+v", deliveries[2])
		}
		t.Logf("standardwebhooks (npm) verified %d deliveries: %s, %s, %s (redelivered)", len(results),
			deliveries[0].Name, deliveries[1].Name, deliveries[2].Name)
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
