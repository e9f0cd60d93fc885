package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// gcraScript is gcra() run atomically inside Redis, on Redis' own clock so
// replicas with skewed clocks share one budget. Times are milliseconds
// (exact in Lua's doubles); the key expires when its budget is full again.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - window
if now < allow_at then
  return {0, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', new_tat - now + 1)
return {1, 0}
`)

// Redis is a limiter shared by every replica through one Redis.
type Redis struct {
	client redis.UniversalClient
	prefix string
}

// NewRedis returns a limiter on client; keys are stored under prefix.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{client: client, prefix: prefix}
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
	interval := max(window.Milliseconds()/int64(limit), 1)
	res, err := gcraScript.Run(ctx, r.client, []string{r.prefix + key},
		strconv.FormatInt(interval, 10), strconv.FormatInt(window.Milliseconds(), 10)).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: %w", err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("ratelimit: unexpected script answer %v", res)
	}
	if res[0] == 1 {
		return true, 0, nil
	}
	return false, max(time.Duration(res[1])*time.Millisecond, time.Millisecond), nil
}
