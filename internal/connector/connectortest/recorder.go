// Package connectortest holds what driver tests share: a Handler that
// records every event a session reports.
package connectortest

import (
	"context"
	"sync"

	"github.com/chatmsg/gateway/internal/connector"
)

// Recorder is a connector.Handler that keeps what it was told. Fail, when
// set, is returned by Inbound and Changed (a store that failed).
type Recorder struct {
	mu   sync.Mutex
	Fail error
	// Lost is what Holds answers (nil: still held); Checks counts the
	// calls.
	Lost     error
	Checks   int
	Refs     []string
	Out      []string
	Messages []connector.Inbound
	Receipts []connector.Receipt
	Changes  []connector.Change
	States   []connector.SessionState
}

var _ connector.Handler = (*Recorder)(nil)

func (r *Recorder) Paired(_ context.Context, ref string) error { return record(r, &r.Refs, ref, false) }

func (r *Recorder) LoggedOut(_ context.Context, reason string) error {
	return record(r, &r.Out, reason, false)
}

func (r *Recorder) Inbound(_ context.Context, m connector.Inbound) error {
	return record(r, &r.Messages, m, true)
}

func (r *Recorder) Receipt(_ context.Context, rc connector.Receipt) error {
	return record(r, &r.Receipts, rc, false)
}

func (r *Recorder) Changed(_ context.Context, c connector.Change) error {
	return record(r, &r.Changes, c, true)
}

func (r *Recorder) State(_ context.Context, st connector.SessionState) error {
	return record(r, &r.States, st, false)
}

// record appends v to list, or answers Fail for what can fail to store.
func record[T any](r *Recorder, list *[]T, v T, canFail bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if canFail && r.Fail != nil {
		return r.Fail
	}
	*list = append(*list, v)
	return nil
}

func (r *Recorder) Holds(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Checks++
	return r.Lost
}
