package loadtest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// StalledProvider stands in for a provider whose API accepts connections
// and never answers. It reads each send in full (so the gateway's write
// succeeds: from then on the outcome is unknown and the document forbids
// sending it again) and holds the request until the gateway gives up or
// the scenario ends. It counts the sends by text, so a text that arrives
// twice is a send the gateway handed over twice.
type StalledProvider struct {
	URL    string
	srv    *http.Server
	closed chan struct{}
	// refuse, once set, answers every later send at once with a
	// permanent refusal, so the backlog of a finished scenario drains
	// without loading the next one.
	refuse atomic.Bool

	mu     sync.Mutex
	byText map[string]int
}

// StartStalledProvider listens on 127.0.0.1.
func StartStalledProvider() (*StalledProvider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &StalledProvider{URL: "http://" + ln.Addr().String(), closed: make(chan struct{}), byText: map[string]int{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *StalledProvider) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req struct {
		Text *struct {
			Body string `json:"body"`
		} `json:"text"`
	}
	_ = json.Unmarshal(b, &req)
	if req.Text != nil {
		p.mu.Lock()
		p.byText[req.Text.Body]++
		p.mu.Unlock()
	}
	if p.refuse.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"(#131026) Message undeliverable","type":"OAuthException","code":131026,"error_data":{"details":"load generator: stalled provider closed"}}}`)
		return
	}
	holdUntil(r.Context(), p.closed)
}

// Refuse makes every later send answer 400 at once.
func (p *StalledProvider) Refuse() { p.refuse.Store(true) }

// Stall makes every later send wait for ever again.
func (p *StalledProvider) Stall() { p.refuse.Store(false) }

// Received is how many sends arrived, and how many texts arrived more
// than once.
func (p *StalledProvider) Received() (sends, resent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.byText {
		sends += n
		if n > 1 {
			resent++
		}
	}
	return sends, resent
}

// Close ends the held requests and the listener.
func (p *StalledProvider) Close() {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	_ = p.srv.Close()
}
