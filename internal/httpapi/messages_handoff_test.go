package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// recordingTransport is a Transport that counts what it is handed. It
// passes sends to inner when set (else answers id, or one of its own), and
// runs afterAccept once after the first accepted send: the fault the tests
// inject between the far side's acceptance and its record.
type recordingTransport struct {
	messaging.Transport
	id          string
	mu          sync.Mutex
	calls       []messaging.Outbound
	afterAccept func()
	// err, when set, is answered after afterAccept ran (the far side took
	// the message but its answer did not arrive).
	err error
}

func (r *recordingTransport) Send(ctx context.Context, ch channels.Channel, out messaging.Outbound) (messaging.SendResult, error) {
	if r.Transport == nil { // a real Transport records its own hand-off
		if err := out.HandOff(ctx); err != nil {
			return messaging.SendResult{}, err
		}
	}
	r.mu.Lock()
	r.calls = append(r.calls, out)
	n, inject := len(r.calls), r.afterAccept
	r.afterAccept = nil
	r.mu.Unlock()
	res := messaging.SendResult{ExternalID: r.id}
	switch {
	case r.Transport != nil:
		var err error
		if res, err = r.Transport.Send(ctx, ch, out); err != nil {
			return res, err
		}
	case res.ExternalID == "":
		res.ExternalID = fmt.Sprintf("far-%d", n)
	}
	if inject != nil {
		inject()
	}
	if r.err != nil {
		return messaging.SendResult{}, r.err
	}
	return res, nil
}

func (r *recordingTransport) handed() []messaging.Outbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]messaging.Outbound(nil), r.calls...)
}

// assigningTransport is a recordingTransport whose far side takes the id
// from the sender (messaging.IDAssigner), as the chat app does: the same
// id again is the same message, so it answers with the id it was given.
type assigningTransport struct {
	recordingTransport
	ids []string // handed out in order by NewExternalID
}

func (a *assigningTransport) NewExternalID(channels.Channel) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.ids[0]
	a.ids = a.ids[1:]
	return id
}

func (a *assigningTransport) Send(ctx context.Context, ch channels.Channel, out messaging.Outbound) (messaging.SendResult, error) {
	a.id = out.ExternalID
	return a.recordingTransport.Send(ctx, ch, out)
}

// messagesOutage makes the messages table disappear (every statement on it
// fails, on either engine, as when the database is lost) and returns the
// function that brings it back; mending a table that is there does nothing.
func messagesOutage(t *testing.T, db *store.DB) (breakNow func(), mend func()) {
	var mu sync.Mutex
	broken := false
	alter := func(want bool, from, to string) {
		mu.Lock()
		defer mu.Unlock()
		if broken == want {
			return
		}
		if _, err := db.Bun.ExecContext(context.Background(), fmt.Sprintf("ALTER TABLE %s RENAME TO %s", from, to)); err != nil {
			t.Errorf("rename %s: %v", from, err)
		}
		broken = want
	}
	return func() { alter(true, "messages", "messages_away") }, func() { alter(false, "messages_away", "messages") }
}

// eachQuietOfficial runs fn on both engines with an official channel whose
// River workers and send queue are stopped (attempts are worked by hand
// with runSendJob)
// and whose contact has written (the 24-hour window is open).
func eachQuietOfficial(t *testing.T, fn func(t *testing.T, db *store.DB, e *officialEnv)) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		fn(t, db, e)
	})
}

// sendAttempt is one attempt of a send worked by hand: the message, its
// attempt's number, and whether it is a synchronous send's safety net.
type sendAttempt struct {
	id      int64
	attempt int
	recover bool
}

// runSendJob makes a message due now as its attempt's claim would find it
// and works it through the send queue's own attempt (Messaging.WorkDue):
// the attempt's error as the queue sees it (an error is retried while
// attempts remain).
func runSendJob(e *officialEnv, a sendAttempt) error {
	return runSendJobCtx(context.Background(), e, a)
}

