package webhooks_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// BenchmarkBrokerDelivery publishes b.N events (transactions of 100) to one
// subscription on the machine's JetStream or RabbitMQ, with what serve uses
// (8 in flight per subscription, the system clock), and reports the
// deliveries per second from the first publish to the last broker
// acknowledgement written to the log.
//
//	TEST_DATABASE_URL=… go test -run '^$' -bench BenchmarkBrokerDelivery -benchtime 5000x ./internal/webhooks/
func BenchmarkBrokerDelivery(b *testing.B) {
	dbs := map[string]func(testing.TB) *store.DB{"sqlite": storetest.SQLite}
	if os.Getenv(storetest.EnvPostgres) != "" {
		dbs["postgres"] = storetest.Postgres
	}
	for dbName, open := range dbs {
		for _, kind := range []string{"nats", "amqp"} {
			b.Run(dbName+"/"+kind, func(b *testing.B) {
				w := setup(b, open(b), setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now}})
				var url string
				if kind == "nats" {
					url = "nats://" + natsAddr + "/" + newJSStream(b, natsAddr).subject
				} else {
					rq := newRabbitQueue(b)
					url = rq.url("guest", "guest")
				}
				w.subscribe(b, w.p, webhooks.CreateInput{URL: url, Events: []string{events.CrmBusinessWon}})
				data := exampleData(b)[events.CrmBusinessWon]
				ctx := context.Background()
				b.ResetTimer()
				start := time.Now()
				for done := 0; done < b.N; {
					n := min(100, b.N-done)
					err := w.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
						for range n {
							if err := w.svc.Publish(ctx, tx, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: w.p.CompanyID, Data: data}); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					done += n
				}
				for {
					n, err := w.db.Bun.NewSelect().Table("webhook_delivery_log").Where("succeeded").Count(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if int(n) >= b.N {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
			})
		}
	}
}
