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
	for _, tc := range []struct{ in, want string }{
		{"Fatura Abril.pdf", "Fatura Abril.pdf"},
		{"Relatório (final) #3.pdf", "Relatório (final) #3.pdf"},
		{"../../etc/Fatura Abril.pdf", "Fatura Abril.pdf"},
		{`C:\Users\ana\Fatura.pdf`, "Fatura.pdf"},
		{"Fatura\x00\tAbril\n.pdf", "FaturaAbril.pdf"},
		{"  espaço.pdf  ", "espaço.pdf"},
		{"..", ""},
		{"dir/", ""},
	} {
		if got := official.DocumentFileName(tc.in); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
	got := official.DocumentFileName(long)
	if len(got) > 240 || !strings.HasSuffix(got, ".pdf") || !strings.HasPrefix(got, "ção") || !utf8.ValidString(got) {
		t.Errorf("long name: %d bytes %q", len(got), got)
	}
}
