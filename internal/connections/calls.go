package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// Forwarding. A call for a connection held by another replica is written to
// the chatapp_calls mailbox addressed to the holder; the holder's call loop
// picks it up, runs it on its live session and writes the answer back,
// which the caller is polling for. Replicas need no addresses of each other
// and no shared secret: the database they already share carries the call.
// States: 0 waiting, 1 taken by the holder, 2 answered.

const (
	callWaiting  = 0
	callTaken    = 1
	callAnswered = 2

	// callRetention bounds how long an abandoned call row survives.
	callRetention = 10 * time.Minute
	// answerPoll is how often a caller looks for its answer.
	answerPoll = 15 * time.Millisecond
	// msgOutcomeUnknown answers a call the holder took and did not answer
	// in time, or whose answer could not be read.
	msgOutcomeUnknown = "The replica holding this connection did not finish the call in time; its outcome is unknown"
	// answerWriteBound bounds the retries of the writes that end a call
	// (its answer, its deletion).
	answerWriteBound = 5 * time.Second
	// maxConcurrentCalls bounds the forwarded calls a holder runs at once.
	maxConcurrentCalls = 32
)

// MsgLeaseLost is the Unavailable message of an event or call that reached
// a replica that no longer holds the connection.
const MsgLeaseLost = connector.MsgLeaseLost

// errReroute makes invoke look up the holder again.
var errReroute = errors.New("connection holder changed")