func runSendJobCtx(ctx context.Context, e *officialEnv, a sendAttempt) error {
	e.t.Helper()
	if _, err := e.h.App.DB.Bun.NewUpdate().Table("messages").Set("send_due_at = ?", e.clk.Now().UnixMilli()).
		Set("send_attempts = ?", a.attempt-1).Set("send_recover = ?", a.recover).Where("id = ?", a.id).Exec(ctx); err != nil {
		e.t.Fatal(err)
	}
	errs, err := e.h.App.Messaging.WorkDue(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return errs[a.id]
}

func (e *officialEnv) message(id int64) messaging.Message {
	e.t.Helper()
	m, err := e.h.App.Messaging.Get(context.Background(), e.ten.CompanyID, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// queue stores a queued send through the service (workers are stopped).
func (e *officialEnv) queue(text string) int64 {
	e.t.Helper()
	enqueue := true
	out, err := e.h.App.Messaging.SendMessage(context.Background(), messaging.SendInput{CompanyID: e.ten.CompanyID,
		Platform: channels.OfficialChatapp, SenderKey: ofcSenderKey, ContactKey: ofcContactKey, Text: text, Enqueue: &enqueue})
	if err != nil || !out.Queued {
		e.t.Fatalf("queue: %+v %v", out, err)
	}
	return out.MessageID
}

// TestProviderAcceptedButNotRecorded: the provider (which assigns its own
// ids) accepts a send and the database fails before the acceptance is
// recorded. Queued: the retry does not call the provider again; the
// message is marked outcome unknown and the provider's receipt (which
// echoes our id) settles it. Synchronous: the client is answered 200 with
// the provider's id, never 500, and the safety net does not resend.
func TestProviderAcceptedButNotRecorded(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		real := &recordingTransport{Transport: official.NewTransport(e.h.App.ProviderClient)}
		e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, real)
		breakNow, mend := messagesOutage(t, db)
		defer mend()

		for _, tc := range []struct {
			name string
			send func() (id int64, answer string)
			// retry is what runs after the database is back: the job's
			// next attempt, or the synchronous send's safety net.
			// recover: the retry is the safety net.
			recover bool
		}{
			{name: "queued", send: func() (int64, string) {
				id := e.queue("queued")
				if err := runSendJob(e, sendAttempt{id: id, attempt: 1}); err == nil {
					t.Fatal("an attempt whose outcome was not recorded must be retried")
				}
				return id, ""
			}},
			{name: "sync", send: func() (int64, string) {
				resp := e.send(map[string]any{"text": "sync"})
				var ok struct {
					Status bool
					Data   struct{ ExternalID string }
				}
				if resp.Status != http.StatusOK {
					t.Fatalf("sync send accepted by the provider answered %d %s", resp.Status, resp.Body)
				}
				resp.JSON(t, &ok)
				mend()
				m, err := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, e.lastMessageID())
				if err != nil {
					t.Fatal(err)
				}
				return m.ID, ok.Data.ExternalID
			}, recover: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := len(e.sent())
				real.afterAccept = breakNow
				id, answer := tc.send()
				mend()
				handed := e.sent()
				if len(handed) != before+1 {
					t.Fatalf("provider got %d sends, want %d", len(handed), before+1)
				}
				wamid := handed[len(handed)-1].ID
				if tc.name == "sync" && answer != wamid {
					t.Fatalf("answered external id %q, provider's is %q", answer, wamid)
				}
				for attempt := 2; attempt <= 3; attempt++ {
					if err := runSendJob(e, sendAttempt{id: id, attempt: attempt, recover: tc.recover}); err != nil {
						t.Fatalf("attempt %d: %v", attempt, err)
					}
				}
				if n := len(e.sent()); n != before+1 {
					t.Fatalf("provider got the message again: %d sends", n-before)
				}
				m := e.message(id)
				if m.StatusID != messaging.StatusPending || !m.OutcomeUnknown || m.FailureReason != messaging.OutcomeUnknownReason {
					t.Fatalf("after the retry: %+v", m)
				}
				if _, err := e.ctl.Receipt(ctx, providersim.ReceiptRequest{PhoneNumberID: e.pnid, MessageID: wamid, Status: "delivered"}); err != nil {
					t.Fatal(err)
				}
				m = e.message(id)
				if m.StatusID != messaging.StatusDelivered || m.ExternalID != wamid || m.OutcomeUnknown || m.FailureReason != "" {
					t.Fatalf("after the receipt: %+v", m)
				}
			})
		}
	})
}

