package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

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
// River workers are stopped (attempts are worked by hand with runSendJob)
// and whose contact has written (the 24-hour window is open).
func eachQuietOfficial(t *testing.T, fn func(t *testing.T, db *store.DB, e *officialEnv)) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		fn(t, db, e)
	})
}

// runSendJob works one attempt of a send job by hand.
func runSendJob(e *officialEnv, args messaging.SendArgs, attempt int) error {
	return runSendJobCtx(context.Background(), e, args, attempt)
}

func runSendJobCtx(ctx context.Context, e *officialEnv, args messaging.SendArgs, attempt int) error {
	return messaging.NewSendWorker(e.h.App.Messaging).Work(ctx,
		&river.Job[messaging.SendArgs]{JobRow: &rivertype.JobRow{Attempt: attempt, MaxAttempts: 8}, Args: args})
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
			retry messaging.SendArgs
		}{
			{name: "queued", send: func() (int64, string) {
				id := e.queue("queued")
				if err := runSendJob(e, messaging.SendArgs{MessageID: id}, 1); err == nil {
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
			}, retry: messaging.SendArgs{Recover: true}},
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
				args := tc.retry
				args.MessageID = id
				for attempt := 2; attempt <= 3; attempt++ {
					if err := runSendJob(e, args, attempt); err != nil {
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
		if err := runSendJobCtx(ctx, e, messaging.SendArgs{MessageID: id}, 1); err == nil {
			t.Fatal("an interrupted attempt must be retried")
		}
		if err := runSendJob(e, messaging.SendArgs{MessageID: id}, 2); err != nil {
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
		if err := runSendJob(e, messaging.SendArgs{MessageID: first}, 1); err != nil {
			t.Fatal(err)
		}
		second := e.queue("second") // draws chat-1 (taken), then chat-2
		tr.afterAccept = breakNow
		if err := runSendJob(e, messaging.SendArgs{MessageID: second}, 1); err == nil {
			t.Fatal("an attempt whose outcome was not recorded must be retried")
		}
		mend()
		if err := runSendJob(e, messaging.SendArgs{MessageID: second}, 2); err != nil {
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
		if err := runSendJob(e, messaging.SendArgs{MessageID: sync, Recover: true}, 1); err != nil {
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
