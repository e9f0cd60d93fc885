package webhooks

import (
	"context"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// SubscriptionCacheTTL bounds how long Publish matches events against a
// company's subscriptions as they were read: a change made through this
// process applies at once (the cache is dropped), one made through another
// replica within this bound. Deliveries queued meanwhile to a subscription
// since disabled or deleted are dropped by its lane, which re-reads the
// subscription.
const SubscriptionCacheTTL = time.Second

// subscriptionCache keeps each company's enabled subscriptions (their
// matching columns only, never the secret) for SubscriptionCacheTTL, so
// publishing costs no read in the caller's transaction.
type subscriptionCache struct {
	mu sync.Mutex
	// gen counts invalidations: a read that began before one is not
	// stored, so a change is never hidden behind an older read.
	gen       uint64
	byCompany map[int64]cachedSubscriptions
}

type cachedSubscriptions struct {
	rows []subscriptionRow
	at   time.Time
}

// maxCachedCompanies bounds the cache; past it, expired entries are
// dropped.
const maxCachedCompanies = 10000

func newSubscriptionCache() *subscriptionCache {
	return &subscriptionCache{byCompany: map[int64]cachedSubscriptions{}}
}

// enabled returns the company's enabled subscriptions, reading them
// through db (the caller's transaction: SQLite has one connection) when
// not cached.
func (c *subscriptionCache) enabled(ctx context.Context, db bun.IDB, companyID int64) ([]subscriptionRow, error) {
	c.mu.Lock()
	e, ok := c.byCompany[companyID]
	gen := c.gen
	c.mu.Unlock()
	if ok && time.Since(e.at) < SubscriptionCacheTTL {
		return e.rows, nil
	}
	var rows []subscriptionRow
	err := db.NewSelect().Model(&rows).Column("id", "events", "all_events", "company_channel_ids").
		Where("company_id = ?", companyID).Where("enabled = ?", true).Order("id").Scan(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		if len(c.byCompany) >= maxCachedCompanies {
			for id, e := range c.byCompany {
				if now.Sub(e.at) >= SubscriptionCacheTTL {
					delete(c.byCompany, id)
				}
			}
		}
		c.byCompany[companyID] = cachedSubscriptions{rows: rows, at: now}
	}
	return rows, nil
}

// invalidate drops every entry (subscriptions changed).
func (c *subscriptionCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.byCompany)
}
