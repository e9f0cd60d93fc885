package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// chatappRecord is the connection record of the API.
type chatappRecord struct {
	ID        int    `json:"id"`
	Key       string `json:"key"`
	Name      string `json:"name"`
	Logged    bool   `json:"logged"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// connAPI drives the connection endpoints of one tenant.
type connAPI struct {
	t     *testing.T
	h     *apitest.Harness
	token string
}

func (c connAPI) post(path string, body any) *apitest.Response {
	c.t.Helper()
	return c.h.Do(apitest.Request{Method: "POST", Path: path, Token: c.token, JSON: body})
}

// ok posts and requires a 200 answer, decoding `data` into out (if given).
func (c connAPI) ok(path string, body any, out any) map[string]any {
	c.t.Helper()
	resp := c.post(path, body)
	if resp.Status != http.StatusOK {
		c.t.Fatalf("POST %s %v: %d %s", path, body, resp.Status, resp.Body)
	}
	m := resp.Map(c.t)
	if out != nil {
		var env struct{ Data any }
		env.Data = out
		resp.JSON(c.t, &env)
	}
	return m
}

// refused posts and requires the documented 509 {success:false, message}.
func (c connAPI) refused(path string, body any, message string) {
	c.t.Helper()
	resp := c.post(path, body)
	if resp.Status != 509 {
		c.t.Fatalf("POST %s %v: %d %s, want 509", path, body, resp.Status, resp.Body)
	}
	m := resp.Map(c.t)
	if m["success"] != false || m["message"] != message {
		c.t.Fatalf("POST %s %v: body %s, want message %q", path, body, resp.Body, message)
	}
}

func (c connAPI) create(name, key string) chatappRecord {
	c.t.Helper()
	var rec chatappRecord
	c.ok("/api/chatapp-create", map[string]any{"name": name, "key": key}, &rec)
	return rec
}

func (c connAPI) pair(id int) chatappRecord {
	c.t.Helper()
	c.ok("/api/chatapp-qrcode", map[string]any{"id": id, "os": "Linux", "browser": "Firefox"}, nil)
	var rec chatappRecord
	c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/pair", id), nil, &rec)
	return rec
}

func (c connAPI) list(query string) (page struct {
	CurrentPage int             `json:"current_page"`
	PerPage     int             `json:"per_page"`
	Total       int             `json:"total"`
	LastPage    int             `json:"last_page"`
	Data        []chatappRecord `json:"data"`
}) {
	c.t.Helper()
	resp := c.h.Do(apitest.Request{Method: "GET", Path: "/api/chatapps" + query, Token: c.token})
	if resp.Status != http.StatusOK {
		c.t.Fatalf("GET /api/chatapps%s: %d %s", query, resp.Status, resp.Body)
	}
	resp.JSON(c.t, &page)
	return page
}

func startConnections(t *testing.T, db *store.DB, opts apitest.Options) (*apitest.Harness, connAPI) {
	h := apitest.Start(t, db, opts)
	ten := h.Tenant("Acme")
	return h, connAPI{t: t, h: h, token: ten.Token}
}

func TestConnectionCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 14, 3, 7, 0, time.UTC))
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now})

		sales := c.create("Sales team", "5511988887777")
		if sales.ID == 0 || sales.Key != "5511988887777" || sales.Name != "Sales team" || sales.Logged ||
			sales.CreatedAt != "2026-11-22 14:03:07" || sales.UpdatedAt != sales.CreatedAt {
			t.Fatalf("created %+v", sales)
		}
		for _, tc := range []struct {
			name string
			body map[string]any
			msg  string
		}{
			{"missing name", map[string]any{"key": "5511988886666"}, "Name is required"},
			{"missing key", map[string]any{"name": "x"}, "Key is required"},
			{"key with symbols", map[string]any{"name": "x", "key": "+55 11 98888-6666"}, "Key must be digits only with country code (10 to 15 digits)"},
			{"key too short", map[string]any{"name": "x", "key": "119888866"}, "Key must be digits only with country code (10 to 15 digits)"},
			{"duplicate key", map[string]any{"name": "x", "key": "5511988887777"}, "The number 5511988887777 is already used by another connection"},
		} {
			t.Run(tc.name, func(t *testing.T) { c.t = t; c.refused("/api/chatapp-create", tc.body, tc.msg) })
		}
		c.t = t
		// Another company learns nothing of the first company's unpaired
		// connection: its own on that number is created (only pairing
		// reserves a number across companies: TestOneNumberOneChannel).
		other := connAPI{t: t, h: h, token: h.Tenant("Other").Token}
		theirs := other.create("x", "5511988887777")
		if theirs.ID == sales.ID {
			t.Fatalf("another company got the first company's connection: %+v", theirs)
		}
		other.ok("/api/chatapp-delete", map[string]any{"id": theirs.ID}, nil)

		clk.Advance(time.Hour)
		var renamed chatappRecord
		c.ok("/api/chatapp-update", map[string]any{"key": "5511988887777", "name": "Sales (SP)"}, &renamed)
		if renamed.ID != sales.ID || renamed.Name != "Sales (SP)" || renamed.Key != sales.Key || renamed.UpdatedAt != "2026-11-22 15:03:07" || renamed.CreatedAt != sales.CreatedAt {
			t.Fatalf("renamed %+v", renamed)
		}
		c.refused("/api/chatapp-update", map[string]any{"id": sales.ID, "new_key": "5511988886666"}, "Key is required when new_key is sent")
		c.refused("/api/chatapp-update", map[string]any{"name": "x"}, "Id or key is required")
		c.refused("/api/chatapp-update", map[string]any{"id": sales.ID, "key": "5511900000000", "name": "x"}, "Connection not found")
		support := c.create("Support", "5521977776655")
		c.refused("/api/chatapp-update", map[string]any{"key": support.Key, "new_key": sales.Key}, "The number 5511988887777 is already used by another connection")
		var moved chatappRecord
		c.ok("/api/chatapp-update", map[string]any{"id": support.ID, "key": support.Key, "new_key": "5521977770000"}, &moved)
		if moved.Key != "5521977770000" || moved.Name != "Support" {
			t.Fatalf("moved %+v", moved)
		}

		// A logged-in connection keeps its number: the paired phone is it.
		c.pair(sales.ID)
		c.refused("/api/chatapp-update", map[string]any{"id": sales.ID, "key": sales.Key, "new_key": "5511988880000"}, "Log the connection out before changing its number")

		for _, path := range []string{"/api/chatapp-update", "/api/chatapp-delete", "/api/chatapp-logout", "/api/chatapp-contact-list",
			"/api/chatapp-group-list"} {
			other.refused(path, map[string]any{"id": sales.ID, "name": "mine"}, "Connection not found")
			other.refused(path, map[string]any{"key": sales.Key}, "Connection not found")
		}
		other.refused("/api/chatapp-qrcode", map[string]any{"id": support.ID, "os": "Linux", "browser": "Chrome"}, "Connection not found")
		other.refused("/api/chatapp-check-on-chatapp", map[string]any{"id": sales.ID, "numbers": []string{"5511977776666"}}, "Connection not found")
		if got := other.list("").Total; got != 0 {
			t.Fatalf("other company lists %d connections", got)
		}

		resp := c.post("/api/chatapp-delete", map[string]any{"key": sales.Key})
		if resp.Status != http.StatusOK || resp.Map(t)["success"] != true {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		c.refused("/api/chatapp-delete", map[string]any{"id": sales.ID}, "Connection not found")
		c.refused("/api/chatapp-delete", map[string]any{}, "Id or key is required")
		if p := c.list(""); p.Total != 1 || p.Data[0].ID != support.ID {
			t.Fatalf("after delete: %+v", p)
		}
		// The number is free again.
		c.create("Sales again", sales.Key)
	})
}

func TestConnectionList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
		_, c := startConnections(t, db, apitest.Options{Now: clk.Now})
		alpha := c.create("Alpha sales", "5511900000001")
		clk.Advance(24 * time.Hour)
		beta := c.create("beta SUPPORT", "5521900000002")
		clk.Advance(24 * time.Hour)
		gamma := c.create("Gamma 100%_off", "5531900000003")
		clk.Advance(24 * time.Hour)
		c.pair(alpha.ID) // logged, updated on 2026-11-04

		ids := func(recs []chatappRecord) []int {
			out := make([]int, len(recs))
			for i, r := range recs {
				out[i] = r.ID
			}
			return out
		}
		q := func(kv ...string) string {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				v.Set(kv[i], kv[i+1])
			}
			return "?" + v.Encode()
		}
		for _, tc := range []struct {
			name  string
			query string
			want  []int
		}{
			{"default order id asc", "", []int{alpha.ID, beta.ID, gamma.ID}},
			{"filter name, case-insensitive", q("filter", "SALES"), []int{alpha.ID}},
			{"filter number", q("filter", "21900"), []int{beta.ID}},
			{"filter treats % and _ literally", q("filter", "100%_"), []int{gamma.ID}},
			{"filter with a lone %", q("filter", "%"), []int{gamma.ID}},
			{"logged", q("logged", "true"), []int{alpha.ID}},
			{"not logged", q("logged", "false"), []int{beta.ID, gamma.ID}},
			{"order by name desc", q("orderBy", "name", "orderMode", "DESC"), []int{beta.ID, gamma.ID, alpha.ID}},
			{"orderMode in lower case", q("orderBy", "name", "orderMode", "desc"), []int{beta.ID, gamma.ID, alpha.ID}},
			{"order by updated_at desc", q("orderBy", "updated_at", "orderMode", "DESC"), []int{alpha.ID, gamma.ID, beta.ID}},
			{"created_at one day", q("created_at", `["2026-11-02","2026-11-02"]`), []int{beta.ID}},
			{"created_at range with times", q("created_at", `["2026-11-01 09:00:00","2026-11-03T08:59:59Z"]`), []int{alpha.ID, beta.ID}},
			{"updated_at", q("updated_at", `["2026-11-04","2026-11-30"]`), []int{alpha.ID}},
			{"page 2 of 2", q("perPage", "2", "page", "2"), []int{gamma.ID}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c.t = t
				if got := ids(c.list(tc.query).Data); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			})
		}
		c.t = t
		if p := c.list(""); p.PerPage != 100 || p.CurrentPage != 1 || p.LastPage != 1 || p.Total != 3 {
			t.Errorf("defaults: %+v", p)
		}
		if p := c.list(q("perPage", "2")); p.LastPage != 2 || p.Total != 3 || len(p.Data) != 2 {
			t.Errorf("perPage 2: %+v", p)
		}
		for _, tc := range []struct{ name, query, msg string }{
			{"created_at one date", q("created_at", `["2026-11-02"]`), "Created at must be a JSON array [start, end] of dates"},
			{"updated_at impossible date", q("updated_at", `["2026-02-30","2026-03-01"]`), "Updated at must be a JSON array [start, end] of dates"},
			{"orderBy unknown column", q("orderBy", "secret"), "OrderBy must be one of id, name, key, logged, created_at, updated_at"},
			{"perPage over 500", q("perPage", "501"), "Per page must be an integer from 1 to 500"},
			{"logged not a boolean", q("logged", "maybe"), "Logged must be true or false"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := c.h.Do(apitest.Request{Method: "GET", Path: "/api/chatapps" + tc.query, Token: c.token})
				if resp.Status != 509 || resp.Map(t)["message"] != tc.msg {
					t.Errorf("%d %s, want 509 %q", resp.Status, resp.Body, tc.msg)
				}
			})
		}
	})
}

func TestConnectionPairingAndLogout(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
		_, c := startConnections(t, db, apitest.Options{Now: clk.Now})
		conn := c.create("Sales", "5511988887777")

		c.refused("/api/chatapp-qrcode", map[string]any{"id": conn.ID, "browser": "Chrome"}, "Os is required")
		c.refused("/api/chatapp-qrcode", map[string]any{"id": conn.ID, "os": "Linux"}, "Browser is required")
		c.refused("/api/chatapp-qrcode", map[string]any{"os": "Linux", "browser": "Chrome"}, "Id or key is required")
		c.refused(fmt.Sprintf("/api/chatapp-simulator/%d/pair", conn.ID), nil, "No pairing in progress: ask for a QR code first")

		var qr struct {
			ID        int    `json:"id"`
			Key       string `json:"key"`
			Code      string `json:"code"`
			QRCode    string `json:"qrcode"`
			ExpiresAt string `json:"expires_at"`
		}
		c.ok("/api/chatapp-qrcode", map[string]any{"key": conn.Key, "os": "Windows", "browser": "Chrome", "phone_code": true}, &qr)
		if qr.ID != conn.ID || qr.Key != conn.Key || qr.Code == "" || qr.ExpiresAt != "2026-11-22 14:01:00" {
			t.Fatalf("qr %+v", qr)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(qr.QRCode, "data:image/png;base64,"))
		if err != nil {
			t.Fatal(err)
		}
		if img, err := png.Decode(bytes.NewReader(raw)); err != nil || img.Bounds().Dx() < 100 {
			t.Fatalf("the QR code is not a PNG image: %v", err)
		}
		// The code refreshes: after the first one expires, a new one.
		clk.Advance(61 * time.Second)
		var next struct {
			Code      string `json:"code"`
			QRCode    string `json:"qrcode"`
			ExpiresAt string `json:"expires_at"`
		}
		c.ok("/api/chatapp-qrcode", map[string]any{"id": conn.ID, "os": "Windows", "browser": "Chrome"}, &next)
		if next.QRCode == qr.QRCode || next.ExpiresAt != "2026-11-22 14:01:20" {
			t.Fatalf("refreshed code %+v", next)
		}
		for _, path := range []string{"/api/chatapp-logout", "/api/chatapp-contact-list", "/api/chatapp-group-list"} {
			c.refused(path, map[string]any{"id": conn.ID}, "Connection is not logged in")
		}
		c.refused("/api/chatapp-check-on-chatapp", map[string]any{"id": conn.ID, "numbers": []string{"5511977776666"}}, "Connection is not logged in")

		var paired chatappRecord
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/pair", conn.ID), nil, &paired)
		if !paired.Logged || paired.UpdatedAt != "2026-11-22 14:01:01" {
			t.Fatalf("paired %+v", paired)
		}
		if p := c.list("?logged=true"); p.Total != 1 {
			t.Fatalf("logged list %+v", p)
		}
		c.refused("/api/chatapp-qrcode", map[string]any{"id": conn.ID, "os": "Linux", "browser": "Chrome"}, "Connection is already logged in")

		resp := c.post("/api/chatapp-logout", map[string]any{"key": conn.Key})
		if resp.Status != http.StatusOK || resp.Map(t)["message"] != "Connection logged out" {
			t.Fatalf("logout %d %s", resp.Status, resp.Body)
		}
		if p := c.list("?logged=false"); p.Total != 1 || p.Data[0].Logged {
			t.Fatalf("after logout %+v", p)
		}
		c.refused("/api/chatapp-logout", map[string]any{"id": conn.ID}, "Connection is not logged in")

		// Pair again, then the phone removes the device on its side.
		c.pair(conn.ID)
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/unlink", conn.ID), nil, nil)
		if p := c.list("?logged=true"); p.Total != 0 {
			t.Fatalf("still logged after the phone unlinked: %+v", p)
		}
	})
}

func TestConnectionContactsGroupsAndCheck(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, c := startConnections(t, db, apitest.Options{})
		conn := c.create("Sales", "5511988887777")
		c.pair(conn.ID)
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/contacts", conn.ID), map[string]any{"contacts": []map[string]any{
			{"key": "5521966665555", "name": "Bruno Lima"},
			{"key": "5511977776666", "name": "Ana Souza", "notify": "Ana"},
			{"key": "5511900000000", "name": "No account", "on_chatapp": false},
		}}, nil)
		var vip struct {
			Key string `json:"key"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"name": "Customers - VIP", "announce": true,
			"is_admin": true, "participants_count": 48}, &vip)
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"key": "120363025246125486", "name": "Old", "is_member": false}, nil)

		var contacts []struct {
			Key    string  `json:"key"`
			Name   string  `json:"name"`
			Notify *string `json:"notify"`
		}
		m := c.ok("/api/chatapp-contact-list", map[string]any{"key": conn.Key}, &contacts)
		if len(contacts) != 3 || contacts[0].Key != "5511900000000" || contacts[1].Name != "Ana Souza" || contacts[1].Notify == nil ||
			*contacts[1].Notify != "Ana" || contacts[2].Notify != nil || m["message"] != "3 contacts" {
			t.Fatalf("contacts %+v %v", contacts, m["message"])
		}
		var groups []struct {
			Key          string `json:"key"`
			Name         string `json:"name"`
			Announce     bool   `json:"announce"`
			IsAdmin      bool   `json:"is_admin"`
			Participants int    `json:"participants_count"`
		}
		c.ok("/api/chatapp-group-list", map[string]any{"id": conn.ID}, &groups)
		if len(groups) != 1 || groups[0].Key != vip.Key || !groups[0].Announce || !groups[0].IsAdmin || groups[0].Participants != 48 {
			t.Fatalf("groups %+v", groups)
		}

		var checks []struct {
			Number string  `json:"number"`
			Exists bool    `json:"exists"`
			Key    *string `json:"key"`
		}
		c.ok("/api/chatapp-check-on-chatapp", map[string]any{"id": conn.ID, "numbers": []string{"5511900000000", "5511977776666", "not-a-number"}}, &checks)
		if len(checks) != 3 || checks[0].Exists || checks[0].Key != nil || !checks[1].Exists || *checks[1].Key != "5511977776666" ||
			checks[2].Number != "not-a-number" || checks[2].Exists {
			t.Fatalf("checks %+v", checks)
		}
		c.ok("/api/chatapp-check-on-chatapp", map[string]any{"key": conn.Key, "numbers": []string{vip.Key, "120363025246125486"}, "are_groups": true}, &checks)
		if !checks[0].Exists || *checks[0].Key != vip.Key || checks[1].Exists {
			t.Fatalf("group checks %+v", checks)
		}
		c.refused("/api/chatapp-check-on-chatapp", map[string]any{"id": conn.ID}, "Numbers is required")
		c.refused("/api/chatapp-check-on-chatapp", map[string]any{"id": conn.ID, "numbers": []string{}}, "Numbers must be an array of 1 to 500 strings")
		c.refused("/api/chatapp-check-on-chatapp", map[string]any{"id": conn.ID, "numbers": "5511977776666"}, "Numbers must be an array of 1 to 500 strings")
	})
}

func TestSimulatorControlsNeedTheSimulator(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		// The real driver opens its session store in the same database; its
		// sessions need the chat app's servers, which the simulator
		// controls never reach: they do not exist then (404, as any unknown
		// path).
		h, c := startConnections(t, db, apitest.Options{Configure: func(cfg *config.Config) { cfg.ConnectorDriver = config.ConnectorWhatsmeow }})
		conn := c.create("Sales", "5511988887777")
		for _, path := range []string{"pair", "unlink", "messages"} {
			method := "POST"
			if path == "messages" {
				method = "GET"
			}
			resp := h.Do(apitest.Request{Method: method, Path: fmt.Sprintf("/api/chatapp-simulator/%d/%s", conn.ID, path), Token: c.token})
			if resp.Status != http.StatusNotFound || resp.Map(t)["message"] != "Not found." {
				t.Errorf("%s: %d %s, want 404", path, resp.Status, resp.Body)
			}
		}
		var n int
		if err := db.Bun.NewRaw("SELECT COUNT(*) FROM whatsmeow_device").Scan(t.Context(), &n); err != nil {
			t.Fatalf("the whatsmeow session store is not in the service's database: %v", err)
		}
	})
}