// TestInterruptedCallNotResent: a queued attempt cancelled (River's
// timeout, a shutdown) while the provider call was in flight may have
// delivered the message: the hand-off stays open, and the next attempt
// does not call the provider again.
func TestInterruptedCallNotResent(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		ctx, cancel := context.WithCancel(context.Background())
		tr := &recordingTransport{afterAccept: cancel, err: fault.New(fault.Unavailable, "context canceled")}
		e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, tr)
		id := e.queue("interrupted")
		if err := runSendJobCtx(ctx, e, sendAttempt{id: id, attempt: 1}); err == nil {
			t.Fatal("an interrupted attempt must be retried")
		}
		if err := runSendJob(e, sendAttempt{id: id, attempt: 2}); err != nil {
			t.Fatal(err)
		}
		if n := len(tr.handed()); n != 1 {
			t.Fatalf("the transport was called %d times", n)
		}
		if m := e.message(id); m.StatusID != messaging.StatusPending || !m.OutcomeUnknown {
			t.Fatalf("after the retry: %+v", m)
		}
	})
}

// TestAssignedIDResent: a transport whose far side takes the id from us
// (IDAssigner) gets the message again with the same id when the first
// acceptance was not recorded, and the message ends Sent with that id. An
// id already held by another message of the channel is drawn again before
// anything is sent.
func TestAssignedIDResent(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		tr := &assigningTransport{ids: []string{"chat-1", "chat-1", "chat-2"}}
		e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, tr)
		breakNow, mend := messagesOutage(t, db)

		first := e.queue("first")
		// Stored with its assigned id but not yet accepted: it has no
		// external id in the document's sense, so neither edit nor revoke
		// can reach the transport with it.
		if r := e.h.Do(apitest.Request{Method: "POST", Path: "/api/edit-message", Token: e.ten.Token,
			JSON: map[string]any{"id": first, "text": "new"}}); r.Status != 509 || r.Map(t)["message"] != "Message has no external id and cannot be edited" {
			t.Fatalf("edit of a pending message: %d %s", r.Status, r.Body)
		}
		var revoked []map[string]any
		e.h.Do(apitest.Request{Method: "POST", Path: "/api/revoke-messages", Token: e.ten.Token,
			JSON: map[string]any{"ids": []int64{first}, "scope": "all"}}).JSON(t, &revoked)
		if len(revoked) != 1 || revoked[0]["Status"] != false || revoked[0]["Message"] == "Revoking sent messages is not available on the official channel" {
			t.Fatalf("revoke of a pending message: %+v", revoked)
		}
		if err := runSendJob(e, sendAttempt{id: first, attempt: 1}); err != nil {
			t.Fatal(err)
		}
		second := e.queue("second") // draws chat-1 (taken), then chat-2
		tr.afterAccept = breakNow
		if err := runSendJob(e, sendAttempt{id: second, attempt: 1}); err == nil {
			t.Fatal("an attempt whose outcome was not recorded must be retried")
		}
		mend()
		if err := runSendJob(e, sendAttempt{id: second, attempt: 2}); err != nil {
			t.Fatal(err)
		}
		calls := tr.handed()
		if len(calls) != 3 || calls[0].ExternalID != "chat-1" || calls[1].ExternalID != "chat-2" || calls[2].ExternalID != "chat-2" {
			t.Fatalf("handed %+v", calls)
		}
		if m := e.message(second); m.StatusID != messaging.StatusSent || m.ExternalID != "chat-2" {
			t.Fatalf("second after the resend: %+v", m)
		}
		if m := e.message(first); m.StatusID != messaging.StatusSent || m.ExternalID != "chat-1" {
			t.Fatalf("first: %+v", m)
		}

		// Synchronous: answered 200 with the assigned id although the
		// record failed; the safety net hands the same id again.
		tr.ids = []string{"chat-3"}
		tr.afterAccept = breakNow
		resp := e.send(map[string]any{"text": "sync"})
		var ok struct{ Data struct{ ExternalID string } }
		if resp.Status != http.StatusOK {
			t.Fatalf("sync send: %d %s", resp.Status, resp.Body)
		}
		resp.JSON(t, &ok)
		mend()
		sync := e.lastMessageID()
		if err := runSendJob(e, sendAttempt{id: sync, attempt: 1, recover: true}); err != nil {
			t.Fatal(err)
		}
		calls = tr.handed()
		if ok.Data.ExternalID != "chat-3" || len(calls) != 5 || calls[3].ExternalID != "chat-3" || calls[4].ExternalID != "chat-3" {
			t.Fatalf("answered %q, handed %+v", ok.Data.ExternalID, calls)
		}
		if m := e.message(sync); m.StatusID != messaging.StatusSent || m.ExternalID != "chat-3" {
			t.Fatalf("sync after the safety net: %+v", m)
		}
	})
}

