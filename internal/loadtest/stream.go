package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// StreamResult is events-stream: readers of one company's live stream
// while it publishes.
type StreamResult struct {
	Readers   int     `json:"readers"`
	Connected int     `json:"connected"` // readers whose stream opened before the publishing started
	Rate      float64 `json:"publish_per_s"`
	Accepted  int     `json:"accepted"`
	// Publish is the latency of POST /api/events from when it was due.
	Publish Latency        `json:"publish"`
	Errors  map[string]int `json:"errors,omitempty"`
	// OpenErrors are the failed attempts to open a stream (first or
	// reconnect), by status or "transport".
	OpenErrors map[string]int `json:"open_errors,omitempty"`
	// ToRead is publish (when it was due) → read, over every reader's
	// first read of every accepted event.
	ToRead Latency `json:"publish_to_read"`
	// ReadsPerSec is the events all readers read per second, from the
	// first publish to the last read; PerReader the same per reader.
	ReadsPerSec float64 `json:"reads_per_s"`
	PerReader   float64 `json:"reads_per_s_per_reader"`
	// Missing per reader after the drain: the most, the sum, and how many
	// readers missed any.
	MissingMax     int `json:"missing_max"`
	MissingTotal   int `json:"missing_total"`
	ReadersMissing int `json:"readers_missing"`
	Duplicates     int `json:"duplicates"` // events read again under an id already read, all readers
	Rejected       int `json:"rejected"`   // events whose data did not decode
	// Cuts are the stream.cut events received; ReadersCut the readers cut
	// at least once; Reasons the cuts by reason. A cut reader reconnects
	// with Last-Event-ID, as EventSource does.
	Cuts       int            `json:"cuts"`
	ReadersCut int            `json:"readers_cut"`
	Reasons    map[string]int `json:"cut_reasons,omitempty"`
	Reconnects int            `json:"reconnects"`
	Drained    bool           `json:"drained"`
	DrainedIn  float64        `json:"drained_in_s"`
}

// ticketSource issues stream tickets (POST /api/events/stream-tickets) and
// reuses one while it is fresh: a ticket opens any number of streams for
// 60 s, as EventSource's reconnects need.
type ticketSource struct {
	api    *Client
	token  string
	mu     sync.Mutex
	ticket string
	issued time.Time
}

// ticketReuse is how long a ticket is handed out after it was issued,
// well inside its 60 s.
const ticketReuse = 40 * time.Second

func (t *ticketSource) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ticket != "" && time.Since(t.issued) < ticketReuse {
		return t.ticket, nil
	}
	var out struct {
		Ticket string `json:"ticket"`
	}
	if err := t.api.JSON(ctx, "POST", "/api/events/stream-tickets", t.token, nil, &out); err != nil {
		return "", err
	}
	if out.Ticket == "" {
		return "", errors.New("POST /api/events/stream-tickets: no ticket in the answer")
	}
	t.ticket, t.issued = out.Ticket, time.Now()
	return t.ticket, nil
}

// expire drops ticket if it is the current one (the gateway refused it).
func (t *ticketSource) expire(ticket string) {
	t.mu.Lock()
	if t.ticket == ticket {
		t.ticket = ""
	}
	t.mu.Unlock()
}

// streamReader is one reader of the stream, reconnecting as EventSource
// does until its context ends.
type streamReader struct {
	log     *readLog
	opened  chan struct{} // closed when its first stream opened
	once    sync.Once
	mu      sync.Mutex
	cuts    int
	reasons map[string]int
	errs    map[string]int
	reconn  int
}

func (sr *streamReader) count(m *map[string]int, k string) {
	sr.mu.Lock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[k]++
	sr.mu.Unlock()
}

// read opens the stream and reads it until ctx ends: after a cut or a
// lost connection it waits the stream's retry delay and resumes with
// Last-Event-ID.
func (r *runner) read(ctx context.Context, hc *http.Client, tickets *ticketSource, sr *streamReader) {
	lastID := ""
	retry := time.Second
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			sr.mu.Lock()
			sr.reconn++
			sr.mu.Unlock()
			select {
			case <-time.After(retry):
			case <-ctx.Done():
				return
			}
		}
		ticket, err := tickets.get(ctx)
		if err != nil {
			sr.count(&sr.errs, "ticket")
			continue
		}
		q := url.Values{"ticket": {ticket}, "events": {"contact.import.completed"}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.api.base()+"/api/events/stream?"+q.Encode(), nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				sr.count(&sr.errs, "transport")
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				tickets.expire(ticket)
			}
			sr.count(&sr.errs, strconv.Itoa(resp.StatusCode))
			continue
		}
		sr.once.Do(func() { close(sr.opened) })
		p := newSSEReader(resp.Body)
		p.LastID = lastID
		for {
			ev, err := p.Next()
			if err != nil {
				break
			}
			switch ev.Event {
			case "stream.cut":
				var cut struct {
					Reason string `json:"reason"`
				}
				_ = json.Unmarshal([]byte(ev.Data), &cut)
				sr.mu.Lock()
				sr.cuts++
				sr.mu.Unlock()
				sr.count(&sr.reasons, cut.Reason)
			default:
				id, err := streamImportID([]byte(ev.Data))
				if err != nil {
					sr.log.reject(err)
					continue
				}
				sr.log.add(ev.ID, id, time.Now(), time.Time{})
			}
		}
		resp.Body.Close()
		lastID = p.LastID
		if p.Retry > 0 {
			retry = time.Duration(p.Retry) * time.Millisecond
		}
	}
}

