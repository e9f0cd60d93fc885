package official_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chatmsg/gateway/internal/official"
)

// TestDocumentFileName: the recipient sees the client's own name; only
// path separators and control characters go, and the length is capped
// with the extension kept.
func TestDocumentFileName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ção", 100) + ".pdf"
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Fatura Abril.pdf", "Fatura Abril.pdf"},
		{"accents and punctuation kept", "Relatório (final) #3.pdf", "Relatório (final) #3.pdf"},
		{"slash path", "../../etc/Fatura Abril.pdf", "Fatura Abril.pdf"},
		{"backslash path", `C:\Users\ana\Fatura.pdf`, "Fatura.pdf"},
		{"control characters", "Fatura\x00\tAbril\n.pdf", "FaturaAbril.pdf"},
		{"surrounding spaces", "  espaço.pdf  ", "espaço.pdf"},
		{"parent directory only", "..", ""},
		{"directory only", "dir/", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := official.DocumentFileName(tc.in); got != tc.want {
				t.Errorf("DocumentFileName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	got := official.DocumentFileName(long)
	if len(got) > 240 || !strings.HasSuffix(got, ".pdf") || !strings.HasPrefix(got, "ção") || !utf8.ValidString(got) {
		t.Errorf("long name: %d bytes %q", len(got), got)
	}
}