// TestReusedExternalIDAnswers200: a far side that hands out an id another
// message already holds (its ids restarted) is answered 200, not 500; the
// id then names the new message.
func TestReusedExternalIDAnswers200(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, &recordingTransport{id: "restarted-1"})
		var ids []int64
		for i := range 2 {
			resp := e.send(map[string]any{"text": fmt.Sprintf("send %d", i)})
			if resp.Status != http.StatusOK {
				t.Fatalf("send %d: %d %s", i, resp.Status, resp.Body)
			}
			ids = append(ids, e.lastMessageID())
		}
		if m := e.message(ids[1]); m.StatusID != messaging.StatusSent || m.ExternalID != "restarted-1" {
			t.Fatalf("newest: %+v", m)
		}
		if m := e.message(ids[0]); m.StatusID != messaging.StatusSent || m.ExternalID != "" {
			t.Fatalf("the earlier holder keeps its status and loses the id: %+v", m)
		}
	})
}

// lastMessageID is the id of the newest message stored.
func (e *officialEnv) lastMessageID() int64 {
	e.t.Helper()
	var id int64
	if err := e.h.App.DB.Bun.NewRaw("SELECT MAX(id) FROM messages").Scan(context.Background(), &id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// What lossyProvider does to the calls it relays.
const (
	lossPass        int32 = iota // relayed both ways
	lossHangUp                   // a send reaches the provider; the connection is closed unanswered
	lossSilent                   // a send reaches the provider; no answer before the client gives up
	lossUnreachable              // nothing connects: the provider never hears of the call
)

// lossyProvider stands between the gateway and the simulator on loopback
// and loses the provider's answers the way a network does. It returns the
// client to register; its mode says what happens to the next calls.
type lossyProvider struct {
	mode   atomic.Int32
	client *official.Client
}

func newLossyProvider(t *testing.T, e *officialEnv, sendTimeout time.Duration) *lossyProvider {
	t.Helper()
	lp := &lossyProvider{}
	simURL := e.ctl.URL
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, simURL+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Errorf("relay: %v", err)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("relay: %v", err)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") {
			switch lp.mode.Load() {
			case lossHangUp:
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				_ = conn.Close()
				return
			case lossSilent:
				<-r.Context().Done()
				return
			}
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(front.Close)
	// A port nothing listens on: its listener is closed at once.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	_ = closed.Close()
	// The channel's base URL stays the simulator's: every connection is
	// dialled to the front instead (or to the closed port).
	var dialer net.Dialer
	transport := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		addr := front.Listener.Addr().String()
		if lp.mode.Load() == lossUnreachable {
			addr = refused
		}
		return dialer.DialContext(ctx, network, addr)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	lp.client = official.NewClient(official.ClientOptions{HTTP: &http.Client{Transport: transport}, SendTimeout: sendTimeout})
	e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, official.NewTransport(lp.client))
	return lp
}

// TestLostAnswerNotResent: the provider takes a send but its answer is
// lost (the connection closed after the request, or no answer within the
// client's timeout). Queued: no attempt calls the provider again.
// Synchronous: the client is answered the documented 200 with Status false
// (not 509), and a retry with the same Idempotency-Key replays it. Either
// way the message is Pending, outcome unknown, until the provider's
// receipt settles it to whatever the receipt says.
func TestLostAnswerNotResent(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		// Short, so that the silent provider is given up on soon.
		lp := newLossyProvider(t, e, 500*time.Millisecond)
		for _, tc := range []struct {
			name    string
			mode    int32
			sync    bool
			receipt string
			want    int
		}{
			{"closed after the request, queued", lossHangUp, false, "sent", messaging.StatusSent},
			{"closed after the request, sync", lossHangUp, true, "delivered", messaging.StatusDelivered},
			{"no answer in time, queued", lossSilent, false, "failed", messaging.StatusFailed},
			{"no answer in time, sync", lossSilent, true, "read", messaging.StatusRead},
		} {
			t.Run(tc.name, func(t *testing.T) {
				lp.mode.Store(tc.mode)
				before := len(e.sent())
				var id int64
				if tc.sync {
					req := withKey(e.sendRequest(map[string]any{"text": tc.name}), strings.ReplaceAll(tc.name, " ", "_"))
					resp := e.h.Do(req)
					var got struct {
						Status  bool
						Message string
						Data    map[string]any
					}
					if resp.Status != http.StatusOK {
						t.Fatalf("answered %d %s", resp.Status, resp.Body)
					}
					resp.JSON(t, &got)
					if got.Status || got.Message != messaging.OutcomeUnknownReason || len(got.Data) != 1 || got.Data["ExternalID"] != "" {
						t.Fatalf("answered %s", resp.Body)
					}
					if again := e.h.Do(req); again.Status != resp.Status || !bytes.Equal(again.Body, resp.Body) {
						t.Fatalf("the retry with the same key answered %d %s", again.Status, again.Body)
					}
					id = e.lastMessageID()
					if err := runSendJob(e, sendAttempt{id: id, attempt: 1, recover: true}); err != nil {
						t.Fatalf("safety net: %v", err)
					}
				} else {
					id = e.queue(tc.name)
					for attempt := 1; attempt <= 3; attempt++ {
						if err := runSendJob(e, sendAttempt{id: id, attempt: attempt}); err != nil {
							t.Fatalf("attempt %d: %v", attempt, err)
						}
					}
				}
				sent := e.sent()
				if len(sent) != before+1 {
					t.Fatalf("the provider got %d sends, want 1", len(sent)-before)
				}
				m := e.message(id)
				if m.StatusID != messaging.StatusPending || !m.OutcomeUnknown || m.FailureReason != messaging.OutcomeUnknownReason || m.ExternalID != "" {
					t.Fatalf("before the receipt: %+v", m)
				}
				wamid := sent[len(sent)-1].ID
				if _, err := e.ctl.Receipt(context.Background(), providersim.ReceiptRequest{PhoneNumberID: e.pnid, MessageID: wamid, Status: tc.receipt}); err != nil {
					t.Fatal(err)
				}
				m = e.message(id)
				if m.StatusID != tc.want || m.ExternalID != wamid || m.OutcomeUnknown || (m.FailureReason == "") != (tc.want != messaging.StatusFailed) {
					t.Fatalf("after the %s receipt: %+v", tc.receipt, m)
				}
			})
		}
	})
}

