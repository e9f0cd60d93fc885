package loadtest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// EndpointKind is how a failing webhook endpoint behaves.
type EndpointKind string

const (
	// BlackHole accepts the connection and reads the request, and never
	// answers: the gateway's attempt ends at its own timeout.
	BlackHole EndpointKind = "black-hole"
	// Unavailable answers 503 at once.
	Unavailable EndpointKind = "503"
	// Slow answers 204 after SlowAnswer, within the document's 10 s.
	Slow EndpointKind = "slow"
)

// SlowAnswer is how long a Slow endpoint takes to answer.
const SlowAnswer = 8 * time.Second

// FailingEndpoints are webhook endpoints that fail the way a tenant's
// broken receivers do, each on a listener of its own on 127.0.0.1, so
// that the gateway sees as many distinct endpoints (host and port) as
// there are. They do not check signatures (what they receive is noise);
// they record every attempt: its delivery id, its number (X-Svc-Attempt),
// the import_id of the event, when it arrived and when it ended.
type FailingEndpoints struct {
	kinds   []EndpointKind
	urls    []string
	servers []*http.Server
	closed  chan struct{}

	mu       sync.Mutex
	attempts map[string][]attemptSeen // endpoint index + delivery id → its attempts
	imports  []map[string]bool        // per endpoint: import ids attempted
	answered []map[string]bool        // per endpoint: import ids answered 2xx (Slow)
	total    int
}

type attemptSeen struct {
	n          int
	start, end time.Time
}

// StartFailingEndpoints opens one listener per kind in kinds.
func StartFailingEndpoints(kinds []EndpointKind) (*FailingEndpoints, error) {
	f := &FailingEndpoints{kinds: kinds, closed: make(chan struct{}), attempts: map[string][]attemptSeen{}}
	for i, k := range kinds {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return nil, err
		}
		srv := &http.Server{Handler: f.handler(i, k), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		f.servers = append(f.servers, srv)
		f.urls = append(f.urls, "http://"+ln.Addr().String()+"/hook")
		f.imports = append(f.imports, map[string]bool{})
		f.answered = append(f.answered, map[string]bool{})
	}
	return f, nil
}

// URL is the address of endpoint i.
func (f *FailingEndpoints) URL(i int) string { return f.urls[i] }

// Len is the number of endpoints.
func (f *FailingEndpoints) Len() int { return len(f.urls) }

// Kind is the behaviour of endpoint i.
func (f *FailingEndpoints) Kind(i int) EndpointKind { return f.kinds[i] }

// Close stops every listener and ends the requests held open, so no
// descriptor outlives the scenario.
func (f *FailingEndpoints) Close() {
	select {
	case <-f.closed:
		return
	default:
		close(f.closed)
	}
	for _, s := range f.servers {
		_ = s.Close()
	}
}

func (f *FailingEndpoints) handler(i int, k EndpointKind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var env struct {
			Data struct {
				ImportID string `json:"import_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &env)
		n, _ := strconv.Atoi(r.Header.Get(subscriber.HeaderAttempt))
		key := strconv.Itoa(i) + "/" + r.Header.Get(subscriber.HeaderDelivery)
		f.mu.Lock()
		f.total++
		f.imports[i][env.Data.ImportID] = true
		f.mu.Unlock()
		ok := false
		switch k {
		case BlackHole:
			select { // until the gateway hangs up, or the scenario ends
			case <-r.Context().Done():
			case <-f.closed:
			}
		case Unavailable:
			w.WriteHeader(http.StatusServiceUnavailable)
		case Slow:
			select {
			case <-time.After(SlowAnswer):
				w.WriteHeader(http.StatusNoContent)
				ok = true
			case <-r.Context().Done():
			case <-f.closed:
			}
		}
		f.mu.Lock()
		f.attempts[key] = append(f.attempts[key], attemptSeen{n: n, start: start, end: time.Now()})
		if ok {
			f.answered[i][env.Data.ImportID] = true
		}
		f.mu.Unlock()
	})
}

// Reset forgets what the endpoints recorded (between runs).
func (f *FailingEndpoints) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts, f.total = map[string][]attemptSeen{}, 0
	for i := range f.imports {
		f.imports[i], f.answered[i] = map[string]bool{}, map[string]bool{}
	}
}

// Attempts is how many requests the endpoints received in all.
func (f *FailingEndpoints) Attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// Gaps are the retries seen so far: for each attempt after the first of a
// delivery, the time from the end of the one before.
func (f *FailingEndpoints) Gaps() []AttemptGap {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []AttemptGap
	for _, as := range f.attempts {
		byN := map[int]attemptSeen{}
		for _, a := range as {
			byN[a.n] = a
		}
		for _, a := range as {
			if prev, ok := byN[a.n-1]; ok && a.n > 1 {
				out = append(out, AttemptGap{Attempt: a.n, Gap: a.start.Sub(prev.end)})
			}
		}
	}
	return out
}

// ClassTally is what the endpoints of one kind got of the accepted events.
type ClassTally struct {
	Endpoints int `json:"endpoints"`
	Expected  int `json:"expected"`  // accepted events × endpoints of the publishing company
	Attempted int `json:"attempted"` // (endpoint, event) pairs attempted at least once
	Answered  int `json:"answered"`  // … answered 2xx (Slow only)
}

// Tally counts, for each kind, what its endpoints got of the events each
// company published: owner[i] is the company of endpoint i, accepted[c]
// the import ids company c published and the gateway accepted.
func (f *FailingEndpoints) Tally(owner []int, accepted map[int][]string) map[EndpointKind]ClassTally {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[EndpointKind]ClassTally{}
	for i, k := range f.kinds {
		t := out[k]
		t.Endpoints++
		for _, id := range accepted[owner[i]] {
			t.Expected++
			if f.imports[i][id] {
				t.Attempted++
			}
			if f.answered[i][id] {
				t.Answered++
			}
		}
		out[k] = t
	}
	return out
}

// holdUntil blocks until ctx ends or done is closed.
func holdUntil(ctx context.Context, done <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-done:
	}
}
