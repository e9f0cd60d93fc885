package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		in   debug.BuildInfo
		want Info
	}{
		{
			name: "release build from a clean clone",
			in: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.time", Value: "2026-11-27T23:00:00Z"},
				{Key: "vcs.modified", Value: "false"},
			}},
			want: Info{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-11-27T23:00:00Z", GoVersion: "go1.26.8"},
		},
		{
			name: "work tree with changes",
			in: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261127230000-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.time", Value: "2026-11-27T23:00:00Z"},
				{Key: "vcs.modified", Value: "true"},
			}},
			want: Info{Version: "v0.0.0-20261127230000-0123456789ab+dirty", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-11-27T23:00:00Z", Modified: true, GoVersion: "go1.26.8"},
		},
		{
			name: "go run: no VCS stamp",
			in:   debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "(devel)", Revision: Unknown, Time: Unknown, GoVersion: "go1.26.8"},
		},
		{
			name: "nothing recorded",
			in:   debug.BuildInfo{},
			want: Info{Version: Unknown, Revision: Unknown, Time: Unknown, GoVersion: Unknown},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromBuildInfo(&tc.in); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "v1.2.3", Revision: "abc", Time: "2026-11-27T23:00:00Z", GoVersion: "go1.26.8"}
	if got, want := i.String(), "gateway v1.2.3 (revision abc, 2026-11-27T23:00:00Z, go1.26.8)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	i.Modified = true
	if got := i.String(); !strings.HasSuffix(got, ", modified work tree") {
		t.Fatalf("a modified build does not say so: %q", got)
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	i := Info{Version: "v1.2.3", Revision: "abc", Time: "2026-11-27T23:00:00Z", GoVersion: "go1.26.8"}
	reg.MustRegister(i.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "gateway_build_info" || len(families[0].GetMetric()) != 1 {
		t.Fatalf("want one gateway_build_info series, got %v", families)
	}
	m := families[0].GetMetric()[0]
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("value %v, want 1", v)
	}
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": "v1.2.3", "revision": "abc", "time": "2026-11-27T23:00:00Z", "go_version": "go1.26.8"}
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
}
