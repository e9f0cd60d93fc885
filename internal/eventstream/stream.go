package eventstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Defaults of a stream connection.
const (
	// BufferEvents bounds the events waiting for one connection: a reader
	// that falls this far behind is cut and resumes from its last id, so a
	// slow reader costs this much memory at most.
	BufferEvents = 256
	// catchUpBatch is one read of the log while a stream resumes.
	catchUpBatch = 256
	// heartbeat keeps proxies from closing an idle stream.
	heartbeat = 15 * time.Second
	// writeTimeout: a write the reader does not take within it ends the
	// stream (the same as a full buffer).
	writeTimeout = 10 * time.Second
	// retryMillis is the reconnect delay the stream asks browsers for.
	retryMillis = 1000
)

// Reasons a stream ends, sent in its last event (event: stream.cut).
const (
	ReasonSlowReader = "slow_reader"
	ReasonShutdown   = "shutdown"
)

// Options configure the service; zero values are production defaults.
type Options struct {
	Now    clock.Clock
	Logger *slog.Logger
	// BufferEvents replaces BufferEvents (tests).
	BufferEvents int
	// MaxPerCompany bounds the streams one company has open on this
	// replica (0: DefaultMaxPerCompany). Each holds a goroutine, a
	// connection and up to BufferEvents events, so one company's readers
	// must not grow without bound in a process every company shares.
	MaxPerCompany int
}

// DefaultMaxPerCompany is MaxPerCompany's default: above the 100 readers
// one company's dashboards are expected to open (issue 27's scenario),
// and at most a few tens of megabytes of buffers.
const DefaultMaxPerCompany = 128

// MsgTooManyStreams is the 429 of a stream over its company's bound.
const MsgTooManyStreams = "Too many event streams are open for this company; close one or retry shortly."

// Service serves streams and issues their tickets.
type Service struct {
	db     *store.DB
	log    Log
	hub    *hub
	now    clock.Clock
	logger *slog.Logger
	buffer int
}

// New returns the service reading log (the webhooks service).
func New(db *store.DB, log Log, opts Options) *Service {
	s := &Service{db: db, log: log, now: opts.Now, logger: opts.Logger, buffer: opts.BufferEvents}
	if s.now == nil {
		s.now = clock.System
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.buffer <= 0 {
		s.buffer = BufferEvents
	}
	if opts.MaxPerCompany <= 0 {
		opts.MaxPerCompany = DefaultMaxPerCompany
	}
	s.hub = newHub(log, s.logger, opts.MaxPerCompany)
	return s
}

// Listening reports whether a stream of the company is open on this
// replica (webhooks.Service.SetStreamAudience).
func (s *Service) Listening(companyID int64) bool { return s.hub.listening(companyID) }

// Filter narrows a stream as a subscription's filters do: events (empty =
// every subscribable event) and company_channel_ids (empty = every
// channel; applies to channel-scope events only).
type Filter struct {
	Events     []string
	ChannelIDs []int64
}

func (f Filter) wants(ev webhooks.LoggedEvent) bool {
	if len(f.Events) > 0 && !slices.Contains(f.Events, ev.Name) {
		return false
	}
	info, ok := events.Lookup(ev.Name)
	if !ok || !info.Subscribable {
		return false
	}
	if info.Scope == events.ScopeChannel && len(f.ChannelIDs) > 0 {
		return ev.CompanyChannelID != nil && slices.Contains(f.ChannelIDs, *ev.CompanyChannelID)
	}
	return true
}

// Serve streams the company's events to w until the client leaves, the
// reader falls too far behind, or ctx ends. after is the Last-Event-ID
// the client resumes from (nil: from now). The caller has authenticated
// the request.
func (s *Service) Serve(ctx context.Context, w http.ResponseWriter, companyID int64, f Filter, after *int64) error {
	r := &reader{company: companyID, buf: make(chan webhooks.LoggedEvent, s.buffer), cut: make(chan struct{})}
	pos, err := s.hub.join(ctx, r)
	if err != nil {
		return err
	}
	defer s.hub.leave(r)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: rc}
	if err := sw.comment(fmt.Sprintf("retry: %d", retryMillis), true); err != nil {
		return nil
	}

	// last is the seq the client has; events up to it are not sent again.
	last := pos
	if after != nil {
		last = *after
		// Resume: read the log up to where the hub hands events over (or
		// further: what is read here is skipped when it comes live).
		for last < pos {
			evs, err := s.log.EventLogAfter(ctx, companyID, last, catchUpBatch)
			if err != nil {
				return nil // the client reconnects and resumes
			}
			for _, ev := range evs {
				if f.wants(ev) {
					if err := sw.event(ev); err != nil {
						return nil
					}
				}
				last = ev.Seq
			}
			if len(evs) < catchUpBatch {
				break
			}
			select {
			case <-r.cut:
				_ = sw.cut(ReasonSlowReader, last)
				return nil
			default:
			}
		}
		if err := sw.flush(); err != nil {
			return nil
		}
	}

	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case ev := <-r.buf:
			if ev.Seq <= last {
				continue
			}
			last = ev.Seq
			if !f.wants(ev) {
				continue
			}
			if err := sw.event(ev); err != nil {
				return nil
			}
			// Write what is waiting in one go, then flush once.
			for more := true; more; {
				select {
				case ev := <-r.buf:
					if ev.Seq > last {
						last = ev.Seq
						if f.wants(ev) {
							if err := sw.event(ev); err != nil {
								return nil
							}
						}
					}
				default:
					more = false
				}
			}
			if err := sw.flush(); err != nil {
				return nil
			}
		case <-r.cut:
			// The reason goes now, not after the events still buffered
			// (writing those to a reader this slow is what could not be
			// done): the client resumes after the last event it got, and
			// the log has the rest, so nothing is lost.
			_ = sw.cut(ReasonSlowReader, last)
			return nil
		case <-beat.C:
			if err := sw.comment("keep-alive", true); err != nil {
				return nil
			}
		case <-ctx.Done():
			_ = sw.cut(ReasonShutdown, last)
			return nil
		}
	}
}

// sseWriter writes the event-stream format with a deadline per write, so a
// reader that stops reading ends its stream instead of holding it.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s *sseWriter) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := s.w.Write(b)
	return err
}

func (s *sseWriter) flush() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return s.rc.Flush()
}

func (s *sseWriter) comment(text string, flush bool) error {
	var line string
	if len(text) > 6 && text[:6] == "retry:" {
		line = text + "\n\n"
	} else {
		line = ": " + text + "\n\n"
	}
	if err := s.write([]byte(line)); err != nil {
		return err
	}
	if flush {
		return s.flush()
	}
	return nil
}

// event writes ev: its seq as the id, its name as the event type, its
// envelope (one JSON line) as the data.
func (s *sseWriter) event(ev webhooks.LoggedEvent) error {
	b := make([]byte, 0, len(ev.Envelope)+64)
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Name...)
	b = append(b, "\ndata: "...)
	b = append(b, ev.Envelope...)
	b = append(b, "\n\n"...)
	return s.write(b)
}

// cut tells the client why the stream ends and where to resume.
func (s *sseWriter) cut(reason string, last int64) error {
	data, _ := json.Marshal(map[string]any{"reason": reason, "last_event_id": strconv.FormatInt(last, 10)})
	if err := s.write(fmt.Appendf(nil, "event: stream.cut\ndata: %s\n\n", data)); err != nil {
		return err
	}
	return s.flush()
}
