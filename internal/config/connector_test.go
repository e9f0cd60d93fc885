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
