// Package eventstream is the live event stream (issue 27): a company's
// events as they are published, over Server-Sent Events, resumable from the
// webhooks' event log by Last-Event-ID, opened with a short-lived ticket.
// It owns the stream tickets; the events come from webhooks (EventLogAfter),
// which owns the log.
package eventstream

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Log is what the stream needs of the webhooks' event log.
type Log interface {
	EventLogAfter(ctx context.Context, companyID, seq int64, limit int) ([]webhooks.LoggedEvent, error)
	EventLogHead(ctx context.Context) (int64, error)
	Logged() <-chan struct{}
}

// tailBatch bounds one read of the shared tail.
const tailBatch = 512

// retryAfterFull is the Retry-After of a company whose streams are at their
// bound: a dashboard closed in another tab frees one at once.
const retryAfterFull = 5

// hub is the replica's one reader of the log's tail: it reads each new
// event once, whatever the number of streams, and hands it to the streams
// of its company. It runs only while a stream is open.
type hub struct {
	log    Log
	logger *slog.Logger

	// perCompany bounds a company's streams here (Options.MaxPerCompany).
	perCompany int

	mu      sync.Mutex
	subs    map[int64]map[*reader]struct{}
	n       int
	pos     int64 // every event up to pos was handed out
	running bool
	stop    chan struct{}
}

func newHub(log Log, logger *slog.Logger, perCompany int) *hub {
	return &hub{log: log, logger: logger, perCompany: perCompany, subs: map[int64]map[*reader]struct{}{}}
}

// reader is one open stream as the hub sees it: a bounded buffer, and cut,
// closed when the buffer overflowed (the reader is too slow).
type reader struct {
	company int64
	buf     chan webhooks.LoggedEvent
	cut     chan struct{}
	cutOnce sync.Once
}

func (r *reader) overflow() { r.cutOnce.Do(func() { close(r.cut) }) }

// join registers r and returns the position from which the hub hands
// events to it (every later event is pushed to its buffer). A company that
// already has its bound of streams open here gets fault.RateLimited.
func (h *hub) join(ctx context.Context, r *reader) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs[r.company]) >= h.perCompany {
		return 0, &fault.Error{Kind: fault.RateLimited, Message: MsgTooManyStreams, RetryAfterSeconds: retryAfterFull}
	}
	if !h.running {
		head, err := h.log.EventLogHead(ctx)
		if err != nil {
			return 0, err
		}
		h.pos, h.running, h.stop = head, true, make(chan struct{})
		go h.tail(h.stop)
	}
	if h.subs[r.company] == nil {
		h.subs[r.company] = map[*reader]struct{}{}
	}
	h.subs[r.company][r] = struct{}{}
	h.n++
	return h.pos, nil
}

func (h *hub) leave(r *reader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(r)
}

func (h *hub) removeLocked(r *reader) {
	if _, ok := h.subs[r.company][r]; !ok {
		return
	}
	delete(h.subs[r.company], r)
	if len(h.subs[r.company]) == 0 {
		delete(h.subs, r.company)
	}
	h.n--
	if h.n == 0 && h.running {
		close(h.stop)
		h.running = false
	}
}

// listening reports whether a stream of the company is open here.
func (h *hub) listening(companyID int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[companyID]) > 0
}

// tail reads the log after pos on every wake from this replica's fan-out
// and every webhooks.EventLogPoll (other replicas' events).
func (h *hub) tail(stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	poll := time.NewTicker(webhooks.EventLogPoll)
	defer poll.Stop()
	for {
		woke := h.log.Logged()
		for {
			h.mu.Lock()
			pos := h.pos
			h.mu.Unlock()
			evs, err := h.log.EventLogAfter(ctx, 0, pos, tailBatch)
			if err != nil {
				if ctx.Err() == nil {
					h.logger.WarnContext(ctx, "eventstream: read the event log", "err", err)
				}
				break
			}
			h.hand(stop, evs)
			if len(evs) < tailBatch {
				break
			}
		}
		select {
		case <-stop:
			return
		case <-woke:
		case <-poll.C:
		}
	}
}

// hand gives evs to their companies' readers; a reader whose buffer is
// full is cut, never waited for.
func (h *hub) hand(stop chan struct{}, evs []webhooks.LoggedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-stop:
		return // a newer tail may own pos
	default:
	}
	for _, ev := range evs {
		for r := range h.subs[ev.CompanyID] {
			select {
			case r.buf <- ev:
			default:
				// Cut: it gets nothing more from the hub (the log has it).
				r.overflow()
				h.removeLocked(r)
			}
		}
		h.pos = ev.Seq
	}
}
