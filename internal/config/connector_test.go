package config_test

import (
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/config"
)

func TestConnectorDriver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, flag, want, err string
	}{
		{want: config.ConnectorSimulator},
		{env: "whatsmeow", want: config.ConnectorWhatsmeow},
		{env: "whatsmeow", flag: "simulator", want: config.ConnectorSimulator},
		{env: "telegram", err: `CONNECTOR_DRIVER: "telegram" is not simulator or whatsmeow`},
	} {
		args := []string{"-data-dir", t.TempDir()}
		if tc.flag != "" {
			args = append(args, "-connector-driver", tc.flag)
		}
		cfg, err := config.Parse("test", args, func(k string) string {
			if k == config.EnvConnector {
				return tc.env
			}
			return ""
		})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("env %q: error %v, want %q", tc.env, err, tc.err)
			}
		case err != nil || cfg.ConnectorDriver != tc.want:
			t.Errorf("env %q flag %q: %q, %v; want %q", tc.env, tc.flag, cfg.ConnectorDriver, err, tc.want)
		}
	}
}

// With PostgreSQL, serve refuses the simulator unless it was chosen; with
// SQLite (local runs) the default stays.
func TestCheckServe(t *testing.T) {
	t.Parallel()
	const pg = "postgres://u@127.0.0.1/db"
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		wantError bool
	}{
		{name: "sqlite, simulator by default"},
		{name: "postgres, simulator by default", env: map[string]string{config.EnvDatabaseURL: pg}, wantError: true},
		{name: "postgres, simulator chosen in the environment", env: map[string]string{config.EnvDatabaseURL: pg, config.EnvConnector: "simulator"}},
		{name: "postgres, simulator chosen by flag", args: []string{"-connector-driver", "simulator"}, env: map[string]string{config.EnvDatabaseURL: pg}},
		{name: "postgres, whatsmeow", env: map[string]string{config.EnvDatabaseURL: pg, config.EnvConnector: "whatsmeow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("serve", append([]string{"-data-dir", t.TempDir()}, tc.args...), func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.CheckServe()
			if tc.wantError != (err != nil) || (err != nil && !strings.Contains(err.Error(), "CONNECTOR_DRIVER=simulator")) {
				t.Fatalf("CheckServe: %v, want error %v", err, tc.wantError)
			}
		})
	}
}
