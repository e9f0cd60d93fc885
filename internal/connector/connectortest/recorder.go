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
	mu       sync.Mutex
	Fail     error
	Refs     []string
	Out      []string
	Messages []connector.Inbound
	Receipts []connector.Receipt
	Changes  []connector.Change
	States   []connector.SessionState
}

var _ connector.Handler = (*Recorder)(nil)

func (r *Recorder) Paired(_ context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Refs = append(r.Refs, ref)
	return nil
}

func (r *Recorder) LoggedOut(_ context.Context, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Out = append(r.Out, reason)
	return nil
}

func (r *Recorder) Inbound(_ context.Context, m connector.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail != nil {
		return r.Fail
	}
	r.Messages = append(r.Messages, m)
	return nil
}

func (r *Recorder) Receipt(_ context.Context, rc connector.Receipt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Receipts = append(r.Receipts, rc)
	return nil
}

func (r *Recorder) Changed(_ context.Context, c connector.Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail != nil {
		return r.Fail
	}
	r.Changes = append(r.Changes, c)
	return nil
}

func (r *Recorder) State(_ context.Context, st connector.SessionState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.States = append(r.States, st)
	return nil
}
