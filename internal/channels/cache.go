package channels

import (
	"sync"
	"time"
)

// CacheTTL bounds how long a channel lookup (Get, FindByKey) may serve a
// channel as it was: changes made through this process (UpdateUnofficial,
// DeleteUnofficial, SetUnofficialLogged, RegisterOfficial) are seen at once;
// changes made by another replica or an admin command are seen within
// CacheTTL.
const CacheTTL = 5 * time.Second

// cacheLimit bounds the entries; past it the cache starts afresh.
const cacheLimit = 10000

type lookupKey struct {
	companyID int64
	typeID    TypeID
	key       string
}

type cached struct {
	ch    Channel
	until time.Time
}

// lookupCache holds found channels (never "not found", so a new channel is
// seen at once) by id and by (company, type, key). A change clears it
// whole: changes are rare and lookups are per message. gen guards against a
// lookup that read the database before a change storing what it read after
// the change cleared the cache.
type lookupCache struct {
	mu    sync.Mutex
	gen   uint64
	byID  map[int64]cached
	byKey map[lookupKey]cached
}

func newLookupCache() *lookupCache {
	return &lookupCache{byID: map[int64]cached{}, byKey: map[lookupKey]cached{}}
}

// generation is read before a lookup goes to the database.
func (c *lookupCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *lookupCache) getID(companyID, id int64, now time.Time) (Channel, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok || !now.Before(e.until) || e.ch.CompanyID != companyID {
		return Channel{}, false
	}
	return e.ch.copy(), true
}

func (c *lookupCache) getKey(k lookupKey, now time.Time) (Channel, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok || !now.Before(e.until) {
		return Channel{}, false
	}
	return e.ch.copy(), true
}

// put stores ch as read at generation gen, unless a change came since.
func (c *lookupCache) put(gen uint64, ch Channel, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.byID)+len(c.byKey) >= cacheLimit {
		c.byID, c.byKey = map[int64]cached{}, map[lookupKey]cached{}
	}
	e := cached{ch: ch.copy(), until: now.Add(CacheTTL)}
	c.byID[ch.ID] = e
	c.byKey[lookupKey{ch.CompanyID, ch.TypeID, ch.Key}] = e
}

// clear forgets everything: a channel changed.
func (c *lookupCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.byID)
	clear(c.byKey)
}

// copy is ch with its own provider account, so a caller changing what it
// got cannot change the cache.
func (ch Channel) copy() Channel {
	if ch.ProviderAccount != nil {
		acc := *ch.ProviderAccount
		ch.ProviderAccount = &acc
	}
	return ch
}
