package connections_test

import (
	"context"
	"os"
	"testing"

	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// BenchmarkSend measures one text send through the Transport on SQLite and
// PostgreSQL: on the replica holding the session, and from another replica
// (forwarded through the call mailbox; the holder polls it every 5 ms here,
// every 100 ms by default).
func BenchmarkSend(b *testing.B) {
	for _, engine := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(engine.name, func(b *testing.B) {
			if engine.name == "postgres" && os.Getenv(storetest.EnvPostgres) == "" {
				b.Skip(storetest.EnvPostgres + " not set")
			}
			w := newWorld(b, engine.open(b))
			holder, other := w.replica(b, "replica-a"), w.replica(b, "replica-b")
			conn := w.pairedConnection(b, holder)
			for _, via := range []struct {
				name string
				r    *replica
			}{{"holder", holder}, {"forwarded", other}} {
				b.Run(via.name, func(b *testing.B) {
					ctx := context.Background()
					tr := via.r.Transport()
					for b.Loop() {
						if _, err := tr.Send(ctx, conn.Channel, messaging.Outbound{ContactKey: "5511977776666", Text: "bench", HandOff: noHandOff}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
