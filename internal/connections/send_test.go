package connections_test

import (
	"context"
	"testing"

	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestSendIDSurvivesARetry: the transport gives messaging an id before the
// first attempt; a retry of the same message (here from another replica,
// forwarded to the holder) carries it, and the chat app receives one
// message, handed over twice.
func TestSendIDSurvivesARetry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w, a, conn := pairedWorld(t, db)
		b := w.replica(t, "b")
		var _ messaging.IDAssigner = a.Transport()
		id := a.Transport().NewExternalID(conn.Channel)
		if id == "" || id == b.Transport().NewExternalID(conn.Channel) {
			t.Fatalf("ids %q", id)
		}
		out := messaging.Outbound{MessageID: 1, ExternalID: id, ContactKey: "5511977776666", Text: "hello", HandOff: noHandOff}
		first, err := a.Transport().Send(ctx, conn.Channel, out)
		if err != nil || first.ExternalID != id {
			t.Fatalf("first attempt: %+v %v", first, err)
		}
		retry, err := b.Transport().Send(ctx, conn.Channel, out)
		if err != nil || retry.ExternalID != id {
			t.Fatalf("retry through b: %+v %v", retry, err)
		}
		box := w.chat.Session(conn.ID).Outbox()
		if len(box) != 1 || box[0].ExternalID != id || box[0].SendCount != 2 {
			t.Fatalf("the chat app got %+v", box)
		}
	})
}
