package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/eventexamples"
	"github.com/chatmsg/gateway/internal/eventstream"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// sseEvent is one event of a stream as a client parses it.
type sseEvent struct {
	ID    int64
	Event string
	Data  string
}

// readSSE parses events from r until it ends or stop says so.
func readSSE(t testing.TB, r io.Reader, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []sseEvent
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" {
				out = append(out, cur)
				if stop != nil && stop(out) {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
	return out
}

// publishStream publishes n events of name for company in transactions of
// up to 500.
func publishStream(t testing.TB, h *apitest.Harness, company int64, name string, channel *int64, n int) {
	t.Helper()
	data := map[string]json.RawMessage{}
	for _, m := range []string{name} {
		data[m] = exampleEventData(t, m)
	}
	for done := 0; done < n; {
		batch := min(500, n-done)
		err := h.App.DB.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
			for range batch {
				if err := h.App.Webhooks.Publish(ctx, tx, webhooks.Event{Name: name, CompanyID: company, CompanyChannelID: channel,
					Data: data[name]}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		done += batch
	}
}

func exampleEventData(t testing.TB, name string) json.RawMessage {
	t.Helper()
	ex, err := eventexamples.Lookup(name)
	if err != nil {
		t.Fatalf("no example for %s: %v", name, err)
	}
	return ex.Data
}

// streamTicket issues a stream ticket with token.
func streamTicket(t testing.TB, h *apitest.Harness, token string) string {
	t.Helper()
	resp := h.Do(apitest.Request{Method: "POST", Path: "/api/events/stream-tickets", Token: token})
	if resp.Status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", resp.Status, resp.Body)
	}
	var body struct {
		Ticket string `json:"ticket"`
	}
	resp.JSON(t, &body)
	return body.Ticket
}

// openStream opens the stream with query and headers on a connection of
// its own, with a small receive buffer when small is set (a reader that
// does not read then holds little in the kernel).
func openStream(t testing.TB, h *apitest.Harness, query string, header http.Header, small bool) *http.Response {
	t.Helper()
	d := &net.Dialer{}
	if small {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}
	}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true}}
	req, err := http.NewRequest("GET", h.Server.URL+"/api/events/stream?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestEventStream: the stream is opened by token or ticket (with the
// permission), carries the company's events only, filtered as a
// subscription, and resumes from Last-Event-ID.
func TestEventStream(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		a, b := h.Tenant("Stream A"), h.Tenant("Stream B")
		noPerm := tokenWithout(t, h, a.UserID, "channel_webhooks_view")

		for _, tc := range []struct {
			name   string
			query  string
			header http.Header
			want   int
		}{
			{"no credentials", "", nil, http.StatusUnauthorized},
			{"unknown ticket", "ticket=est_nope", nil, http.StatusUnauthorized},
			{"token without permission", "", http.Header{"Authorization": {"Bearer " + noPerm}}, http.StatusForbidden},
			{"bad last event id", "last_event_id=x", http.Header{"Authorization": {"Bearer " + a.Token}}, http.StatusUnprocessableEntity},
			{"unknown event", "events=nope", http.Header{"Authorization": {"Bearer " + a.Token}}, http.StatusUnprocessableEntity},
			{"not accepting a stream", "", http.Header{"Authorization": {"Bearer " + a.Token}, "Accept": {"application/json"}}, http.StatusNotAcceptable},
		} {
			resp := openStream(t, h, tc.query, tc.header, false)
			if resp.StatusCode != tc.want {
				t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
			}
			resp.Body.Close()
		}
		if resp := h.Do(apitest.Request{Method: "POST", Path: "/api/events/stream-tickets", Token: noPerm}); resp.Status != http.StatusForbidden {
			t.Errorf("ticket without permission: %d", resp.Status)
		}

		ch := int64(5)
		ticket := streamTicket(t, h, a.Token)
		stream := openStream(t, h, "ticket="+ticket+"&events="+events.CrmBusinessWon+","+events.OmnichatMessageReceived+"&company_channel_ids=5", nil, false)
		if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
		}
		other := int64(6)
		publishStream(t, h, b.CompanyID, events.CrmBusinessWon, nil, 1)             // another company
		publishStream(t, h, a.CompanyID, events.CrmBusinessCreated, nil, 1)         // not asked for
		publishStream(t, h, a.CompanyID, events.OmnichatMessageReceived, &other, 1) // another channel
		publishStream(t, h, a.CompanyID, events.CrmBusinessWon, nil, 2)             // company scope: wanted
		publishStream(t, h, a.CompanyID, events.OmnichatMessageReceived, &ch, 1)    // wanted
		got := readSSE(t, stream.Body, func(evs []sseEvent) bool { return len(evs) == 3 })
		names := []string{}
		for _, e := range got {
			names = append(names, e.Event)
			var env map[string]any
			if err := json.Unmarshal([]byte(e.Data), &env); err != nil || env["company_id"] != float64(a.CompanyID) || env["event"] != e.Event {
				t.Errorf("event %d: %s (%v)", e.ID, e.Data, err)
			}
		}
		if !slices.Equal(names, []string{events.CrmBusinessWon, events.CrmBusinessWon, events.OmnichatMessageReceived}) {
			t.Errorf("stream carried %v", names)
		}
		stream.Body.Close()

		// Resume with the token and Last-Event-ID: the events after it.
		resumed := openStream(t, h, "events="+events.CrmBusinessWon+","+events.OmnichatMessageReceived+"&company_channel_ids=5",
			http.Header{"Authorization": {"Bearer " + a.Token}, "Last-Event-Id": {fmt.Sprint(got[0].ID)}}, false)
		again := readSSE(t, resumed.Body, func(evs []sseEvent) bool { return len(evs) == 2 })
		if len(again) != 2 || again[0].ID != got[1].ID || again[1].ID != got[2].ID {
			t.Errorf("resumed after %d with %v, want %v", got[0].ID, again, got[1:])
		}
	})
}