// TestUnreachedProviderRetried: a provider nobody could connect to never
// heard of the send: the queued send gives its hand-off back and is sent
// by the next attempt once the provider is reachable; a synchronous one
// fails with the documented 509.
func TestUnreachedProviderRetried(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		lp := newLossyProvider(t, e, 0)
		lp.mode.Store(lossUnreachable)
		id := e.queue("unreached")
		if err := runSendJob(e, sendAttempt{id: id, attempt: 1}); fault.KindOf(err) != fault.Unavailable || errors.Is(err, messaging.ErrOutcomeUnknown) {
			t.Fatalf("attempt 1: %v", err)
		}
		if m := e.message(id); m.StatusID != messaging.StatusPending || m.OutcomeUnknown {
			t.Fatalf("after attempt 1: %+v", m)
		}
		if resp := e.send(map[string]any{"text": "sync"}); resp.Status != 509 || resp.Map(t)["message"] != "The provider could not be reached" {
			t.Fatalf("sync send: %d %s", resp.Status, resp.Body)
		}
		if m := e.message(e.lastMessageID()); m.StatusID != messaging.StatusFailed {
			t.Fatalf("sync message: %+v", m)
		}
		if n := len(e.sent()); n != 0 {
			t.Fatalf("the provider got %d sends", n)
		}

		lp.mode.Store(lossPass)
		if err := runSendJob(e, sendAttempt{id: id, attempt: 2}); err != nil {
			t.Fatalf("attempt 2: %v", err)
		}
		sent := e.sent()
		if m := e.message(id); len(sent) != 1 || m.StatusID != messaging.StatusSent || m.ExternalID != sent[0].ID {
			t.Fatalf("after attempt 2: %+v, provider got %d", m, len(sent))
		}
	})
}

