package httpapi

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestScanJSON covers the one-pass scan that runs before any decode: depth,
// bad strings and top-level nulls, and malformed texts it must pass on to
// the decoder without failing itself.
func TestScanJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		in      string
		nulls   []string
		deep    bool   // refused for its shape: too deep or too many values
		badAt   string // member of a bad string; "-" = none
		badWhy  string
		noPanic bool // only that it returns
	}{
		{name: "flat object", in: `{"a":1,"b":"x"}`, badAt: "-"},
		{name: "top-level nulls", in: `{"a":null, "b" : null,"c":{"d":null},"e":[null]}`, nulls: []string{"a", "b"}, badAt: "-"},
		{name: "escaped member name", in: `{"a\u0062":null}`, nulls: []string{"ab"}, badAt: "-"},
		{name: "64 levels", in: strings.Repeat("[", 64) + strings.Repeat("]", 64), badAt: "-"},
		{name: "65 levels", in: strings.Repeat("[", 65) + strings.Repeat("]", 65), deep: true, badAt: "-"},
		{name: "20,000 values", in: "[" + strings.Repeat("1,", 19998) + "1]", badAt: "-"},
		{name: "20,001 values", in: "[" + strings.Repeat("1,", 20000) + "1]", deep: true, badAt: "-"},
		{name: "brackets inside strings do not count", in: `{"a":"` + strings.Repeat("[", 100) + `"}`, badAt: "-"},
		{name: "escaped NUL in a value", in: `{"a":{"b":"x\u0000"}}`, badAt: "a", badWhy: "has a NUL byte"},
		{name: "escaped backslash before u0000 is text", in: `{"a":"\\u0000"}`, badAt: "-"},
		{name: "raw NUL", in: "{\"a\":\"x\x00\"}", badAt: "a", badWhy: "has a NUL byte"},
		{name: "invalid UTF-8 in a value", in: "{\"a\":[\"\xff\"]}", badAt: "a", badWhy: "is not valid UTF-8"},
		{name: "invalid UTF-8 in a member name", in: "{\"\xc3\":1}", badAt: "", badWhy: "is not valid UTF-8"},
		{name: "valid multi-byte text", in: `{"a":"Olá 😀"}`, badAt: "-"},
		{name: "null without a member", in: `{:null0`, noPanic: true},
		{name: "unterminated string", in: `{"a":"x`, noPanic: true},
		{name: "closing first", in: `]]]{`, noPanic: true},
		{name: "empty", in: ``, noPanic: true},
		{name: "lone quote", in: `"`, noPanic: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := scanJSON([]byte(tc.in))
			if tc.noPanic {
				return
			}
			var bad *badStringError
			switch {
			case tc.deep:
				if !errors.Is(err, errTooDeep) && !errors.Is(err, errTooLarge) {
					t.Fatalf("err %v, want too deep or too large", err)
				}
			case tc.badAt != "-":
				if !errors.As(err, &bad) || bad.member != tc.badAt || bad.why != tc.badWhy {
					t.Fatalf("err %#v, want bad string under %q (%s)", err, tc.badAt, tc.badWhy)
				}
			default:
				if err != nil {
					t.Fatalf("err %v", err)
				}
				got := slices.Sorted(maps.Keys(res.nulls))
				if !slices.Equal(got, tc.nulls) {
					t.Fatalf("nulls %v, want %v", got, tc.nulls)
				}
			}
		})
	}
}
