package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

type uploadAnswer struct {
	Data struct {
		URL       string    `json:"url"`
		Filename  string    `json:"filename"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"data"`
}

// TestUploadSendMedia: accepted types are taken from the bytes, sizes are
// limited per kind, the file is served at a temporary URL that dies after
// 72 hours unless the file was used in a send.
func TestUploadSendMedia(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ofcSeedTemplates(t, e)
		ctx := context.Background()
		acct := strconv.FormatInt(e.ch.ProviderAccount.ID, 10)
		upload := func(token, account, name, declared string, content []byte) *apitest.Response {
			return e.h.Do(apitest.Request{Method: "POST", Path: "/api/provider-templates/upload-send-media", Token: token,
				Form: map[string]string{"provider_account_id": account}, FileField: "file", FileName: name, FileType: declared, FileContent: content})
		}
		img := pngImage(t, 30, 30)
		other := e.h.Tenant("Other")
		noPerm := e.h.Tenant("No perm", auth.PermWebhooksView)
		errorsCases := []struct {
			name    string
			token   string
			account string
			file    string
			content []byte
			status  int
			message string
		}{
			{"no permission", noPerm.Token, acct, "a.png", img, 403, "This action is unauthorized."},
			{"account of another company", other.Token, acct, "a.png", img, 404, "Provider account not found"},
			{"unknown account", e.ten.Token, "999999", "a.png", img, 404, "Provider account not found"},
			{"text declared as PDF", e.ten.Token, acct, "a.pdf", []byte("hello, I am text"), 509,
				"File must be of type image/jpeg, image/png, image/webp, video/mp4, video/3gpp or application/pdf"},
			{"image over 5 MB", e.ten.Token, acct, "big.png", append(append([]byte{}, img...), make([]byte, messaging.ImageLimit)...), 509, "Images may not be greater than 5 MB"},
			{"video over 16 MB", e.ten.Token, acct, "big.mp4", mp4Bytes("mp42", messaging.VideoLimit+1), 509, "Videos may not be greater than 16 MB"},
		}
		for _, tc := range errorsCases {
			t.Run(tc.name, func(t *testing.T) {
				resp := upload(tc.token, tc.account, tc.file, "application/pdf", tc.content)
				if resp.Status != tc.status || resp.Map(t)["message"] != tc.message {
					t.Errorf("%d %s", resp.Status, resp.Body)
				}
			})
		}
		if resp := e.h.Do(apitest.Request{Method: "POST", Path: "/api/provider-templates/upload-send-media", Token: e.ten.Token,
			Form: map[string]string{"provider_account_id": acct}}); resp.Status != 509 || resp.Map(t)["message"] != "File is required" {
			t.Errorf("no file: %d %s", resp.Status, resp.Body)
		}

		// A PNG declared as PDF is stored as what it is.
		start := e.clk.Now()
		resp := upload(e.ten.Token, acct, "promo banner ação.pdf", "application/pdf", img)
		if resp.Status != http.StatusOK {
			t.Fatalf("upload: %d %s", resp.Status, resp.Body)
		}
		var unused uploadAnswer
		resp.JSON(t, &unused)
		if !unused.Data.ExpiresAt.Equal(start.Add(72*time.Hour)) || unused.Data.Filename != "promo_banner_ação.pdf" || !strings.Contains(unused.Data.URL, "/media/") {
			t.Fatalf("answer %s", resp.Body)
		}
		serve := func(raw string) *apitest.Response {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			return e.h.Do(apitest.Request{Method: "GET", Path: u.EscapedPath()})
		}
		got := serve(unused.Data.URL)
		if got.Status != 200 || got.Header.Get("Content-Type") != "image/png" || string(got.Body) != string(img) {
			t.Fatalf("serve: %d %q (%d bytes)", got.Status, got.Header.Get("Content-Type"), len(got.Body))
		}
		if r := e.h.Do(apitest.Request{Method: "GET", Path: "/media/nope/x.png"}); r.Status != 404 {
			t.Fatalf("unknown token: %d", r.Status)
		}
		if r := serve(strings.Replace(unused.Data.URL, url.PathEscape("promo_banner_ação.pdf"), "other.png", 1)); r.Status != 404 {
			t.Fatalf("right token, wrong name: %d", r.Status)
		}

		// Another upload is used in a send: it no longer expires.
		resp = upload(e.ten.Token, acct, "used.png", "image/png", img)
		var used uploadAnswer
		resp.JSON(t, &used)
		e.clk.Advance(71 * time.Hour)
		if r := e.send(map[string]any{"provider_template_id": e.template("promo_image"), "header_media_url": used.Data.URL}); r.Status != 200 {
			t.Fatalf("send with the uploaded media: %d %s", r.Status, r.Body)
		}
		list := e.sent()
		if p := list[len(list)-1].Request.Template.Components[0].Parameters[0]; p.Image == nil || p.Image.ID == "" {
			t.Fatalf("provider got header %+v", p)
		}

		e.clk.Advance(time.Hour) // 72 h after the uploads
		if r := serve(unused.Data.URL); r.Status != http.StatusGone {
			t.Fatalf("unused after 72 h: %d", r.Status)
		}
		n, err := e.h.App.Templates.DeleteExpiredMedia(ctx)
		if err != nil || n != 1 {
			t.Fatalf("cleanup deleted %d (%v), want 1", n, err)
		}
		if _, ok := storedFile(t, e.h.App, uploadKey(t, unused.Data.URL)); ok {
			t.Fatal("the expired upload's file is still stored")
		}
		if _, ok := storedFile(t, e.h.App, uploadKey(t, used.Data.URL)); !ok {
			t.Fatal("the used upload's file was deleted")
		}
		if r := serve(unused.Data.URL); r.Status != http.StatusGone {
			t.Fatalf("deleted: %d", r.Status)
		}
		if r := e.send(map[string]any{"provider_template_id": e.template("promo_image"), "header_media_url": unused.Data.URL}); r.Status != 509 ||
			r.Map(t)["message"] != "header_media_url has expired: upload the file again" {
			t.Fatalf("send with expired media: %d %s", r.Status, r.Body)
		}
		e.clk.Advance(30 * 24 * time.Hour)
		if n, _ := e.h.App.Templates.DeleteExpiredMedia(ctx); n != 0 {
			t.Fatalf("cleanup deleted a used upload")
		}
		if r := serve(used.Data.URL); r.Status != 200 {
			t.Fatalf("used upload after a month: %d", r.Status)
		}
	})
}
