package webhooks_test

import (
	"bytes"
	"fmt"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// BenchmarkDelivery measures fan-out and delivery end to end on the real
// River workers with the settings `gateway serve` uses (webhooks.Queue, the
// default per-subscription bound, the system clock): b.N events are
// published (8 concurrent publishers, one transaction per event) to a
// company with 1 or 4 subscriptions on a local receiver that checks every
// signature, so each event is 1 or 4 signed deliveries. Reported:
//
//	events/s      events accepted (published and committed) per second
//	deliveries/s  signed deliveries completed per second, first publish to last receipt
//	p50-ms p99-ms latency from the publish commit to the receiver's receipt
//
// Run: make bench, or
//
//	TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench BenchmarkDelivery -benchtime 20000x ./internal/webhooks/
//
// "max" publishes as fast as it can (throughput; latency then includes the
// backlog); "paced" publishes 500 events/s, the target load, for latency at
// that load.
func BenchmarkDelivery(b *testing.B) {
	for _, subs := range []int{1, 4} {
		for _, rate := range []struct {
			name string
			perS int
		}{{"max", 0}, {"paced", 500}} {
			name := fmt.Sprintf("%s/subs=%d", rate.name, subs)
			b.Run("sqlite/"+name, func(b *testing.B) { benchDelivery(b, storetest.SQLite(b), subs, rate.perS) })
			b.Run("postgres/"+name, func(b *testing.B) {
				if os.Getenv(storetest.EnvPostgres) == "" {
					b.Skip(storetest.EnvPostgres + " not set")
				}
				benchDelivery(b, storetest.Postgres(b), subs, rate.perS)
			})
		}
	}
}

// benchDelivery publishes b.N events to subscriptions subscriptions,
// eventsPerSecond of them a second (0 = unpaced).
func benchDelivery(b *testing.B, db *store.DB, subscriptions, eventsPerSecond int) {
	const publishers = 8
	// Production settings: only the clock is set, because setup's default
	// is a manual one.
	bd := setup(b, db, setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now}})

	published := make([]atomic.Int64, b.N) // unix nanos of each event's commit
	var mu sync.Mutex
	var latencies []time.Duration
	var received atomic.Int64
	done := make(chan struct{})
	total := int64(b.N * subscriptions)
	latencies = make([]time.Duration, 0, total)
	secrets := map[string]string{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := subscriber.Verify(secrets[r.URL.Path], r.Header, body, time.Now(), 5*time.Minute); err != nil {
			b.Errorf("receiver: %v", err)
		}
		n := importSeq(body)
		var lat time.Duration
		if at := published[n].Load(); at > 0 {
			lat = time.Since(time.Unix(0, at))
		}
		mu.Lock()
		latencies = append(latencies, lat)
		mu.Unlock()
		if received.Add(1) == total {
			close(done)
		}
	}))
	b.Cleanup(rcv.Close)
	for i := range subscriptions {
		path := fmt.Sprintf("/hook/%d", i)
		_, secret := bd.subscribe(b, bd.p, webhooks.CreateInput{URL: rcv.URL + path, Events: []string{events.ContactImportCompleted}})
		secrets[path] = secret
	}

	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					return
				}
				if eventsPerSecond > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(n) * time.Second / time.Duration(eventsPerSecond))))
				}
				data := fmt.Sprintf(`{"import_id":"bench-%d","total_contacts":10,"imported_contacts":10,"skipped_contacts":0,"failed_contacts":0,"started_by_user_id":1,"completed_at":"2026-11-22T14:00:00+00:00"}`, n)
				if err := bd.publish(b, webhooks.Event{Name: events.ContactImportCompleted, CompanyID: bd.p.CompanyID, Data: jsonRaw(data)}); err != nil {
					b.Error(err)
					return
				}
				published[n].Store(time.Now().UnixNano())
			}
		}()
	}
	wg.Wait()
	publishTime := time.Since(start)
	select {
	case <-done:
	case <-time.After(5*time.Minute + time.Duration(b.N)*time.Millisecond):
		b.Fatalf("only %d of %d deliveries arrived", received.Load(), total)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/publishTime.Seconds(), "events/s")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// importSeq reads n back from "import_id":"bench-n" without decoding the
// whole body.
func importSeq(body []byte) int {
	i := bytes.Index(body, []byte(`"bench-`))
	if i < 0 {
		return 0
	}
	rest := body[i+len(`"bench-`):]
	j := bytes.IndexByte(rest, '"')
	n, _ := strconv.Atoi(string(rest[:j]))
	return n
}

type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }
