package messaging

import (
	"bytes"
	"testing"
	"time"
)

func TestSniffContentType(t *testing.T) {
	t.Parallel()
	ftyp := func(brand string) []byte {
		return append([]byte{0, 0, 0, 0x18, 'f', 't', 'y', 'p'}, []byte(brand+"\x00\x00\x00\x00")...)
	}
	cases := map[string][]byte{
		"image/png":       {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0},
		"image/jpeg":      {0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 'J', 'F', 'I', 'F'},
		"image/webp":      []byte("RIFF\x00\x00\x00\x00WEBPVP8 "),
		"application/pdf": []byte("%PDF-1.7\n"),
		"video/mp4":       ftyp("isom"),
		"video/3gpp":      ftyp("3gp5"),
		"audio/mp4":       ftyp("M4A "),
		"text/plain":      []byte("hello"),
	}
	for want, data := range cases {
		if got := SniffContentType(data); got != want {
			t.Errorf("SniffContentType(%q) = %s, want %s", data, got, want)
		}
	}
}

func TestSafeFileName(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, ct, want string }{
		{"fatura 48213.pdf", "application/pdf", "fatura_48213.pdf"},
		{"../../etc/passwd", "text/plain", "passwd"},
		{`C:\\Users\\a\\foto.png`, "image/png", "foto.png"},
		{"..", "image/png", "file.png"},
		{"", "video/mp4", "file.mp4"},
		{"fatura-ação.pdf", "application/pdf", "fatura-ação.pdf"},
		{"a/b\x00c.pdf", "application/pdf", "bc.pdf"},
		{string(bytes.Repeat([]byte("a"), 300)) + ".pdf", "application/pdf", string(bytes.Repeat([]byte("a"), 116)) + ".pdf"},
	}
	for _, tc := range cases {
		if got := SafeFileName(tc.in, tc.ct); got != tc.want {
			t.Errorf("SafeFileName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStatusOrder(t *testing.T) {
	t.Parallel()
	order := []int{StatusPending, StatusSent, StatusDelivered, StatusRead}
	for i := 1; i < len(order); i++ {
		if statusRank(order[i-1]) >= statusRank(order[i]) {
			t.Errorf("status %d does not come before %d", order[i-1], order[i])
		}
	}
	if !terminal(StatusFailed) || !terminal(StatusUnauthorized) || terminal(StatusRead) {
		t.Error("terminal statuses")
	}
}

// TestFetchBackoff: the media fetch retries soon after a short outage and
// at most hourly in a long one.
func TestFetchBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {12, 2048 * time.Second},
		{13, time.Hour}, {mediaFetchAttempts, time.Hour},
	} {
		if got := fetchBackoff(tc.attempt); got != tc.want {
			t.Errorf("attempt %d: %s, want %s", tc.attempt, got, tc.want)
		}
	}
}
