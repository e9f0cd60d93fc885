package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// withMedia matches the deliveries of name about message key that carry
// `media`.
func withMedia(name, key string) func(delivery) bool {
	return func(d delivery) bool { return messageEvent(name, key, 0)(d) && d.Data["media"] != nil }
}

// mediaPath checks the `media` of an event or answer against the file
// expected and returns the path of its URL on the gateway.
func mediaPath(t *testing.T, media any, mimeType string, data []byte) string {
	t.Helper()
	m, ok := media.(map[string]any)
	if !ok {
		t.Fatalf("media is %T %v, want an object", media, media)
	}
	u, err := url.Parse(fmt.Sprint(m["url"]))
	if err != nil || !strings.HasPrefix(u.Path, messaging.MediaURLPath) {
		t.Fatalf("media url %v (%v)", m["url"], err)
	}
	if m["mime_type"] != mimeType || m["size"] != float64(len(data)) || m["filename"] == "" ||
		!strings.HasSuffix(u.Path, "/"+fmt.Sprint(m["filename"])) {
		t.Fatalf("media %+v, want %s of %d bytes", m, mimeType, len(data))
	}
	if _, err := time.Parse(time.RFC3339, fmt.Sprint(m["expires_at"])); err != nil {
		t.Fatalf("media expires_at %v: %v", m["expires_at"], err)
	}
	return u.EscapedPath()
}

// getMedia fetches a media URL path with no token, as a subscriber does.
func getMedia(h *apitest.Harness, path string) *apitest.Response {
	return h.Do(apitest.Request{Method: "GET", Path: path})
}

// expectFile checks that path serves data as mimeType.
func expectFile(t *testing.T, h *apitest.Harness, path, mimeType string, data []byte) {
	t.Helper()
	r := getMedia(h, path)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != mimeType || !bytes.Equal(r.Body, data) ||
		r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET %s: %d %q %d bytes, want %s of %d bytes", path, r.Status, r.Header.Get("Content-Type"), len(r.Body), mimeType, len(data))
	}
}

// expectNoFile checks that path answers 404 Media not found.
func expectNoFile(t *testing.T, h *apitest.Harness, what, path string) {
	t.Helper()
	r := getMedia(h, path)
	if r.Status != http.StatusNotFound || r.Map(t)["message"] != "Media not found" {
		t.Fatalf("%s: GET %s answered %d %s, want 404", what, path, r.Status, r.Body)
	}
}

// TestOfficialInboundMediaReachable: the provider webhook stores an image
// message at once, without its file; a job fetches the file from the
// provider and publishes the message again with `media`, whose URL serves
// the bytes with their type until it expires; an unknown token, another
// file name and an expired URL answer 404.
func TestOfficialInboundMediaReachable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		img := pngImage(t, 9, 7)
		res, err := e.ctl.Inbound(ctx, providersim.InboundRequest{PhoneNumberID: e.pnid, From: ofcContactKey, Type: "image",
			Media: &providersim.InboundMedia{MimeType: "image/png", Caption: "o pedido", DataBase64: base64.StdEncoding.EncodeToString(img)}})
		if err != nil || res.WebhookStatus != http.StatusOK {
			t.Fatalf("image: %+v %v", res, err)
		}
		first := e.sink.first("image received", messageEvent(events.OmnichatMessageReceived, res.MessageID, 0))
		if first.Data["message_type_id"] != float64(msgtype.Image) || first.Data["text"] != "o pedido" {
			t.Fatalf("first event %+v", first.Data)
		}
		d := e.sink.first("image received with its media", withMedia(events.OmnichatMessageReceived, res.MessageID))
		if d.Data["id"] != first.Data["id"] || d.Data["text"] != "o pedido" {
			t.Fatalf("event with media %+v, first %+v", d.Data, first.Data)
		}
		path := mediaPath(t, d.Data["media"], "image/png", img)
		expectFile(t, e.h, path, "image/png", img)
		m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, res.MessageID)
		if err != nil || m.MediaPending || m.MediaSize != int64(len(img)) {
			t.Fatalf("stored %+v %v", m, err)
		}

		dir, _, _ := strings.Cut(strings.TrimPrefix(path, messaging.MediaURLPath), "/")
		other := "A"
		if dir[0] == 'A' {
			other = "B"
		}
		expectNoFile(t, e.h, "unknown token", messaging.MediaURLPath+other+dir[1:]+"/"+path[strings.LastIndex(path, "/")+1:])
		expectNoFile(t, e.h, "another file name", messaging.MediaURLPath+dir+"/other.png")
		e.clk.Advance(messaging.DefaultMediaURLLifetime - time.Second)
		expectFile(t, e.h, path, "image/png", img)
		e.clk.Advance(time.Second)
		expectNoFile(t, e.h, "expired", path)
	})
}