// TestEventStreamSlowReader: a reader that stops reading is cut off when
// its buffer is full, told why and where to resume, and resumes from there
// without a gap.
func TestEventStreamSlowReader(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		a := h.Tenant("Slow")
		slow := openStream(t, h, "ticket="+streamTicket(t, h, a.Token), nil, true)
		if slow.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d", slow.StatusCode)
		}
		// Nothing is read while events are published, batch after batch,
		// until the stream has more waiting than its buffer (256) and the
		// socket buffers hold, and is cut (it stops listening).
		total := 0
		listening := func() bool {
			l, err := h.App.Webhooks.Listens(context.Background(), a.CompanyID, events.CrmBusinessWon, nil)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		for listening() {
			if total >= 60000 {
				t.Fatalf("still streaming after %d events unread", total)
			}
			publishStream(t, h, a.CompanyID, events.CrmBusinessWon, nil, 1000)
			total += 1000
			// Let the fan-out and the stream catch up before judging.
			eventually(t, "the batch in the log", func() bool { return len(logSeqs(t, h, a.CompanyID)) == total })
			for range 20 {
				if !listening() {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		want := logSeqs(t, h, a.CompanyID)
		first := readSSE(t, slow.Body, nil)
		if len(first) == 0 || first[len(first)-1].Event != "stream.cut" {
			t.Fatalf("the slow reader was not cut (%d events)", len(first))
		}
		var cut struct {
			Reason      string `json:"reason"`
			LastEventID string `json:"last_event_id"`
		}
		if err := json.Unmarshal([]byte(first[len(first)-1].Data), &cut); err != nil || cut.Reason != "slow_reader" {
			t.Fatalf("cut event %q (%v)", first[len(first)-1].Data, err)
		}
		first = first[:len(first)-1]
		if len(first) >= total {
			t.Fatalf("cut after every event (%d)", len(first))
		}
		if len(first) > 0 && fmt.Sprint(first[len(first)-1].ID) != cut.LastEventID {
			t.Errorf("cut says resume after %s, the last event received is %d", cut.LastEventID, first[len(first)-1].ID)
		}
		rest := openStream(t, h, "ticket="+streamTicket(t, h, a.Token)+"&last_event_id="+cut.LastEventID, nil, false)
		second := readSSE(t, rest.Body, func(evs []sseEvent) bool { return len(first)+len(evs) >= total })
		var got []int64
		for _, e := range append(first, second...) {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("received %d events (%d before the cut), want the log's %d in order without gap or repeat", len(got), len(first), len(want))
		}
	})
}

func logSeqs(t testing.TB, h *apitest.Harness, company int64) []int64 {
	t.Helper()
	evs, err := h.App.Webhooks.EventLogAfter(context.Background(), company, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// TestEventStreamBoundPerCompany: a company with its bound of streams open
// on the replica gets 429 with Retry-After for one more, another company
// does not, and a closed stream frees its place.
func TestEventStreamBoundPerCompany(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{Configure: func(c *config.Config) { c.HTTP.MaxStreamsPerCompany = 2 }})
		a, b := h.Tenant("Bound A"), h.Tenant("Bound B")
		bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
		var open []*http.Response
		steps := []struct {
			name  string
			token string
			want  int
		}{
			{"the company's first stream", a.Token, 200},
			{"its second", a.Token, 200},
			{"one more than its bound", a.Token, 429},
			{"another company's stream", b.Token, 200},
		}
		// One sequence, not subtests: each open stream must outlive its step
		// (openStream closes it when the test that opened it ends).
		for _, st := range steps {
			resp := openStream(t, h, "", bearer(st.token), false)
			if resp.StatusCode != st.want {
				t.Fatalf("%s: status %d, want %d", st.name, resp.StatusCode, st.want)
			}
			if st.want == 200 {
				open = append(open, resp)
				continue
			}
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.Header.Get("Retry-After") != "5" || body["message"] != eventstream.MsgTooManyStreams {
				t.Fatalf("%s: Retry-After %q, body %v", st.name, resp.Header.Get("Retry-After"), body)
			}
		}
		// Closing one of the company's streams frees its place.
		_ = open[0].Body.Close()
		eventually(t, "a stream after one was closed", func() bool {
			resp := openStream(t, h, "", bearer(a.Token), false)
			if resp.StatusCode != 200 {
				_ = resp.Body.Close()
				return false
			}
			return true
		})
	})
}
