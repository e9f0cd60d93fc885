//go:build !race

// The race detector shadows every allocation, so RSS figures under -race
// say nothing about production: this file is left out of race builds.

package httpapi_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/chatmsg/gateway/internal/loadtest"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// procStatus reads a kB figure of /proc/self/status (VmRSS, VmHWM,
// RssAnon) in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status on this system: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// rssGrowth runs fn and returns how far the process's resident set rose
// above what it was before (VmHWM after clear_refs reset it to VmRSS).
func rssGrowth(t *testing.T, fn func()) (growth, before int64) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS (/proc/self/clear_refs): %v", err)
	}
	before = procStatus(t, "VmRSS")
	fn()
	return procStatus(t, "VmHWM") - before, before
}

// TestALargeDocumentThroughPostgres: serving a 100 MB document from the
// PostgreSQL store through a replica's HTTP stack, uploading one, and
// fetching one a contact sent each grow its RSS by less than 32 MB: the
// file is streamed chunk by chunk, never held whole, and an upload goes
// through the edge's spool. The test
// process is client and server at once; the client generates what it
// sends and discards what it reads. Sending such a document is measured on
// the real binary, beside a provider in its own process (make load,
// media-large).
func TestALargeDocumentThroughPostgres(t *testing.T) {
	db := storetest.Postgres(t)
	e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
	ctx := context.Background()
	const size = int64(messaging.DocumentLimit)
	token := "memtest" + strconv.FormatInt(e.ch.ID, 10)
	key := "templates/" + token + "/big.pdf"
	if err := e.h.App.Files.Put(ctx, key, loadtest.PDFDocument(size), size, "application/pdf"); err != nil {
		t.Fatal(err)
	}
	now := e.clk.Now()
	if _, err := db.Bun.NewRaw(`INSERT INTO template_media (token, company_id, provider_account_id, file_name, content_type, size_bytes, path, created_at, expires_at)
		VALUES (?, ?, ?, 'big.pdf', 'application/pdf', ?, ?, ?, ?)`, token, e.ten.CompanyID, e.ch.ProviderAccount.ID, size, token+"/big.pdf", now, now.Add(72*3600e9)).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	_, _ = io.Copy(want, loadtest.PDFDocument(size))

	var served int64
	var sum []byte
	growth, before := rssGrowth(t, func() {
		resp, err := http.Get(e.h.Server.URL + "/media/" + token + "/big.pdf")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		h := sha256.New()
		served, err = io.Copy(h, resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("serve: %d, %v", resp.StatusCode, err)
		}
		sum = h.Sum(nil)
	})
	if served != size || string(sum) != string(want.Sum(nil)) {
		t.Fatalf("served %d bytes (want %d), same bytes %v", served, size, string(sum) == string(want.Sum(nil)))
	}
	t.Logf("serving %d MB from PostgreSQL: RSS %d MB before, peak +%.1f MB", size>>20, before>>20, float64(growth)/(1<<20))
	if growth >= 32<<20 {
		t.Fatalf("serving a %d MB document grew RSS by %.1f MB, want < 32 MB", size>>20, float64(growth)/(1<<20))
	}

	// The upload: the body is streamed from a pipe, so what grows is the
	// server's side.
	upGrowth, _ := rssGrowth(t, func() {
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			err := mw.WriteField("provider_account_id", strconv.FormatInt(e.ch.ProviderAccount.ID, 10))
			var part io.Writer
			if err == nil {
				part, err = mw.CreateFormFile("file", "up.pdf")
			}
			if err == nil {
				_, err = io.Copy(part, loadtest.PDFDocument(size-1024))
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		req, _ := http.NewRequest(http.MethodPost, e.h.Server.URL+"/api/provider-templates/upload-send-media", pr)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+e.ten.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upload: %d %s", resp.StatusCode, b)
		}
	})
	t.Logf("uploading %d MB into PostgreSQL: peak +%.1f MB", size>>20, float64(upGrowth)/(1<<20))
	if upGrowth >= 32<<20 {
		t.Fatalf("uploading a %d MB document grew RSS by %.1f MB, want < 32 MB", size>>20, float64(upGrowth)/(1<<20))
	}

	// A contact's document of the same size: the provider (simulated in
	// this process, holding it before the measure starts) describes it with
	// its size, and the fetch job streams it from there into the store.
	// The simulator's copy lives outside the Go heap: on it, it would raise
	// the collector's goal by its size and let the fetch's garbage grow as
	// far, which a gateway (whose provider is elsewhere) never sees.
	doc, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(doc) })
	if _, err := io.ReadFull(loadtest.PDFDocument(size), doc); err != nil {
		t.Fatal(err)
	}
	e.sim.AddMedia(e.pnid, "770000000001", "application/pdf", doc)
	hook := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"contacts":[{"profile":{"name":"Maria"},"wa_id":%q}],"messages":[{"from":%q,"id":"wamid.big-document","timestamp":"1764770000","type":"document","document":{"id":"770000000001","mime_type":"application/pdf","filename":"big.pdf"}}]}}]}]}`,
		e.pnid, ofcContactKey, ofcContactKey)
	if r := e.postProviderWebhook([]byte(hook)); r.Status != http.StatusOK {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.big-document")
	if err != nil || !m.MediaPending {
		t.Fatalf("inbound document %+v %v", m, err)
	}
	inGrowth, _ := rssGrowth(t, func() {
		if err := e.h.App.Messaging.FetchMedia(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
	})
	if m, err = e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.big-document"); err != nil || m.MediaPending || m.MediaPath == "" {
		t.Fatalf("inbound document after the fetch %+v %v", m, err)
	}
	if info, err := e.h.App.Files.Stat(ctx, "messages/"+m.MediaPath); err != nil || info.Size != size {
		t.Fatalf("stored inbound document: %+v %v", info, err)
	}
	t.Logf("fetching a contact's %d MB document into PostgreSQL: peak +%.1f MB", size>>20, float64(inGrowth)/(1<<20))
	if inGrowth >= 32<<20 {
		t.Fatalf("fetching a %d MB inbound document grew RSS by %.1f MB, want < 32 MB", size>>20, float64(inGrowth)/(1<<20))
	}
}
