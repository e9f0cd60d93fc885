package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatmsg/gateway/internal/providersim"
)

// ChaosOptions configure the fault suite.
type ChaosOptions struct {
	Engine   Engine
	AdminURL string
	BinDir   string
	// Companies are the send companies. Every other one subscribes to its
	// omnichat.message.sent; the rest listen to no message event, so their
	// sends take the paths for such companies (one statement to store a
	// send on PostgreSQL, shared outcome writes), and the ids they store
	// are read from the database rather than from events.
	Companies int
	SendRate  float64 // queued sends per second
	SyncRate  float64 // synchronous sends per second
	EventRate float64 // POST /api/events per second
	// ChatappRate is chat-app sends per second (half synchronous, half
	// queued) on a paired simulator connection of each send company.
	ChatappRate float64
	// Replicas > 1 runs that many gateway processes on one PostgreSQL
	// database behind a round-robin client and kills only the first: the
	// others carry on and take over its jobs. The chat-app simulator lives
	// in each process, so chat-app sends are left out then.
	Replicas int
	Kills    int // SIGKILLs of the gateway (each followed by a restart)
	// Terminations of the gateway's PostgreSQL backends (PostgreSQL only).
	Terminations int
	Interval     time.Duration // load time between two faults
	// Settle bounds the wait, after the load, for every check to hold:
	// River rescues the jobs a killed process held after a minute.
	Settle     time.Duration
	GatewayEnv []string // added to the gateway's environment
	Log        func(format string, args ...any)
	// KeepLogsIn is where the processes' logs are copied when a check
	// fails ("": not kept).
	KeepLogsIn string
}

// ChaosReport is what the fault suite found.
type ChaosReport struct {
	Engine          Engine         `json:"engine"`
	Replicas        int            `json:"replicas"`
	Kills           int            `json:"kills"`
	Terminations    int            `json:"terminations"`
	BackendsEnded   int            `json:"backends_ended"`
	Answers         map[string]int `json:"answers"` // every request's outcome, "2xx" included
	Sends           SendVerdict    `json:"sends"`   // official channel, checked at providersim
	Chatapp         SendVerdict    `json:"chatapp"` // chat-app channel, checked at the in-process simulator
	Events          EventTally     `json:"events"`
	EventsAccepted  int            `json:"events_accepted"`
	Deliveries      int            `json:"deliveries_acknowledged"` // distinct delivery ids the receiver acknowledged
	MissingLogRows  int            `json:"deliveries_without_log_row"`
	MissingExamples []string       `json:"missing_log_row_examples,omitempty"`
	// LostRows are the stored rows of lost sends: where each one stopped.
	LostRows []string `json:"lost_rows,omitempty"`
	// LogsKept is where the processes' logs were copied when a check
	// failed.
	LogsKept  string  `json:"logs_kept,omitempty"`
	SettledIn float64 `json:"settled_in_s"`
	Settled   bool    `json:"settled"`
	Seconds   float64 `json:"seconds"`
}

// Violations lists every broken guarantee (empty: the suite passed).
func (r ChaosReport) Violations() []string {
	var out []string
	add := func(n int, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Sends.Lost, "accepted sends not handed to the provider within the bound")
	add(r.Sends.Duplicates, "sends handed to the provider more than once")
	add(r.Sends.SyncIDBad, "synchronous sends answered with an ExternalID the provider did not issue for them")
	add(r.Sends.NotStored, "sends handed over whose stored message does not carry the provider's id")
	add(r.Sends.Overwritten, "sends whose provider id was overwritten")
	add(r.Sends.ErrorButDelivered, "sends answered with an error although the provider received them")
	add(r.Chatapp.Lost, "accepted chat-app sends not handed to the chat app within the bound")
	add(r.Chatapp.Duplicates, "chat-app sends handed to the chat app more than once")
	add(r.Chatapp.SyncIDBad, "synchronous chat-app sends answered with an ExternalID the chat app did not issue for them")
	add(r.Chatapp.NotStored, "chat-app sends handed over whose stored message does not carry the chat app's id")
	add(r.Chatapp.Overwritten, "chat-app sends whose chat-app id was overwritten")
	add(r.Chatapp.ErrorButDelivered, "chat-app sends answered with an error although the chat app received them")
	add(r.Events.Lost, "accepted events that did not reach their endpoint within the bound")
	add(r.Events.Rejected, "deliveries the receiver refused (signature or format)")
	add(r.MissingLogRows, "deliveries the receiver acknowledged without a successful row in the delivery log")
	return out
}

