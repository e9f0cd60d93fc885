package auth

import (
	"testing"
	"time"
)

// TestTokenCacheRevokeWinsOverAnEarlierLookup: a lookup that read the
// token before a revoke in this process must not cache it after the
// revoke's forget, or the revoked token would work for TokenCacheTTL.
func TestTokenCacheRevokeWinsOverAnEarlierLookup(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	entry := cachedToken{principal: Principal{TokenID: 7}, until: now.Add(TokenCacheTTL)}
	for _, tc := range []struct {
		name        string
		revokeFirst bool
		want        bool
	}{
		{"lookup then put", false, true},
		{"revoke between lookup and put", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tokenCache{entries: map[string]cachedToken{}}
			gen := c.generation() // the lookup starts reading
			if tc.revokeFirst {
				c.forget(7)
			}
			c.put(gen, "h", entry, now)
			if _, ok := c.get("h", now); ok != tc.want {
				t.Fatalf("cached = %v, want %v", ok, tc.want)
			}
		})
	}
}