// TestTransportInternalErrorRetried: a transport that fails on our side
// during the call (fault.Internal: under the chaos suite, a database
// connection cut while a chat-app call forwarded to another replica
// waited for its answer) may have handed the message, so a queued send is
// neither failed for it nor sent blindly: the next attempt resends it
// under the id it was given (IDAssigner) or marks it outcome unknown.
func TestTransportInternalErrorRetried(t *testing.T) {
	cut := fault.Internalf(errors.New("FATAL: terminating connection due to administrator command"), "read connection call")
	tests := []struct {
		name      string
		transport func() (messaging.Transport, *recordingTransport)
		want      func(t *testing.T, m messaging.Message, calls []messaging.Outbound)
	}{
		{"assigned ids: resent under the same id", func() (messaging.Transport, *recordingTransport) {
			tr := &assigningTransport{ids: []string{"chat-9"}}
			return tr, &tr.recordingTransport
		}, func(t *testing.T, m messaging.Message, calls []messaging.Outbound) {
			if len(calls) != 2 || calls[0].ExternalID != "chat-9" || calls[1].ExternalID != "chat-9" ||
				m.StatusID != messaging.StatusSent || m.ExternalID != "chat-9" {
				t.Fatalf("message %+v, handed %+v", m, calls)
			}
		}},
		{"far side's own ids: outcome unknown, not sent again", func() (messaging.Transport, *recordingTransport) {
			tr := &recordingTransport{}
			return tr, tr
		}, func(t *testing.T, m messaging.Message, calls []messaging.Outbound) {
			if len(calls) != 1 || m.StatusID != messaging.StatusPending || !m.OutcomeUnknown {
				t.Fatalf("message %+v, handed %d", m, len(calls))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
				tr, rec := tc.transport()
				e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, tr)
				id := e.queue("cut mid-call")
				rec.err = cut
				if err := runSendJob(e, sendAttempt{id: id, attempt: 1}); err == nil {
					t.Fatal("attempt 1 must be retried")
				}
				if m := e.message(id); m.StatusID != messaging.StatusPending {
					t.Fatalf("failed for an error on our side with attempts left: %+v", m)
				}
				rec.err = nil
				if err := runSendJob(e, sendAttempt{id: id, attempt: 2}); err != nil {
					t.Fatalf("attempt 2: %v", err)
				}
				tc.want(t, e.message(id), rec.handed())
			})
		})
	}
}
