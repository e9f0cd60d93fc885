package config_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/config"
)

func TestParse(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c config.Config)
	}{
		{name: "defaults", check: func(t *testing.T, c config.Config) {
			if c.ListenAddr != "127.0.0.1:8080" || c.IsPostgres() || c.TimeZone.String() != "UTC" || c.PublicBaseURL != "http://127.0.0.1:8080" {
				t.Errorf("unexpected defaults: %+v", c)
			}
		}},
		{name: "environment", env: map[string]string{"DATABASE_URL": "postgres://u@h/db", "OUTBOUND_ALLOW_CIDRS": "127.0.0.0/8, 10.1.2.3/32", "TIME_ZONE": "America/Sao_Paulo"},
			check: func(t *testing.T, c config.Config) {
				if !c.IsPostgres() || len(c.OutboundAllowCIDRs) != 2 || c.TimeZone.String() != "America/Sao_Paulo" {
					t.Errorf("environment not applied: %+v", c)
				}
			}},
		{name: "flag beats environment", args: []string{"-listen", "127.0.0.1:9999"}, env: map[string]string{"LISTEN_ADDR": "127.0.0.1:1"},
			check: func(t *testing.T, c config.Config) {
				if c.ListenAddr != "127.0.0.1:9999" {
					t.Errorf("listen = %s", c.ListenAddr)
				}
			}},
		{name: "bad database url", env: map[string]string{"DATABASE_URL": "mysql://x"}, wantErr: "DATABASE_URL"},
		{name: "bad cidr", env: map[string]string{"OUTBOUND_ALLOW_CIDRS": "localhost"}, wantErr: "OUTBOUND_ALLOW_CIDRS"},
		{name: "bad time zone", env: map[string]string{"TIME_ZONE": "Mars/Base"}, wantErr: "TIME_ZONE"},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: "LOG_LEVEL"},
		{name: "bad redis url", env: map[string]string{"REDIS_URL": "http://x"}, wantErr: "REDIS_URL"},
		{name: "bad workers", env: map[string]string{"WORKERS": "many"}, wantErr: "WORKERS"},
		{name: "send share default", check: func(t *testing.T, c config.Config) {
			if c.SendSlotsPerSender != 16 {
				t.Errorf("send slots per sender = %d", c.SendSlotsPerSender)
			}
		}},
		{name: "send share flag", args: []string{"-send-slots-per-sender", "4"}, check: func(t *testing.T, c config.Config) {
			if c.SendSlotsPerSender != 4 {
				t.Errorf("send slots per sender = %d", c.SendSlotsPerSender)
			}
		}},
		{name: "send share above the slots", env: map[string]string{"WORKERS": "8", "SEND_SLOTS_PER_SENDER": "9"}, wantErr: "SEND_SLOTS_PER_SENDER"},
		{name: "send share of none", env: map[string]string{"SEND_SLOTS_PER_SENDER": "0"}, wantErr: "SEND_SLOTS_PER_SENDER"},
		{name: "listen without port", args: []string{"-listen", "localhost"}, wantErr: "LISTEN_ADDR"},
		{name: "spool under the data directory", env: map[string]string{"DATA_DIR": "/srv/gw"}, check: func(t *testing.T, c config.Config) {
			if c.SpoolDir != "/srv/gw/spool" {
				t.Errorf("spool dir %q", c.SpoolDir)
			}
		}},
		{name: "spool of its own", env: map[string]string{"DATA_DIR": "/srv/gw", "SPOOL_DIR": "/tmp/spool"}, check: func(t *testing.T, c config.Config) {
			if c.SpoolDir != "/tmp/spool" {
				t.Errorf("spool dir %q", c.SpoolDir)
			}
		}},
		{name: "media store follows the database", check: func(t *testing.T, c config.Config) {
			if c.MediaStoreFor(false) != "local" || c.MediaStoreFor(true) != "database" || c.PublicBaseURLSet || len(c.MultiReplicaWarnings()) != 0 {
				t.Errorf("sqlite: store %q, public set %v, warnings %q", c.MediaStore, c.PublicBaseURLSet, c.MultiReplicaWarnings())
			}
		}},
		{name: "postgres keeps media in the database and warns without a public URL", env: map[string]string{"DATABASE_URL": "postgres://db/x"},
			check: func(t *testing.T, c config.Config) {
				w := c.MultiReplicaWarnings()
				if c.MediaStoreFor(c.IsPostgres()) != "database" || len(w) != 1 || !strings.Contains(w[0], "PUBLIC_BASE_URL") {
					t.Errorf("store %q, warnings %q", c.MediaStore, w)
				}
			}},
		{name: "postgres with a public URL does not warn", env: map[string]string{"DATABASE_URL": "postgres://db/x", "PUBLIC_BASE_URL": "https://gw.example.com"},
			check: func(t *testing.T, c config.Config) {
				if !c.PublicBaseURLSet || len(c.MultiReplicaWarnings()) != 0 {
					t.Errorf("public set %v, warnings %q", c.PublicBaseURLSet, c.MultiReplicaWarnings())
				}
			}},
		{name: "postgres with local media warns", env: map[string]string{"DATABASE_URL": "postgres://db/x", "PUBLIC_BASE_URL": "https://gw.example.com", "MEDIA_STORE": "local"},
			check: func(t *testing.T, c config.Config) {
				if w := c.MultiReplicaWarnings(); len(w) != 1 || !strings.Contains(w[0], "MEDIA_STORE") {
					t.Errorf("warnings %q", w)
				}
			}},
		{name: "s3 media store", env: map[string]string{"MEDIA_STORE": "s3://media?endpoint=127.0.0.1:8333&region=us-east-1"},
			check: func(t *testing.T, c config.Config) {
				if c.MediaStoreFor(false) != "s3://media?endpoint=127.0.0.1:8333&region=us-east-1" {
					t.Errorf("store %q", c.MediaStore)
				}
			}},
		{name: "bad media store", env: map[string]string{"MEDIA_STORE": "ftp://x"}, wantErr: "MEDIA_STORE"},
		{name: "s3 credentials in the setting", env: map[string]string{"MEDIA_STORE": "s3://key:secret@media"}, wantErr: "MEDIA_STORE"},
		{name: "trusted proxies", env: map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7,::1"},
			check: func(t *testing.T, c config.Config) {
				want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("::1/128")}
				if !reflect.DeepEqual(c.HTTP.TrustedProxies, want) {
					t.Errorf("trusted proxies %v", c.HTTP.TrustedProxies)
				}
			}},
		{name: "bad trusted proxy", env: map[string]string{"TRUSTED_PROXIES": "the balancer"}, wantErr: "TRUSTED_PROXIES"},
		{name: "edge defaults", check: func(t *testing.T, c config.Config) {
			want := config.HTTPLimits{ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute, UploadTimeout: 10 * time.Minute,
				IdleTimeout: 2 * time.Minute, MaxPerIP: 64, MaxPerToken: 32, MaxPerProviderAccount: 16, ProviderWebhookRate: 200, MaxStreamsPerCompany: 128}
			if !reflect.DeepEqual(c.HTTP, want) || c.DBMaxConns != 20 || c.DebugListen != "" {
				t.Errorf("edge defaults: %+v, db %d, debug %q", c.HTTP, c.DBMaxConns, c.DebugListen)
			}
		}},
		{name: "edge settings from the environment", env: map[string]string{"HTTP_READ_TIMEOUT": "5s", "HTTP_UPLOAD_TIMEOUT": "1m",
			"HTTP_MAX_INFLIGHT_PER_TOKEN": "4", "DB_MAX_CONNS": "3", "DEBUG_LISTEN": "127.0.0.1:6060"},
			check: func(t *testing.T, c config.Config) {
				if c.HTTP.ReadTimeout != 5*time.Second || c.HTTP.UploadTimeout != time.Minute || c.HTTP.MaxPerToken != 4 || c.DBMaxConns != 3 || c.DebugListen != "127.0.0.1:6060" {
					t.Errorf("environment not applied: %+v", c)
				}
			}},
		{name: "db max conns flag", args: []string{"-db-max-conns", "7"}, check: func(t *testing.T, c config.Config) {
			if c.DBMaxConns != 7 {
				t.Errorf("db max conns = %d", c.DBMaxConns)
			}
		}},
		{name: "bad read timeout", env: map[string]string{"HTTP_READ_TIMEOUT": "soon"}, wantErr: "HTTP_READ_TIMEOUT"},
		{name: "zero write timeout", args: []string{"-http-write-timeout", "0s"}, wantErr: "HTTP_WRITE_TIMEOUT"},
		{name: "upload shorter than read", env: map[string]string{"HTTP_READ_TIMEOUT": "1m", "HTTP_UPLOAD_TIMEOUT": "10s"}, wantErr: "HTTP_UPLOAD_TIMEOUT"},
		{name: "no in-flight requests per ip", env: map[string]string{"HTTP_MAX_INFLIGHT_PER_IP": "0"}, wantErr: "HTTP_MAX_INFLIGHT_PER_IP"},
		{name: "bad in-flight per token", env: map[string]string{"HTTP_MAX_INFLIGHT_PER_TOKEN": "x"}, wantErr: "HTTP_MAX_INFLIGHT_PER_TOKEN"},
		{name: "no in-flight webhooks per provider account", env: map[string]string{"HTTP_MAX_INFLIGHT_PER_PROVIDER_ACCOUNT": "0"}, wantErr: "HTTP_MAX_INFLIGHT_PER_PROVIDER_ACCOUNT"},
		{name: "negative provider webhook rate", env: map[string]string{"PROVIDER_WEBHOOK_RATE": "-1"}, wantErr: "PROVIDER_WEBHOOK_RATE"},
		{name: "provider webhook rate off", env: map[string]string{"PROVIDER_WEBHOOK_RATE": "0"},
			check: func(t *testing.T, c config.Config) {
				if c.HTTP.ProviderWebhookRate != 0 {
					t.Errorf("rate %d, want 0 (no limit)", c.HTTP.ProviderWebhookRate)
				}
			}},
		{name: "db max conns zero", env: map[string]string{"DB_MAX_CONNS": "0"}, wantErr: "DB_MAX_CONNS"},
		{name: "db max conns too many", env: map[string]string{"DB_MAX_CONNS": "5000"}, wantErr: "DB_MAX_CONNS"},
		{name: "debug listen without port", env: map[string]string{"DEBUG_LISTEN": "localhost"}, wantErr: "DEBUG_LISTEN"},
		{name: "debug listen on the public address", args: []string{"-listen", "127.0.0.1:8080", "-debug-listen", "127.0.0.1:8080"}, wantErr: "DEBUG_LISTEN"},
		{name: "metrics listen default", check: func(t *testing.T, c config.Config) {
			if c.MetricsListen != "127.0.0.1:9464" {
				t.Errorf("metrics listen = %q, want loopback", c.MetricsListen)
			}
		}},
		{name: "metrics listen from the environment", env: map[string]string{"METRICS_LISTEN": "0.0.0.0:9100"}, check: func(t *testing.T, c config.Config) {
			if c.MetricsListen != "0.0.0.0:9100" {
				t.Errorf("metrics listen = %q", c.MetricsListen)
			}
		}},
		{name: "metrics listen off", env: map[string]string{"METRICS_LISTEN": "off"}, check: func(t *testing.T, c config.Config) {
			if c.MetricsListen != "" {
				t.Errorf("metrics listen = %q, want none", c.MetricsListen)
			}
		}},
		{name: "metrics listen without port", env: map[string]string{"METRICS_LISTEN": "localhost"}, wantErr: "METRICS_LISTEN"},
		{name: "metrics listen on the public address", args: []string{"-listen", "127.0.0.1:8080", "-metrics-listen", "127.0.0.1:8080"}, wantErr: "METRICS_LISTEN: must differ from LISTEN_ADDR"},
		{name: "metrics listen on the debug address", env: map[string]string{"DEBUG_LISTEN": "127.0.0.1:6060", "METRICS_LISTEN": "127.0.0.1:6060"}, wantErr: "METRICS_LISTEN: must differ from DEBUG_LISTEN"},
		{name: "memory limit default", check: func(t *testing.T, c config.Config) {
			if c.MemoryLimit != 256<<20 {
				t.Errorf("memory limit = %d, want 256 MiB", c.MemoryLimit)
			}
		}},
		{name: "memory limit from the environment", env: map[string]string{"MEMORY_LIMIT": "1GiB"}, check: func(t *testing.T, c config.Config) {
			if c.MemoryLimit != 1<<30 {
				t.Errorf("memory limit = %d", c.MemoryLimit)
			}
		}},
		{name: "memory limit in bytes", args: []string{"-memory-limit", "67108864"}, check: func(t *testing.T, c config.Config) {
			if c.MemoryLimit != 64<<20 {
				t.Errorf("memory limit = %d", c.MemoryLimit)
			}
		}},
		{name: "memory limit off", env: map[string]string{"MEMORY_LIMIT": "off"}, check: func(t *testing.T, c config.Config) {
			if c.MemoryLimit != 0 {
				t.Errorf("memory limit = %d, want none", c.MemoryLimit)
			}
		}},
		{name: "memory limit unknown unit", env: map[string]string{"MEMORY_LIMIT": "96MB"}, wantErr: "MEMORY_LIMIT"},
		{name: "memory limit negative", env: map[string]string{"MEMORY_LIMIT": "-5MiB"}, wantErr: "MEMORY_LIMIT"},
		{name: "memory limit too low", env: map[string]string{"MEMORY_LIMIT": "8MiB"}, wantErr: "MEMORY_LIMIT"},
		{name: "memory limit overflows", env: map[string]string{"MEMORY_LIMIT": "99999999TiB"}, wantErr: "MEMORY_LIMIT"},
		{name: "edge and base errors together", env: map[string]string{"TIME_ZONE": "x", "DB_MAX_CONNS": "0"}, wantErr: "TIME_ZONE"},
		{name: "all errors at once", env: map[string]string{"TIME_ZONE": "x", "LOG_LEVEL": "y"}, wantErr: "LOG_LEVEL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("test", tc.args, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want mention of %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}
