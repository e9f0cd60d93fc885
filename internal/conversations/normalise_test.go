package conversations_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestNormaliseConcurrent is the regression test for the shared
// transform.Chain: concurrent accent-folding writes (the stored search text)
// and filtered listings (the filter value) must each see their own
// transformer. Under -race the old shared value is reported at once; without
// it the garbled text showed up as wrong counts or a panic in
// transform.String.
func TestNormaliseConcurrent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		names := []string{"João Ávila", "Márcia Çedilha", "Ênio Ürban", "Íris Õliveira"}
		const perName = 6
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i, name := range names {
			for j := range perName {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
						_, err := b.svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official,
							ChannelTypeID: channels.OfficialChatapp, ContactKey: fmt.Sprintf("55119%02d%06d", i, j), ContactName: name, OriginID: 1})
						return err
					})
					if err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("ensure: %v", err)
		}

		// Upper case, no accents: found only through the folded column.
		filters := map[string]string{"JOAO AVILA": names[0], "marcia cedilha": names[1], "ENIO URBAN": names[2], "iris oliveira": names[3]}
		var lwg sync.WaitGroup
		for round := range 8 {
			for filter, want := range filters {
				lwg.Add(1)
				go func() {
					defer lwg.Done()
					list, err := b.svc.ListContactChannels(ctx, b.companyID, conversations.ListFilter{
						Page: store.Page{Number: 1, PerPage: 50}, Text: filter, With: conversations.Relations{Contact: true}})
					found, n := list.Data, list.Total
					if err != nil {
						t.Errorf("round %d filter %q: %v", round, filter, err)
						return
					}
					if n != perName || len(found) != perName {
						t.Errorf("round %d filter %q: %d rows (total %d), want %d", round, filter, len(found), n, perName)
						return
					}
					for _, c := range found {
						if c.Contact.Name != want {
							t.Errorf("round %d filter %q found %q", round, filter, c.Contact.Name)
						}
					}
				}()
			}
		}
		lwg.Wait()
	})
}
