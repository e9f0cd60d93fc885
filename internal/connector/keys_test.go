package connector_test

import (
	"testing"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
)

func TestParseChat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw     string
		isGroup bool
		want    connector.Chat
		bad     bool
	}{
		{raw: "5511977776666", want: connector.Chat{Key: "5511977776666"}},
		{raw: " +5511977776666 ", want: connector.Chat{Key: "5511977776666"}},
		{raw: "5511977776666@s.whatsapp.net", want: connector.Chat{Key: "5511977776666"}},
		{raw: "5511977776666:12@s.whatsapp.net", want: connector.Chat{Key: "5511977776666"}},
		{raw: "5511977776666@c.us", want: connector.Chat{Key: "5511977776666"}},
		{raw: "5511977776666@g.us", bad: true},
		{raw: "05511977776666", bad: true},
		{raw: "55 11 97777", bad: true},
		{raw: "1234567", bad: true},
		{raw: "1234567890123456", bad: true},
		{raw: "", bad: true},
		{raw: "5511988887777-1699999999", isGroup: true, want: connector.Chat{Key: "5511988887777-1699999999", IsGroup: true}},
		{raw: "120363025246125486", isGroup: true, want: connector.Chat{Key: "120363025246125486", IsGroup: true}},
		{raw: "120363025246125486@g.us", isGroup: true, want: connector.Chat{Key: "120363025246125486", IsGroup: true}},
		{raw: "120363025246125486@s.whatsapp.net", isGroup: true, bad: true},
		{raw: "5511988887777-abc", isGroup: true, bad: true},
		{raw: "123", isGroup: true, bad: true},
		// A contact known only by its LID keeps the suffix: its digits are
		// no phone number.
		{raw: "123456789012345@lid", want: connector.Chat{Key: "123456789012345@lid"}},
		{raw: "123456789012345:3@lid", want: connector.Chat{Key: "123456789012345@lid"}},
		{raw: "12a@lid", bad: true},
		{raw: "123456789012345@lid", isGroup: true, bad: true},
	} {
		got, err := connector.ParseChat(tc.raw, tc.isGroup)
		if tc.bad {
			if fault.KindOf(err) != fault.Invalid {
				t.Errorf("ParseChat(%q, %v) = %+v, %v; want an Invalid fault", tc.raw, tc.isGroup, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseChat(%q, %v) = %+v, %v; want %+v", tc.raw, tc.isGroup, got, err, tc.want)
		}
	}
}

func TestNinthDigit(t *testing.T) {
	t.Parallel()
	for num, want := range map[string]string{
		"5511987654321":  "551187654321", // São Paulo mobile with the ninth digit
		"551187654321":   "551187654321", // already without it
		"5511387654321":  "5511387654321",
		"1415987654321":  "1415987654321", // not Brazil
		"55119876543210": "55119876543210",
	} {
		if got := connector.WithoutNinthDigit(num); got != want {
			t.Errorf("WithoutNinthDigit(%s) = %s, want %s", num, got, want)
		}
		if connector.BrazilianMobile(num) != (want != num) {
			t.Errorf("BrazilianMobile(%s) = %v", num, connector.BrazilianMobile(num))
		}
	}
}