// TestOfficialInboundMediaRetried: while the provider cannot give the
// file, the webhook is still answered at once and the message is stored
// and published; the fetch is retried until the file arrives. A file the
// provider no longer has is given up, and the message stays without it.
func TestOfficialInboundMediaRetried(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		// The client tries each read 3 times: 7 failed lookups fail two
		// attempts of the job and the first read of the third.
		if err := e.ctl.MediaOutage(ctx, providersim.FaultRequest{PhoneNumberID: e.pnid, Count: 7}); err != nil {
			t.Fatal(err)
		}
		doc := []byte("%PDF-1.4\n%retried\n")
		res, err := e.ctl.Inbound(ctx, providersim.InboundRequest{PhoneNumberID: e.pnid, From: ofcContactKey, Type: "document",
			Media: &providersim.InboundMedia{MimeType: "application/pdf", Filename: "boleto 4471.pdf", DataBase64: base64.StdEncoding.EncodeToString(doc)}})
		if err != nil || res.WebhookStatus != http.StatusOK {
			t.Fatalf("document: %+v %v", res, err)
		}
		if m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, res.MessageID); err != nil || m.TypeID != msgtype.Document {
			t.Fatalf("not stored during the outage: %+v %v", m, err)
		}
		d := e.sink.first("document with its media after the outage", withMedia(events.OmnichatMessageReceived, res.MessageID))
		path := mediaPath(t, d.Data["media"], "application/pdf", doc)
		if d.Data["media"].(map[string]any)["filename"] != "boleto_4471.pdf" {
			t.Fatalf("file name %v", d.Data["media"])
		}
		r := getMedia(e.h, path)
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, doc) || !strings.HasPrefix(r.Header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("GET %s: %d %v", path, r.Status, r.Header)
		}

		// Two failed attempts, then the file: three attempts of one job.
		var attempts []int
		if err := db.Bun.NewSelect().Table("river_job").Column("attempt").Where("kind = ?", messaging.FetchMediaArgs{}.Kind()).
			Scan(ctx, &attempts); err != nil || len(attempts) != 1 || attempts[0] != 3 {
			t.Fatalf("fetch jobs' attempts %v (%v), want one job of 3", attempts, err)
		}

		// Media the provider does not have: the message is kept, the fetch
		// ends without a file and without another event.
		body := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"contacts":[{"profile":{"name":"Maria"},"wa_id":%q}],"messages":[{"from":%q,"id":"wamid.gone-media","timestamp":"1764770000","type":"image","image":{"id":"99999999","mime_type":"image/jpeg","caption":"sumiu"}}]}}]}]}`,
			e.pnid, ofcContactKey, ofcContactKey)
		if r := e.postProviderWebhook([]byte(body)); r.Status != http.StatusOK {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		eventually(t, "the unknown media given up", func() bool {
			m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.gone-media")
			return err == nil && !m.MediaPending
		})
		if m, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.gone-media"); m.MediaPath != "" || m.Text != "sumiu" {
			t.Fatalf("given-up message %+v", m)
		}
		if n := e.sink.count(withMedia(events.OmnichatMessageReceived, "wamid.gone-media")); n != 0 {
			t.Fatalf("%d events with media for a file the provider does not have", n)
		}
		gone, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.gone-media")
		r = e.h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/messages/%d/media", gone.ID), Token: e.ten.Token})
		if r.Status != http.StatusNotFound || r.Map(t)["message"] != "This message has no media" {
			t.Fatalf("link of a given-up file: %d %s", r.Status, r.Body)
		}
	})
}

// TestChatappInboundMediaReachable: a file a contact sends through the
// chat app is published with `media` at once; its URL serves the bytes;
// the edit answer of a file the company sent carries a fresh URL too.
func TestChatappInboundMediaReachable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now, WorkJobs: true})
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageReceived, events.OmnichatMessageSent}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		img := pngImage(t, 5, 3)
		ext := c.inbound(conn.ID, map[string]any{"from": "5511977776666", "name": "Ana", "text": "olha",
			"file": map[string]any{"name": "foto.png", "content_type": "image/png", "data": base64.StdEncoding.EncodeToString(img)}})
		d := sink.first("image received", messageEvent(events.OmnichatMessageReceived, ext, 0))
		if d.Data["message_type_id"] != float64(msgtype.Image) {
			t.Fatalf("event %+v", d.Data)
		}
		path := mediaPath(t, d.Data["media"], "image/png", img)
		expectFile(t, h, path, "image/png", img)

		// A text message carries no media.
		text := c.inbound(conn.ID, map[string]any{"from": "5511977776666", "text": "só texto"})
		if td := sink.first("text received", messageEvent(events.OmnichatMessageReceived, text, 0)); td.Data["media"] != nil {
			t.Fatalf("text message with media %+v", td.Data)
		}

		// The company's own file: the edit answer mints a new URL.
		sent, _ := c.sendPhoto(conn, "5511977776666")
		resp := c.post("/api/edit-message", map[string]any{"id": sent.ID, "text": "legenda"})
		if resp.Status != http.StatusOK {
			t.Fatalf("edit: %d %s", resp.Status, resp.Body)
		}
		answer := resp.Map(t)
		photo := pngImage(t, 4, 4)
		editPath := mediaPath(t, answer["media"], "image/png", photo)
		expectFile(t, h, editPath, "image/png", photo)
		// Revoked with its file: every URL of it answers 404 at once.
		if r := c.post("/api/revoke-messages", map[string]any{"ids": []int64{sent.ID}, "remove_media": true}); r.Status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		expectNoFile(t, h, "revoked with its file", editPath)
		expectFile(t, h, path, "image/png", img)
		clk.Advance(messaging.DefaultMediaURLLifetime)
		expectNoFile(t, h, "expired", path)

		// An expired URL is replaced on demand; only for the company's own
		// messages with a file.
		link := func(token string, id any) *apitest.Response {
			return h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/messages/%v/media", id), Token: token})
		}
		r := link(c.token, d.Data["id"])
		if r.Status != http.StatusOK || r.Map(t)["success"] != true {
			t.Fatalf("fresh link: %d %s", r.Status, r.Body)
		}
		fresh := mediaPath(t, r.Map(t)["data"], "image/png", img)
		if fresh == path {
			t.Fatalf("the fresh URL is the expired one: %s", fresh)
		}
		expectFile(t, h, fresh, "image/png", img)
		other := h.Tenant("Other")
		textID := sink.first("text received", messageEvent(events.OmnichatMessageReceived, text, 0)).Data["id"]
		for _, tc := range []struct {
			name, token string
			id          any
			status      int
			message     string
		}{
			{"another company's message", other.Token, d.Data["id"], http.StatusNotFound, "Message not found"},
			{"unknown message", c.token, 999999, http.StatusNotFound, "Message not found"},
			{"text message", c.token, textID, http.StatusNotFound, "This message has no media"},
			{"no token", "", d.Data["id"], http.StatusUnauthorized, ""},
		} {
			r := link(tc.token, tc.id)
			if r.Status != tc.status || (tc.message != "" && r.Map(t)["message"] != tc.message) {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			}
		}
	})
}
