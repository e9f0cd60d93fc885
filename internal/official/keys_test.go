package official_test

import (
	"testing"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/official"
)

func TestNormalizeContactKey(t *testing.T) {
	t.Parallel()
	tr := official.NewTransport(nil)
	for _, tc := range []struct {
		name    string
		key     string
		isGroup bool
		want    string
		bad     string // the Invalid fault's message
	}{
		{name: "digits", key: "5511977776666", want: "5511977776666"},
		{name: "formatted with plus, spaces and punctuation", key: " +55 (11) 97777-6666 ", want: "5511977776666"},
		{name: "dotted", key: "1.202.555.0143", want: "12025550143"},
		{name: "leading zero", key: "05511977776666", bad: official.MsgBadNumber},
		{name: "unofficial chat app address", key: "5511977776666@s.whatsapp.net", bad: official.MsgBadNumber},
		{name: "too short", key: "1234567", bad: official.MsgBadNumber},
		{name: "too long", key: "5511977776666123", bad: official.MsgBadNumber},
		{name: "empty", key: "", bad: official.MsgBadNumber},
		{name: "group id trimmed", key: " group-id-1 ", isGroup: true, want: "group-id-1"},
		{name: "blank group id", key: "  ", isGroup: true, bad: official.MsgBadGroupKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tr.NormalizeContactKey(tc.key, tc.isGroup)
			if tc.bad != "" {
				if fe := fault.As(err); fault.KindOf(err) != fault.Invalid || fe.Message != tc.bad {
					t.Errorf("NormalizeContactKey(%q, %v) = %q, %v; want Invalid %q", tc.key, tc.isGroup, got, err, tc.bad)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("NormalizeContactKey(%q, %v) = %q, %v; want %q", tc.key, tc.isGroup, got, err, tc.want)
			}
		})
	}
}
