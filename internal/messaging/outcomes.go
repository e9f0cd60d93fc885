package messaging

import (
	"context"
	"strings"
	"sync"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// sentWriter records the Sent outcomes of attempts that finish together in
// one UPDATE, a group commit: the first outcome is written at once, and the
// ones that arrive while that statement runs go together in the next. Under
// load a queue's attempts end within moments of each other, and one
// statement and one commit for several messages is where a send spends less
// of the database than with a statement each; alone, an outcome is written
// as soon as before.
//
// Only the plain case comes here: a message whose company does not listen
// to the event (no transaction, no event to publish), leaving Pending for
// Sent. Anything a batch cannot settle (an external id another message
// holds, a failed statement) is left to the single-message path, which
// knows how.
type sentWriter struct {
	mu      sync.Mutex
	busy    bool // a flush goroutine runs
	pending []*sentRecord
}

// sentRecord is one outcome waiting for its statement.
type sentRecord struct {
	id  int64
	ext string

	done    chan struct{}
	row     messageRow // the message as the statement left it, when changed
	changed bool       // it was still Pending
	err     error
}

// sentBatchMax bounds the messages of one statement.
const sentBatchMax = 100

// writeSent records message id as Sent with external id ext, together with
// whatever else is waiting. changed is false when the message had already
// left Pending (a receipt or another attempt got there first). An error
// means nothing is known to be written: the caller takes the single path.
func (s *Service) writeSent(ctx context.Context, id int64, ext string) (messageRow, bool, error) {
	w := &s.sent
	r := &sentRecord{id: id, ext: ext, done: make(chan struct{})}
	w.mu.Lock()
	w.pending = append(w.pending, r)
	if !w.busy {
		w.busy = true
		go s.flushSent()
	}
	w.mu.Unlock()
	select {
	case <-r.done:
		return r.row, r.changed, r.err
	case <-ctx.Done():
		return messageRow{}, false, ctx.Err()
	}
}

// flushSent writes what is pending, batch after batch, until nothing is.
func (s *Service) flushSent() {
	w := &s.sent
	for {
		w.mu.Lock()
		n := min(len(w.pending), sentBatchMax)
		batch := w.pending[:n:n]
		w.pending = w.pending[n:]
		if n == 0 {
			w.pending = nil
			w.busy = false
		}
		w.mu.Unlock()
		if n == 0 {
			return
		}
		// The statement serves several attempts: none of their contexts
		// may cut it short, a bound of its own does.
		ctx, cancel := context.WithTimeout(context.Background(), queueWriteTimeout)
		s.execSent(ctx, batch)
		cancel()
	}
}

// execSent runs one batch: one UPDATE … RETURNING * over every message of
// it, each given its own external id. The messages it returns were still
// Pending; the others are left as they are, as leavePending would.
func (s *Service) execSent(ctx context.Context, batch []*sentRecord) {
	now := s.deps.Now()
	var q strings.Builder
	args := make([]any, 0, 2*len(batch)+6)
	q.WriteString(`UPDATE messages SET ` + leaveSet + `, received_at = ?, external_id = CASE id`)
	args = append(args, leaveArgs(now, StatusSent)...)
	args = append(args, now)
	for _, r := range batch {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, r.id, r.ext)
	}
	ids := make([]int64, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	q.WriteString(" END WHERE status_id = ? AND id IN (?) RETURNING *")
	args = append(args, StatusPending, bun.In(ids))
	var rows []messageRow
	err := s.deps.DB.Bun.NewRaw(q.String(), args...).Scan(ctx, &rows)
	if store.IsNoRows(err) {
		err = nil // none was Pending any more
	}
	if err != nil {
		err = fault.Internalf(err, "mark %d messages sent", len(batch))
	} else {
		s.metrics.sentBatch.Observe(float64(len(batch)))
	}
	byID := make(map[int64]*messageRow, len(rows))
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	for _, r := range batch {
		if err != nil {
			r.err = err
		} else if row, ok := byID[r.id]; ok {
			r.row, r.changed = *row, true
		}
		close(r.done)
	}
	if err != nil {
		s.deps.Logger.Warn("batched sent outcomes not written; each is written alone", "messages", len(batch), "err", err)
	}
}
