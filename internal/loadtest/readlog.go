package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
)

// publishLog is what a scenario published: when each event was due and
// which the gateway accepted. It is safe for concurrent use.
type publishLog struct {
	mu       sync.Mutex
	due      map[string]time.Time // import id → when its publish was due
	accepted []string
}

func newPublishLog() *publishLog { return &publishLog{due: map[string]time.Time{}} }

func (p *publishLog) publishing(id string, due time.Time) {
	p.mu.Lock()
	p.due[id] = due
	p.mu.Unlock()
}

func (p *publishLog) accept(id string) {
	p.mu.Lock()
	p.accepted = append(p.accepted, id)
	p.mu.Unlock()
}

// snapshot returns copies of the accepted ids and of the due times.
func (p *publishLog) snapshot() ([]string, map[string]time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	due := make(map[string]time.Time, len(p.due))
	for k, v := range p.due {
		due[k] = v
	}
	return append([]string(nil), p.accepted...), due
}

// readLog is what one consumer (a broker consumer, one stream reader)
// read of the published events. Messages are counted by key (the
// delivery id of a broker message, the SSE id of a stream event) for
// duplicates, and by import id for what is missing. It is safe for
// concurrent use.
type readLog struct {
	mu       sync.Mutex
	first    map[string]firstRead // import id → its first read
	keys     map[string]*keyReads
	rejected int
	// rejectReason is the first rejection's error text.
	rejectReason string
}

type firstRead struct {
	at time.Time
	// stored is when the broker stored the message (JetStream's own
	// timestamp); zero when the broker does not say.
	stored time.Time
}

type keyReads struct {
	importID string
	n        int
}

func newReadLog() *readLog {
	return &readLog{first: map[string]firstRead{}, keys: map[string]*keyReads{}}
}

// add records a message read at at, carrying the event importID under
// key.
func (l *readLog) add(key, importID string, at, stored time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.first[importID]; !ok {
		l.first[importID] = firstRead{at: at, stored: stored}
	}
	k := l.keys[key]
	if k == nil {
		k = &keyReads{importID: importID}
		l.keys[key] = k
	}
	k.n++
}

// reject records a message the consumer refused (signature, format).
func (l *readLog) reject(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rejected++
	if l.rejectReason == "" {
		l.rejectReason = err.Error()
	}
}

// missing is how many of accepted were not read yet.
func (l *readLog) missing(accepted []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, id := range accepted {
		if _, ok := l.first[id]; !ok {
			n++
		}
	}
	return n
}

// readTally is what a consumer read of a set of accepted events.
type readTally struct {
	Expected   int
	Read       int // accepted events read at least once
	Missing    int
	Duplicates int // messages of accepted events beyond the first under the same key
	Rejected   int // of every message read, accepted or not
	// RejectReason is the first rejection's error.
	RejectReason string
	// ToRead and ToStored are publish (when it was due) → first read, and
	// → the broker's stored time, of every accepted event read.
	ToRead, ToStored []time.Duration
	FirstDue         time.Time // the earliest due time of the accepted events
	LastRead         time.Time // the last first read of an accepted event
}

// tally counts, of the events accepted, what was read, with due the time
// each publish was due.
func (l *readLog) tally(accepted []string, due map[string]time.Time) readTally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := readTally{Expected: len(accepted), Rejected: l.rejected, RejectReason: l.rejectReason}
	want := make(map[string]bool, len(accepted))
	for _, id := range accepted {
		want[id] = true
		d, hasDue := due[id]
		if hasDue && (t.FirstDue.IsZero() || d.Before(t.FirstDue)) {
			t.FirstDue = d
		}
		f, ok := l.first[id]
		if !ok {
			continue
		}
		t.Read++
		if f.at.After(t.LastRead) {
			t.LastRead = f.at
		}
		if hasDue {
			t.ToRead = append(t.ToRead, f.at.Sub(d))
			if !f.stored.IsZero() {
				t.ToStored = append(t.ToStored, f.stored.Sub(d))
			}
		}
	}
	t.Missing = t.Expected - t.Read
	for _, k := range l.keys {
		if want[k.importID] {
			t.Duplicates += k.n - 1
		}
	}
	return t
}

// perSecond is the accepted events read per second, from the first
// publish's due time to the last first read: what the whole path
// sustained, its drain included.
func (t readTally) perSecond() float64 {
	span := t.LastRead.Sub(t.FirstDue)
	if t.Read == 0 || span <= 0 {
		return 0
	}
	return float64(t.Read) / span.Seconds()
}

// signatureTolerance is how old a message's signature may be when the
// consumer reads it: the subscriber library's default for webhooks. A
// message read later than this after it was signed counts as rejected.
const signatureTolerance = 5 * time.Minute

// brokerEvent verifies a broker message as a subscriber does (verify is
// subscriber.VerifyNATS or VerifyAMQP on the raw message) and decodes it
// with the subscriber library: its delivery id and the import id of the
// contact.import.completed it carries.
func brokerEvent(header http.Header, body []byte, verify func() error) (deliveryID, importID string, err error) {
	if err := verify(); err != nil {
		return "", "", err
	}
	d, err := subscriber.Decode(header, body)
	if err != nil {
		return "", "", err
	}
	p, ok := d.Data.(*events.ContactImportCompletedPayload)
	if !ok || p.ImportID == "" {
		return "", "", fmt.Errorf("%w: %s without an import id", subscriber.ErrMalformedDelivery, d.Event)
	}
	return d.ID, p.ImportID, nil
}

// streamImportID is the import id of a contact.import.completed the
// stream carried (the webhook envelope without delivery_id).
func streamImportID(data []byte) (string, error) {
	var env struct {
		Event string `json:"event"`
		Data  struct {
			ImportID string `json:"import_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return "", fmt.Errorf("stream event data: %w", err)
	}
	if env.Event != events.ContactImportCompleted || env.Data.ImportID == "" {
		return "", fmt.Errorf("stream event %q without an import id", env.Event)
	}
	return env.Data.ImportID, nil
}

// eventCall publishes contact.import.completed through POST /api/events
// with the import id prefix-n, over co's tokens, and records it in pub.
func (r *runner) eventCall(co *Company, prefix string, pub *publishLog) Call {
	return func(ctx context.Context, seq int, due time.Time) string {
		id := fmt.Sprintf("%s-%d", prefix, r.seq.Add(1))
		pub.publishing(id, due)
		status, _, err := r.api.Do(ctx, "POST", "/api/events", co.token(seq), importEvent(id))
		out := outcome(status, err)
		if out == "" {
			pub.accept(id)
		}
		return out
	}
}
