package official_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
)

// TestInboundMediaIsStreamed: media a contact sent is described by the
// provider, then read from its URL. Described with its size, it is opened
// as a stream each time it is read (never held whole); without one it is
// read at once. A download the provider refuses is Refused (the message
// keeps its caption), one that fails is Unavailable (the job retries).
func TestInboundMediaIsStreamed(t *testing.T) {
	t.Parallel()
	const doc = "%PDF-1.7\nnot really a pdf, but it starts like one"
	cases := []struct {
		name       string
		size, mime string // the description's file_size and mime_type
		download   int    // the URL's status
		wantType   string
		wantOpens  int32 // downloads after FetchMedia and two reads
		wantKind   fault.Kind
	}{
		{"described with its size: streamed on each read", fmt.Sprint(len(doc)), "application/pdf", 200, "application/pdf", 2, -1},
		{"no size: read at once", "", "application/pdf", 200, "application/pdf", 1, -1},
		{"no type: sniffed from its first bytes", fmt.Sprint(len(doc)), "", 200, "application/pdf", 3, -1},
		{"the download refused", fmt.Sprint(len(doc)), "application/pdf", 404, "", 0, fault.Refused},
		{"the download failing", fmt.Sprint(len(doc)), "application/pdf", 503, "", 0, fault.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var downloads atomic.Int32
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("%s without the access token", r.URL.Path)
				}
				switch r.URL.Path {
				case "/7001":
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"messaging_product":"whatsapp","url":%q,"mime_type":%q,"sha256":"x","file_size":%q,"id":"7001"}`,
						srv.URL+"/download/7001", tc.mime, tc.size)
				case "/download/7001":
					downloads.Add(1)
					w.WriteHeader(tc.download)
					if tc.download == 200 {
						_, _ = io.WriteString(w, doc)
					}
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			acc := &channels.ProviderAccount{BaseURL: srv.URL, PhoneNumberID: "111", BusinessAccountID: "222", AccessToken: "tok"}
			f := official.NewMediaFetcher(official.NewClient(official.ClientOptions{}))
			ctx := context.Background()
			m, err := f.FetchMedia(ctx, channels.Channel{ID: 1, TypeID: channels.OfficialChatapp, ProviderAccount: acc}, messaging.PendingMedia{ID: "7001"})
			if err == nil {
				for range 2 {
					var r io.ReadCloser
					if r, err = m.Open(ctx); err != nil {
						break
					}
					var b []byte
					b, err = io.ReadAll(r)
					_ = r.Close()
					if err == nil && string(b) != doc {
						t.Fatalf("read %q", b)
					}
				}
			}
			if tc.wantKind != -1 {
				if fault.KindOf(err) != tc.wantKind {
					t.Fatalf("kind %v, want %v (%v)", fault.KindOf(err), tc.wantKind, err)
				}
				return
			}
			if err != nil || m.Size != int64(len(doc)) || m.ContentType != tc.wantType || !strings.HasSuffix(m.FileName, ".pdf") {
				t.Fatalf("media %+v: %v", m, err)
			}
			if n := downloads.Load(); n != tc.wantOpens {
				t.Errorf("%d downloads, want %d", n, tc.wantOpens)
			}
		})
	}
}