// runStream opens -stream-readers streams of one company, publishes
// contact.import.completed at -stream-rate for -duration once they are
// open, waits up to the drain bound for every reader to have every
// accepted event, and closes them. The gateway's RSS is the scenario's
// footprint (sampled from before the readers opened to after they closed).
func (r *runner) runStream(ctx context.Context, run int, res *Result) error {
	co, err := r.scenarioCompany(ctx, ScenarioEventsStream)
	if err != nil {
		return err
	}
	n := r.o.StreamReaders
	st := &StreamResult{Readers: n, Rate: r.o.StreamRate}
	res.Stream = st
	tickets := &ticketSource{api: r.api, token: co.Token}
	if _, err := tickets.get(ctx); err != nil {
		return err
	}
	// A transport of their own, without the API client's 30 s timeout: a
	// stream lasts as long as its reader.
	tr := &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	readers := make([]*streamReader, n)
	var wg sync.WaitGroup
	for i := range readers {
		sr := &streamReader{log: newReadLog(), opened: make(chan struct{})}
		readers[i] = sr
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.read(rctx, hc, tickets, sr)
		}()
	}
	// Publishing starts once every reader is in (or 30 s passed): a
	// stream without Last-Event-ID starts at now.
	deadline := time.After(30 * time.Second)
wait:
	for _, sr := range readers {
		select {
		case <-sr.opened:
		case <-deadline:
			break wait
		case <-ctx.Done():
			stop()
			wg.Wait()
			return ctx.Err()
		}
	}
	for _, sr := range readers {
		select {
		case <-sr.opened:
			st.Connected++
		default:
		}
	}
	pub := newPublishLog()
	rec := NewRecorder()
	Drive(ctx, Shape{Mode: Open, Rate: r.o.StreamRate, Duration: r.o.Duration, MaxInFlight: 1024}, rec,
		r.eventCall(co, fmt.Sprintf("stream-%d", run), pub))
	accepted, due := pub.snapshot()
	last := time.Now()
	st.Drained = WaitFor(ctx, r.o.Drain, func() bool {
		for _, sr := range readers {
			if sr.log.missing(accepted) > 0 {
				return false
			}
		}
		return true
	})
	st.DrainedIn = time.Since(last).Seconds()
	stop()
	wg.Wait()
	st.Accepted, st.Publish, st.Errors = rec.Count(), rec.Latencies(), rec.Errors()
	var lats []time.Duration
	var firstDue, lastRead time.Time
	reads := 0
	for _, sr := range readers {
		t := sr.log.tally(accepted, due)
		lats = append(lats, t.ToRead...)
		reads += t.Read
		st.MissingTotal += t.Missing
		st.MissingMax = max(st.MissingMax, t.Missing)
		if t.Missing > 0 {
			st.ReadersMissing++
		}
		st.Duplicates += t.Duplicates
		st.Rejected += t.Rejected
		if firstDue.IsZero() || (!t.FirstDue.IsZero() && t.FirstDue.Before(firstDue)) {
			firstDue = t.FirstDue
		}
		if t.LastRead.After(lastRead) {
			lastRead = t.LastRead
		}
		sr.mu.Lock()
		st.Cuts += sr.cuts
		if sr.cuts > 0 {
			st.ReadersCut++
		}
		st.Reconnects += sr.reconn
		st.Reasons = addCounts(st.Reasons, sr.reasons)
		st.OpenErrors = addCounts(st.OpenErrors, sr.errs)
		sr.mu.Unlock()
	}
	st.ToRead = Summarise(lats)
	if span := lastRead.Sub(firstDue); reads > 0 && span > 0 {
		st.ReadsPerSec = float64(reads) / span.Seconds()
		st.PerReader = st.ReadsPerSec / float64(n)
	}
	res.OK, res.Errors = st.Accepted, st.Errors
	r.o.Log("events-stream: %d/%d readers, %d accepted, publish→read p50 %.1f p99 %.1f ms, missing max %d, %d readers cut",
		st.Connected, n, st.Accepted, st.ToRead.P50, st.ToRead.P99, st.MissingMax, st.ReadersCut)
	return nil
}

// addCounts adds the counts of b to a (made when nil).
func addCounts(a, b map[string]int) map[string]int {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = map[string]int{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}