// pending counts what may still change by waiting.
func (r ChaosReport) pending() int {
	return r.Sends.Lost + r.Sends.Awaiting + r.Chatapp.Lost + r.Chatapp.Awaiting + r.Events.Lost + r.MissingLogRows
}

// WriteText prints the report.
func (r ChaosReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "fault suite on %s, %d replica(s): %d SIGKILL+restart, %d backend terminations (%d backends ended), %.0f s\n",
		r.Engine, r.Replicas, r.Kills, r.Terminations, r.BackendsEnded, r.Seconds)
	fmt.Fprintf(w, "  answers: %s\n", errorText(r.Answers))
	s := r.Sends
	fmt.Fprintf(w, "  sends: %d accepted (%d by companies listening to no message event), %d unanswered/5xx; %d reached the provider, %d lost, %d duplicates, %d sync id mismatches, %d not stored with the provider id, %d overwritten, %d error answers delivered anyway\n",
		s.Accepted, s.Unheard, s.Unanswered, s.Reached, s.Lost, s.Duplicates, s.SyncIDBad, s.NotStored, s.Overwritten, s.ErrorButDelivered)
	if s = r.Chatapp; s.Accepted+s.Unanswered > 0 {
		fmt.Fprintf(w, "  chat-app sends: %d accepted (%d by companies listening to no message event; %d before the last restart, which the simulator forgot), %d unanswered/5xx; %d reached the chat app, %d lost, %d duplicates, %d sync id mismatches, %d not stored with the chat app's id, %d overwritten, %d error answers delivered anyway\n",
			s.Accepted, s.Unheard, s.Partial, s.Unanswered, s.Reached, s.Lost, s.Duplicates, s.SyncIDBad, s.NotStored, s.Overwritten, s.ErrorButDelivered)
	}
	fmt.Fprintf(w, "  events: %d accepted, %d expected receipts, %d received, %d lost, %d duplicate deliveries (at least once: not a failure), %d refused by the receiver\n",
		r.EventsAccepted, r.Events.Expected, r.Events.Received, r.Events.Lost, r.Events.Duplicates, r.Events.Rejected)
	fmt.Fprintf(w, "  delivery log: %d acknowledged deliveries, %d without a successful log row\n", r.Deliveries, r.MissingLogRows)
	if r.Settled {
		fmt.Fprintf(w, "  nothing pending %.0f s after the load\n", r.SettledIn)
	} else {
		fmt.Fprintf(w, "  still missing %.0f s after the load (the bound)\n", r.SettledIn)
	}
	for _, p := range r.Sends.Problems {
		fmt.Fprintf(w, "    send: %s\n", p)
	}
	for _, p := range r.Chatapp.Problems {
		fmt.Fprintf(w, "    chat-app send: %s\n", p)
	}
	for _, id := range r.MissingExamples {
		fmt.Fprintf(w, "    delivery %s\n", id)
	}
	for _, row := range r.LostRows {
		fmt.Fprintf(w, "    lost send's row: %s\n", row)
	}
	if r.LogsKept != "" {
		fmt.Fprintf(w, "  the processes' logs are kept in %s\n", r.LogsKept)
	}
	if v := r.Violations(); len(v) > 0 {
		fmt.Fprintf(w, "FAIL (%s): %s\n", r.Engine, strings.Join(v, "; "))
	} else {
		fmt.Fprintf(w, "PASS (%s)\n", r.Engine)
	}
}

