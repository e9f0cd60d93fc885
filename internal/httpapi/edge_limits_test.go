package httpapi_test

import (
	"bufio"
	"bytes"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// maxLogLine is the longest log line one request may cause: a bounded
// summary (operation, field, rule) plus the fixed attributes.
const maxLogLine = 1024

// logTap collects the app's log lines to measure them.
type logTap struct {
	mu      sync.Mutex
	longest int
	line    string // the longest line, clipped, for the failure message
	total   int
}

func (l *logTap) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(nil, len(p)+1)
	for sc.Scan() {
		n := len(sc.Bytes())
		l.total += n
		if n > l.longest {
			l.longest = n
			l.line = string(sc.Bytes()[:min(n, 300)])
		}
	}
	return len(p), nil
}

// check fails the test when a log line was longer than maxLogLine.
func (l *logTap) check(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.longest > maxLogLine {
		t.Errorf("%s: a log line of %d bytes (limit %d): %s…", what, l.longest, maxLogLine, l.line)
	}
}

func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// TestHostileInputCostsLittle sends requests built to amplify: deep
// nesting, long query strings, bodies over their operation's limit, bodies
// that fail validation everywhere. Each gets its operation's documented
// status and a clear message, and writes only short log lines.
func TestHostileInputCostsLittle(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		logs := &logTap{}
		h := apitest.Start(t, db, apitest.Options{Logs: logs})
		ten := h.Tenant("Acme")
		manyErrors := `{"name":[` + strings.Repeat(`{"a":1},`, 60000) + `{"a":1}],"url":5,"events":[` + strings.Repeat(`7,`, 20000) + `7]}`
		overJSON := `{"platform":"chatapp","text":"` + strings.Repeat("a", 1<<20) + `"}`

		cases := []struct {
			name    string
			req     apitest.Request
			status  int
			message string // "" = any
		}{
			{"20 KB of nested brackets to the unauthenticated provider webhook",
				apitest.Request{Method: "POST", Path: "/provider-webhooks/109876543210987", JSON: nested(10000)},
				400, "The request body may not nest arrays and objects deeper than 64 levels."},
			{"nested objects to the provider webhook",
				apitest.Request{Method: "POST", Path: "/provider-webhooks/109876543210987", JSON: strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)},
				400, "The request body may not nest arrays and objects deeper than 64 levels."},
			{"60 KB nested query parameter",
				apitest.Request{Method: "GET", Path: "/api/contact-channels?tags_ids=" + url.QueryEscape(nested(30000)), Token: ten.Token},
				422, "The query string may not be longer than 8192 bytes."},
			{"nested JSON query parameter under the size cap",
				apitest.Request{Method: "GET", Path: "/api/contact-channels?created_at=" + nested(500), Token: ten.Token},
				422, "Created at must be a JSON array [start, end] of dates"},
			{"one query parameter over its cap",
				apitest.Request{Method: "GET", Path: "/api/contact-channels?filter=" + strings.Repeat("x", 3000), Token: ten.Token},
				422, "The filter field may not be longer than 2048 bytes."},
			{"nested JSON body just past the depth limit",
				apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token, JSON: `{"name":` + nested(64) + `}`},
				422, "The request body may not nest arrays and objects deeper than 64 levels."},
			{"a body that would fail validation 80,000 times",
				apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token, JSON: manyErrors},
				422, "The request body may not hold more than 20000 values."},
			{"a body that fails validation 15,000 times",
				apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token, JSON: `{"name":[` + strings.Repeat(`1,`, 15000) + `1]}`},
				422, ""},
			{"JSON send over 1 MB answers the documented 413",
				apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: ten.Token, JSON: overJSON},
				413, "The request body may not be greater than 1 MB"},
			{"chunked JSON send over 1 MB",
				apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: ten.Token, JSON: strings.NewReader(overJSON)},
				413, "The request body may not be greater than 1 MB"},
			{"JSON over 1 MB where 413 is not documented",
				apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token, JSON: overJSON},
				422, "The request body may not be greater than 1 MB"},
			{"provider webhook over 3 MB",
				apitest.Request{Method: "POST", Path: "/provider-webhooks/109876543210987", JSON: `{"a":"` + strings.Repeat("a", 3<<20) + `"}`},
				413, "The request body may not be greater than 3 MB"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(tc.req)
				if resp.Status != tc.status {
					t.Errorf("status %d, want %d: %.300s", resp.Status, tc.status, resp.Body)
					return
				}
				if got := resp.Map(t)["message"]; tc.message != "" && got != tc.message {
					t.Errorf("message %q, want %q", got, tc.message)
				}
				logs.check(t, tc.name)
			})
		}

		// A multipart send has the multipart limit: a 2 MB file passes the
		// size check and the send is judged on its fields.
		resp := h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: ten.Token,
			Form:      map[string]string{"platform": "chatapp", "sender_key": "5511988887777", "contact_key": "5511977776666", "contact_is_group": "false"},
			FileField: "file", FileName: "a.pdf", FileType: "application/pdf", FileContent: bytes.Repeat([]byte("a"), 2<<20)})
		if resp.Status != 509 || strings.Contains(string(resp.Body), "greater than") {
			t.Errorf("2 MB multipart send: status %d, want 509 for its fields: %.300s", resp.Status, resp.Body)
		}
		logs.check(t, "multipart send")
		t.Logf("longest log line %d bytes; %d bytes logged for %d hostile requests", logs.longest, logs.total, len(cases)+1)
	})
}