// wireError is a fault as it crosses the mailbox.
type wireError struct {
	Kind    fault.Kind     `json:"kind"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	Reroute bool           `json:"reroute,omitempty"`
}

type wireAnswer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

type wireCall struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// invoke runs o on the live session of channelID: here when this replica
// holds it (claiming it when nobody does), else forwarded to the holder.
func invoke[R any](ctx context.Context, s *Service, channelID int64, o op) (R, error) {
	var zero R
	for range 3 {
		l, owner, err := s.acquire(ctx, channelID)
		if errors.Is(err, errReroute) {
			continue
		}
		if err != nil {
			return zero, err
		}
		if l != nil {
			l.touch(s.now())
			v, err := o.run(ctx, s, l)
			if err != nil {
				return zero, err
			}
			r, ok := v.(R)
			if !ok && v != nil {
				return zero, fault.Internalf(fmt.Errorf("op %s answered %T", o.name(), v), "run connection call")
			}
			return r, nil
		}
		raw, err := s.forward(ctx, channelID, owner, o)
		if errors.Is(err, errReroute) {
			continue
		}
		if err != nil {
			return zero, err
		}
		var r R
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &r); err != nil {
				return zero, fault.Internalf(err, "decode forwarded answer of %s", o.name())
			}
		}
		return r, nil
	}
	return zero, fault.New(fault.Unavailable, "The connection's session is moving between replicas; try again")
}

// forward posts o to the holder's mailbox and waits for the answer.
func (s *Service) forward(ctx context.Context, channelID int64, owner string, o op) (json.RawMessage, error) {
	args, err := json.Marshal(o)
	if err != nil {
		return nil, fault.Internalf(err, "encode call %s", o.name())
	}
	body, _ := json.Marshal(wireCall{Op: o.name(), Args: args})
	var id int64
	err = s.db.Bun.NewRaw(`INSERT INTO chatapp_calls (company_channel_id, owner_id, op, request, state, created_ms) VALUES (?, ?, ?, ?, 0, ?) RETURNING id`,
		channelID, owner, o.name(), body, s.nowMS()).Scan(ctx, &id)
	if err != nil {
		return nil, fault.Internalf(err, "post connection call")
	}
	s.metrics.forwarded.Inc()
	defer func() {
		if err := workqueue.Persist(ctx, answerWriteBound, func(ctx context.Context) error {
			_, err := s.db.Bun.NewRaw(`DELETE FROM chatapp_calls WHERE id = ?`, id).Exec(ctx)
			return err
		}); err != nil {
			s.log.WarnContext(ctx, "delete connection call", "id", id, "err", err)
		}
	}()
	deadline := time.Now().Add(s.callTimeout)
	tick := time.NewTicker(answerPoll)
	defer tick.Stop()
	lastLeaseCheck := time.Now()
	for {
		var row struct {
			State    int    `bun:"state"`
			Response []byte `bun:"response"`
		}
		readErr := s.db.Bun.NewRaw(`SELECT state, response FROM chatapp_calls WHERE id = ?`, id).Scan(ctx, &row)
		if readErr != nil && ctx.Err() == nil {
			// The call is posted: the holder may be running it. A cut
			// connection (a database restart) says nothing about the call,
			// so the answer is looked for again until the deadline rather
			// than reported as a failure of a call that may have run.
			if time.Now().After(deadline) {
				s.log.WarnContext(ctx, "read connection call", "id", id, "err", readErr)
				if s.withdraw(ctx, id) {
					return nil, fault.New(fault.Unavailable, "The replica holding this connection did not answer")
				}
				return nil, fault.Wrap(fault.Unavailable, msgOutcomeUnknown, fmt.Errorf("%w: %w", messaging.ErrOutcomeUnknown, readErr))
			}
		}
		if readErr == nil && row.State == callAnswered {
			var ans wireAnswer
			if err := json.Unmarshal(row.Response, &ans); err != nil {
				return nil, fault.Internalf(err, "decode connection call answer")
			}
			if e := ans.Error; e != nil {
				if e.Reroute {
					return nil, errReroute
				}
				return nil, &fault.Error{Kind: e.Kind, Message: e.Message, Details: e.Details}
			}
			return ans.Result, nil
		}
		// A holder that died leaves the call waiting: once its lease is gone,
		// withdraw the call (only if it was not taken) and route again.
		if readErr == nil && row.State == callWaiting && time.Since(lastLeaseCheck) > 250*time.Millisecond {
			lastLeaseCheck = time.Now()
			if cur, err := s.Owner(ctx, channelID); err == nil && cur != owner {
				if s.withdraw(ctx, id) {
					return nil, errReroute
				}
			}
		}
		if readErr == nil && time.Now().After(deadline) {
			if row.State == callWaiting && s.withdraw(ctx, id) {
				return nil, fault.New(fault.Unavailable, "The replica holding this connection did not answer")
			}
			// Taken and not answered: the holder may have run it. A send
			// reads this as an unknown outcome, never as a failure.
			return nil, fault.Wrap(fault.Unavailable, msgOutcomeUnknown, messaging.ErrOutcomeUnknown)
		}
		select {
		case <-ctx.Done():
			s.withdraw(context.WithoutCancel(ctx), id)
			return nil, fault.Wrap(fault.Unavailable, "The call was cancelled", ctx.Err())
		case <-tick.C:
		}
	}
}

// withdraw deletes a call nobody took yet; false when the holder took it.
func (s *Service) withdraw(ctx context.Context, id int64) bool {
	res, err := s.db.Bun.NewRaw(`DELETE FROM chatapp_calls WHERE id = ? AND state = 0`, id).Exec(ctx)
	if err != nil {
		return false
	}
	n, _ := res.RowsAffected()
	return n == 1
}

type takenCall struct {
	ID        int64  `bun:"id"`
	ChannelID int64  `bun:"company_channel_id"`
	Request   []byte `bun:"request"`
}

// ServeCalls takes the calls addressed to this replica and runs each on its
// session; Run calls it every poll interval.
func (s *Service) ServeCalls(ctx context.Context) {
	var calls []takenCall
	err := s.db.Bun.NewRaw(`UPDATE chatapp_calls SET state = 1 WHERE owner_id = ? AND state = 0 RETURNING id, company_channel_id, request`, s.id).Scan(ctx, &calls)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "take connection calls", "err", err)
		}
		return
	}
	for _, c := range calls {
		s.callSlots <- struct{}{}
		s.calls.Add(1)
		go func() {
			defer func() { <-s.callSlots; s.calls.Done() }()
			s.answer(context.WithoutCancel(ctx), c)
		}()
	}
}

func (s *Service) answer(ctx context.Context, c takenCall) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	ans := s.runForwarded(ctx, c)
	body, err := json.Marshal(ans)
	if err != nil {
		body, _ = json.Marshal(wireAnswer{Error: &wireError{Kind: fault.Internal, Message: "Internal server error."}})
	}
	// The call ran: its answer must reach the caller even past the call's
	// own deadline or through a cut connection, or the caller reports an
	// unknown outcome for a call that has one.
	if err := workqueue.Persist(ctx, answerWriteBound, func(ctx context.Context) error {
		_, err := s.db.Bun.NewRaw(`UPDATE chatapp_calls SET state = 2, response = ? WHERE id = ?`, body, c.ID).Exec(ctx)
		return err
	}); err != nil {
		s.log.WarnContext(ctx, "answer connection call", "id", c.ID, "err", err)
	}
}

func (s *Service) runForwarded(ctx context.Context, c takenCall) wireAnswer {
	var call wireCall
	if err := json.Unmarshal(c.Request, &call); err != nil {
		return wireAnswer{Error: &wireError{Kind: fault.Internal, Message: "Internal server error."}}
	}
	newOp, ok := opTypes[call.Op]
	if !ok {
		// A newer replica's call this one does not know.
		return wireAnswer{Error: &wireError{Kind: fault.Unavailable, Message: "The replica holding this connection cannot run " + call.Op}}
	}
	o := newOp()
	if err := json.Unmarshal(call.Args, o); err != nil {
		return wireAnswer{Error: &wireError{Kind: fault.Internal, Message: "Internal server error."}}
	}
	l := s.local(c.ChannelID)
	if l == nil {
		return wireAnswer{Error: &wireError{Kind: fault.Unavailable, Message: MsgLeaseLost, Reroute: true}}
	}
	l.touch(s.now())
	v, err := o.run(ctx, s, l)
	if err != nil {
		fe := fault.As(err)
		if fe.Kind == fault.Internal {
			s.log.ErrorContext(ctx, "forwarded connection call failed", "op", call.Op, "channel_id", c.ChannelID, "err", err)
		}
		return wireAnswer{Error: &wireError{Kind: fe.Kind, Message: fe.Message, Details: fe.Details}}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return wireAnswer{Error: &wireError{Kind: fault.Internal, Message: "Internal server error."}}
	}
	return wireAnswer{Result: raw}
}