// chaos is one fault-suite run.
type chaos struct {
	o      ChaosOptions
	stack  *Stack
	setup  *Setup
	recv   *Receiver
	load   *Client // every replica, round-robin
	sender []*Company
	heard  []bool        // of each send company: it subscribes to its message events
	conns  []*Connection // chat-app connection of each send company
	events *Company
	subs   map[string]subRef // endpoint name → subscription
	// gen counts the gateway's restarts: the chat-app simulator remembers
	// only what it received since the last one.
	gen atomic.Int64

	mu       sync.Mutex
	sends    []SendOutcome
	chat     []chatSend
	accepted []string // import ids
	answers  map[string]int
}

// chatSend is a chat-app send and the gateway generation it began in.
type chatSend struct {
	SendOutcome
	gen int64
}

type subRef struct {
	company *Company
	id      int64
}

// Chaos runs the fault suite: the gateway under queued and synchronous
// sends on an official channel (providersim) and on a chat-app connection
// (the in-process simulator), and published events, is SIGKILLed and
// restarted, and (on PostgreSQL) its database backends are terminated,
// between periods of load. Then it waits, up to Settle, until every
// accepted send reached its transport exactly once and is stored with the
// transport's id, every accepted event reached its endpoints, and every
// delivery the receiver acknowledged has its successful log row; the
// report says what still does not hold.
func Chaos(ctx context.Context, o ChaosOptions) (*ChaosReport, error) {
	begin := time.Now()
	if o.Replicas > 1 {
		o.ChatappRate = 0
	}
	// The provider posts every accepted message's `sent` status, as the
	// platform does: a send whose answer a kill lost is settled by it.
	stack, err := StartStack(ctx, StackOptions{Engine: o.Engine, AdminURL: o.AdminURL, BinDir: o.BinDir, Log: o.Log,
		Env: o.GatewayEnv, Replicas: o.Replicas, SentReceipts: true})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	c := &chaos{o: o, stack: stack, setup: NewSetup(stack), subs: map[string]subRef{}, answers: map[string]int{}}
	// Set-up talks to the first replica; the load goes to all of them.
	c.load = NewClient(stack.ReplicaURLs...)
	if c.recv, err = StartReceiver(); err != nil {
		return nil, err
	}
	defer c.recv.Close()
	if err := c.prepare(ctx); err != nil {
		return nil, err
	}
	rep := &ChaosReport{Engine: o.Engine, Replicas: len(stack.Replicas)}
	faults := c.plan()
	load, cancel := context.WithCancel(ctx)
	defer cancel()
	// The load lasts until an interval after the last fault, however long
	// the restarts take.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range []struct {
		rate float64
		call Call
	}{{o.SendRate, c.sendCall(false)}, {o.SyncRate, c.sendCall(true)}, {o.EventRate, c.publishCall()}, {o.ChatappRate, c.chatappCall()}} {
		if l.rate <= 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			Drive(load, Shape{Mode: Open, Rate: l.rate, Stop: stop, MaxInFlight: 256}, NewRecorder(), l.call)
		}()
	}
	for _, f := range faults {
		time.Sleep(o.Interval)
		if err := f(ctx, rep); err != nil {
			close(stop)
			cancel()
			wg.Wait()
			return nil, err
		}
	}
	time.Sleep(o.Interval)
	close(stop)
	wg.Wait()
	o.Log("load done; waiting up to %s for every check to hold", o.Settle)
	loadEnd := time.Now()
	c.settle(ctx, rep)
	rep.SettledIn = time.Since(loadEnd).Seconds()
	rep.Answers = c.answers
	rep.Seconds = time.Since(begin).Seconds()
	if len(rep.Violations()) > 0 && o.KeepLogsIn != "" {
		dir, err := stack.KeepLogs(o.KeepLogsIn)
		if err != nil {
			return nil, fmt.Errorf("keep the logs of a failed run: %w", err)
		}
		rep.LogsKept = dir
	}
	return rep, nil
}

