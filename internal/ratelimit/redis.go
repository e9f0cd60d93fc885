package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatmsg/gateway/internal/clock"
)

// windowScript is the sliding window run atomically inside Redis: a sorted
// set per key of the admitted events (score: microseconds), trimmed to the
// window, admitting while it holds fewer than the limit. Time is Redis' own
// clock, so replicas with skewed clocks share one window (ARGV[4], when not
// empty, replaces it: tests drive a manual clock). Microseconds since 1970
// stay exact in Lua's doubles. The key expires when its newest event leaves
// the window.
var windowScript = redis.NewScript(`
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, string.format('%.0f', now) .. ':' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000) + 1)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
`)

// Redis is a limiter shared by every replica through one Redis.
type Redis struct {
	client redis.UniversalClient
	prefix string
	// now, when set, replaces Redis' clock (tests).
	now clock.Clock
}

// NewRedis returns a limiter on client; keys are stored under prefix.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{client: client, prefix: prefix}
}

// WithClock returns a copy of r that reads time from now instead of Redis'
// clock: for tests on a manual clock, never for replicas.
func (r *Redis) WithClock(now clock.Clock) *Redis {
	c := *r
	c.now = now
	return &c
}

// OpenRedis connects to the redis:// URL and checks it answers.
func OpenRedis(ctx context.Context, url string) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis ping: %w", err)
	}
	return NewRedis(client, "gateway:ratelimit:"), nil
}

// Ping checks Redis answers (readiness).
func (r *Redis) Ping(ctx context.Context) error { return r.client.Ping(ctx).Err() }

// Close closes the client.
func (r *Redis) Close() error { return r.client.Close() }

// Allow implements Limiter.
func (r *Redis) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	if limit <= 0 {
		return false, window, nil
	}
	// Two events in the same microsecond are two members.
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	now := ""
	if r.now != nil {
		now = strconv.FormatInt(r.now().UnixMicro(), 10)
	}
	res, err := windowScript.Run(ctx, r.client, []string{r.prefix + key},
		strconv.FormatInt(window.Microseconds(), 10), strconv.Itoa(limit), hex.EncodeToString(nonce[:]), now).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: %w", err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("ratelimit: unexpected script answer %v", res)
	}
	if res[0] == 1 {
		return true, 0, nil
	}
	return false, max(time.Duration(res[1])*time.Microsecond, time.Microsecond), nil
}
