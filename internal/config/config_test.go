package config_test

import (
	"strings"
	"testing"

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
		{name: "listen without port", args: []string{"-listen", "localhost"}, wantErr: "LISTEN_ADDR"},
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