func (c *chaos) prepare(ctx context.Context) error {
	var err error
	if c.sender, err = c.setup.Companies(ctx, "chaos-send", 1, c.o.Companies, 2); err != nil {
		return err
	}
	for i, co := range c.sender {
		if c.o.ChatappRate > 0 {
			conn, err := c.setup.Connect(ctx, co, fmt.Sprintf("5541%09d", i+1),
				[]string{fmt.Sprintf("5551%04d00001", i+1), fmt.Sprintf("5551%04d00002", i+1)})
			if err != nil {
				return err
			}
			c.conns = append(c.conns, conn)
		}
		c.heard = append(c.heard, i%2 == 0)
		if !c.heard[i] {
			continue
		}
		name := fmt.Sprintf("msg-%d", i)
		sub, err := c.setup.Subscribe(ctx, co, name, c.recv.HookURL(name), []string{"omnichat.message.sent"})
		if err != nil {
			return err
		}
		c.recv.Register(name, sub.Secret)
		c.subs[name] = subRef{co, sub.ID}
	}
	evs, err := c.setup.Companies(ctx, "chaos-events", 100, 1, 0)
	if err != nil {
		return err
	}
	c.events = evs[0]
	for i := range 2 {
		name := fmt.Sprintf("ev-%d", i)
		sub, err := c.setup.Subscribe(ctx, c.events, name, c.recv.HookURL(name), []string{"contact.import.completed"})
		if err != nil {
			return err
		}
		c.recv.Register(name, sub.Secret)
		c.subs[name] = subRef{c.events, sub.ID}
	}
	return nil
}

// plan alternates kills and (on PostgreSQL) backend terminations.
func (c *chaos) plan() []func(context.Context, *ChaosReport) error {
	kill := func(ctx context.Context, rep *ChaosReport) error {
		c.o.Log("SIGKILL gateway (pid %d)", c.stack.Gateway.PID())
		c.stack.Gateway.Kill()
		rep.Kills++
		time.Sleep(500 * time.Millisecond)
		err := c.stack.StartGateway(ctx)
		c.gen.Add(1)
		return err
	}
	terminate := func(ctx context.Context, rep *ChaosReport) error {
		n, err := c.stack.TerminateBackends(ctx)
		c.o.Log("terminated %d PostgreSQL backends of the gateway", n)
		rep.Terminations++
		rep.BackendsEnded += n
		return err
	}
	var out []func(context.Context, *ChaosReport) error
	terms := c.o.Terminations
	if c.stack.Engine() != Postgres {
		terms = 0
	}
	for i := 0; i < max(c.o.Kills, terms); i++ {
		if i < c.o.Kills {
			out = append(out, kill)
		}
		if i < terms {
			out = append(out, terminate)
		}
	}
	return out
}

// answer counts an outcome per kind of request ("sync 500").
func (c *chaos) answer(kind, out string) {
	if out == "" {
		out = "2xx"
	}
	c.answers[kind+" "+out]++
}

func (c *chaos) sendCall(sync bool) Call {
	kind := "queued"
	if sync {
		kind = "sync"
	}
	return func(ctx context.Context, seq int, _ time.Time) string {
		co := c.sender[seq%len(c.sender)]
		text := fmt.Sprintf("chaos %s %d", kind, seq)
		body, _ := json.Marshal(map[string]any{"platform": "ofc_chatapp", "sender_key": co.ChannelKey,
			"contact_key": co.Contacts[seq%len(co.Contacts)], "text": text, "enqueue": !sync})
		status, b, err := c.load.Do(ctx, "POST", "/api/api-send-message", co.Token, body)
		out := SendOutcome{Text: text, Answer: outcome(status, err), Sync: sync, Unheard: !c.heard[seq%len(c.sender)]}
		if sync && out.Answer == "" {
			out.ExternalID = externalID(b)
		}
		c.mu.Lock()
		c.sends = append(c.sends, out)
		c.answer(kind, out.Answer)
		c.mu.Unlock()
		return out.Answer
	}
}

// chatappCall sends on the chat-app connections, alternately synchronous
// and queued.
func (c *chaos) chatappCall() Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		i := seq % len(c.sender)
		co, conn := c.sender[i], c.conns[i]
		sync := seq%2 == 0
		kind := "chatapp-queued"
		if sync {
			kind = "chatapp-sync"
		}
		text := fmt.Sprintf("chaos %s %d", kind, seq)
		gen := c.gen.Load()
		body, _ := json.Marshal(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_is_group": false,
			"contact_key": conn.Contacts[seq/2%len(conn.Contacts)], "text": text, "enqueue": !sync})
		status, b, err := c.load.Do(ctx, "POST", "/api/api-send-message", co.Token, body)
		out := SendOutcome{Text: text, Answer: outcome(status, err), Sync: sync, Unheard: !c.heard[i]}
		if sync && out.Answer == "" {
			out.ExternalID = externalID(b)
		}
		c.mu.Lock()
		c.chat = append(c.chat, chatSend{out, gen})
		c.answer(kind, out.Answer)
		c.mu.Unlock()
		return out.Answer
	}
}

func externalID(syncAnswer []byte) string {
	var res struct {
		Data struct {
			ExternalID string `json:"ExternalID"`
		} `json:"Data"`
	}
	_ = json.Unmarshal(syncAnswer, &res)
	return res.Data.ExternalID
}

func (c *chaos) publishCall() Call {
	return func(ctx context.Context, seq int, due time.Time) string {
		id := fmt.Sprintf("chaos-%d", seq)
		c.recv.Due(id, due)
		status, _, err := c.load.Do(ctx, "POST", "/api/events", c.events.Token, importEvent(id))
		out := outcome(status, err)
		c.mu.Lock()
		if out == "" {
			c.accepted = append(c.accepted, id)
		}
		c.answer("event", out)
		c.mu.Unlock()
		return out
	}
}

// settle re-runs the checks until nothing is pending any more (what is
// still missing may yet arrive: a rescued job, a retried delivery) or
// Settle passes; the report holds the last figures. A duplicate or an
// error answer cannot be undone by waiting, so they do not keep it
// waiting.
func (c *chaos) settle(ctx context.Context, rep *ChaosReport) {
	rep.Settled = Settle(ctx, c.o.Settle, c.o.Log, func() (int, error) {
		err := c.check(ctx, rep)
		return rep.pending(), err
	})
}

// Settle runs check every 5 s until it succeeds with nothing pending, and
// reports whether that happened before bound passed or ctx ended. A failed
// check is logged and tried again. The fault suites (make chaos, make
// cluster) wait with it for what may still arrive.
func Settle(ctx context.Context, bound time.Duration, log func(format string, args ...any), check func() (pending int, err error)) bool {
	deadline := time.Now().Add(bound)
	for {
		pending, err := check()
		if err == nil && pending == 0 {
			return true
		}
		if err != nil {
			log("check: %v", err)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Second)
	}
}

func (c *chaos) check(ctx context.Context, rep *ChaosReport) error {
	var handed []HandedOver
	ctl := c.setup.Provider
	for _, co := range c.sender {
		msgs, err := ctl.Messages(ctx, co.PhoneNumberID)
		if err != nil {
			return err
		}
		handed = append(handed, handedOver(msgs)...)
	}
	var chatHanded []HandedOver
	for i, conn := range c.conns {
		msgs, err := c.setup.SimulatorMessages(ctx, c.sender[i], conn)
		if err != nil {
			return err
		}
		chatHanded = append(chatHanded, msgs...)
	}
	gen := c.gen.Load()
	c.mu.Lock()
	sends := append([]SendOutcome(nil), c.sends...)
	accepted := append([]string(nil), c.accepted...)
	chat := make([]SendOutcome, len(c.chat))
	for i, s := range c.chat {
		chat[i] = s.SendOutcome
		chat[i].Partial = s.gen != gen
	}
	c.mu.Unlock()
	stored, err := c.storedIDs(ctx, append(append([]SendOutcome(nil), sends...), chat...))
	if err != nil {
		return err
	}
	rep.Sends = CheckSends(sends, handed, stored)
	rep.Chatapp = CheckSends(chat, chatHanded, stored)
	if lost := append(append([]string(nil), rep.Sends.LostTexts...), rep.Chatapp.LostTexts...); len(lost) > 0 {
		states, err := c.stack.MessageStates(ctx, lost)
		if err != nil {
			return fmt.Errorf("read the rows of lost sends: %w", err)
		}
		rep.LostRows = nil
		for _, text := range lost {
			rep.LostRows = append(rep.LostRows, fmt.Sprintf("%q: %s", text, cmp.Or(states[text], "no row")))
		}
	}
	rep.EventsAccepted = len(accepted)
	rep.Events = c.recv.Tally([]string{"ev-0", "ev-1"}, accepted)
	rep.Deliveries, rep.MissingLogRows, rep.MissingExamples = 0, 0, nil
	for name, ref := range c.subs {
		acked := c.recv.DeliveryIDs(name)
		logged, attempts, err := c.loggedDeliveries(ctx, ref)
		if err != nil {
			return err
		}
		missing := MissingLogRows(acked, logged)
		rep.Deliveries += len(acked)
		rep.MissingLogRows += len(missing)
		for _, id := range missing {
			if len(rep.MissingExamples) < maxProblems {
				logged := attempts[id]
				if logged == "" {
					logged = "no attempt logged"
				}
				rep.MissingExamples = append(rep.MissingExamples, fmt.Sprintf("%s %s (received %d×; log: %s)", name, id, acked[id], logged))
			}
		}
	}
	return nil
}

// storedIDs returns what CheckSends reads the stored ids of sends from:
// the omnichat.message.sent events, or, for the sends of a company that
// listens to none, the database.
func (c *chaos) storedIDs(ctx context.Context, sends []SendOutcome) (func(text string) []SentEvent, error) {
	var texts []string
	for _, s := range sends {
		if s.Unheard && s.Answer == "" {
			texts = append(texts, s.Text)
		}
	}
	ids, err := c.stack.StoredExternalIDs(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("read stored ids: %w", err)
	}
	unheard := make(map[string]bool, len(texts))
	for _, t := range texts {
		unheard[t] = true
	}
	return func(text string) []SentEvent {
		if !unheard[text] {
			return c.recv.Sent(text)
		}
		var out []SentEvent
		for _, id := range ids[text] {
			out = append(out, SentEvent{ExternalID: id})
		}
		return out
	}, nil
}

func handedOver(msgs []providersim.SentMessage) []HandedOver {
	out := make([]HandedOver, 0, len(msgs))
	for _, m := range msgs {
		h := HandedOver{ProviderID: m.ID, MessageID: m.Request.BizOpaqueCallbackData}
		if m.Request.Text != nil {
			h.Text = m.Request.Text.Body
		}
		out = append(out, h)
	}
	return out
}

// loggedDeliveries reads a subscription's whole delivery log through the
// API: for each delivery id, whether an attempt succeeded, and a short
// account of its attempts for the report.
func (c *chaos) loggedDeliveries(ctx context.Context, ref subRef) (map[string]bool, map[string]string, error) {
	ok, attempts := map[string]bool{}, map[string]string{}
	for page := 1; ; page++ {
		var res struct {
			LastPage int `json:"last_page"`
			Data     []struct {
				DeliveryID  string  `json:"delivery_id"`
				Attempt     int     `json:"attempt"`
				StatusCode  int     `json:"status_code"`
				Succeeded   bool    `json:"succeeded"`
				Error       *string `json:"error"`
				NextRetryAt *string `json:"next_retry_at"`
			} `json:"data"`
		}
		q := url.Values{"perPage": {"500"}, "page": {fmt.Sprint(page)}}
		if err := c.setup.API.JSON(ctx, "GET", fmt.Sprintf("/api/channel-webhooks/%d/deliveries?%s", ref.id, q.Encode()),
			ref.company.Token, nil, &res); err != nil {
			return nil, nil, err
		}
		for _, d := range res.Data {
			ok[d.DeliveryID] = ok[d.DeliveryID] || d.Succeeded
			a := fmt.Sprintf("#%d %d", d.Attempt, d.StatusCode)
			if d.Error != nil {
				a += " " + *d.Error
			}
			if d.NextRetryAt != nil {
				a += " retry at " + *d.NextRetryAt
			}
			attempts[d.DeliveryID] = strings.TrimPrefix(attempts[d.DeliveryID]+"; "+a, "; ")
		}
		if page >= res.LastPage {
			return ok, attempts, nil
		}
	}
}
