package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// TestEveryOperationRequiresItsPermission walks every secured operation of
// the document: a token without its x-permission (none at all, or every
// other one) gets 403, a token with just that permission or with `all` gets
// past the check. The requests carry no body, so those that pass stop at
// validation or "not found" and change nothing.
func TestEveryOperationRequiresItsPermission(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		admin := h.Tenant("Acme")
		ctx := context.Background()
		token := func(t *testing.T, perms []string) string {
			t.Helper()
			raw, _, err := h.App.Auth.CreateToken(ctx, admin.UserID, "perm-test", perms, 0)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		none := token(t, nil)
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				if op.Security != nil && len(*op.Security) == 0 {
					continue // public: no token, no permission
				}
				t.Run(method+" "+path, func(t *testing.T) {
					perm, _ := op.Extensions["x-permission"].(string)
					if perm == "" {
						t.Error("no x-permission")
						return
					}
					others := slices.DeleteFunc(slices.Clone(auth.AllPermissions), func(p string) bool { return p == perm })
					cases := []struct {
						name      string
						token     string
						forbidden bool
					}{
						{"no permission", none, true},
						{"every other permission", token(t, others), true},
						{"only " + perm, token(t, []string{perm}), false},
						{"all", admin.Token, false},
					}
					url := strings.NewReplacer("{id}", "999999").Replace(path)
					for _, tc := range cases {
						t.Run(tc.name, func(t *testing.T) {
							resp := h.Do(apitest.Request{Method: method, Path: url, Token: tc.token})
							if got := resp.Status == http.StatusForbidden; got != tc.forbidden {
								t.Errorf("status %d (%s)", resp.Status, resp.Body)
							}
							if tc.forbidden && string(resp.Body) != "{\"message\":\"This action is unauthorized.\"}\n" {
								t.Errorf("body %s", resp.Body)
							}
						})
					}
				})
			}
		}
	})
}

// TestOperationsNeedOnlyTheirPermission: a token holding nothing but an
// operation's x-permission completes it, so no handler asks for a
// permission of its own on top of the document's.
func TestOperationsNeedOnlyTheirPermission(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ofcSeedTemplates(t, e)
		only := func(t *testing.T, perm string) string {
			t.Helper()
			raw, _, err := e.h.App.Auth.CreateToken(context.Background(), e.ten.UserID, "only "+perm, []string{perm}, 0)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		cases := []struct {
			perm   string
			req    apitest.Request
			status int
		}{
			{auth.PermTemplatesUpload, apitest.Request{Method: "POST", Path: "/api/provider-templates/upload-send-media",
				Form:      map[string]string{"provider_account_id": strconv.FormatInt(e.ch.ProviderAccount.ID, 10)},
				FileField: "file", FileName: "a.png", FileType: "image/png", FileContent: pngImage(t, 4, 4)}, http.StatusOK},
			{auth.PermTemplatesView, apitest.Request{Method: "GET",
				Path: "/api/provider-templates/for-channel?company_channel_id=" + strconv.FormatInt(e.ch.ID, 10)}, http.StatusOK},
			{auth.PermEventsPublish, apitest.Request{Method: "POST", Path: "/api/events", JSON: map[string]any{"event": "contact.import.completed",
				"data": map[string]any{"import_id": "imp-1", "total_contacts": 1, "imported_contacts": 1, "skipped_contacts": 0,
					"failed_contacts": 0, "started_by_user_id": e.ten.UserID, "completed_at": "2026-11-22T09:00:00-03:00"}}}, http.StatusAccepted},
			{auth.PermCompanyChannelsView, apitest.Request{Method: "GET", Path: "/api/company-channels"}, http.StatusOK},
			{auth.PermConversationsView, apitest.Request{Method: "GET", Path: "/api/contact-channels"}, http.StatusOK},
			{auth.PermConnectionsView, apitest.Request{Method: "GET", Path: "/api/chatapps"}, http.StatusOK},
		}
		for _, tc := range cases {
			t.Run(tc.perm, func(t *testing.T) {
				tc.req.Token = only(t, tc.perm)
				if resp := e.h.Do(tc.req); resp.Status != tc.status {
					t.Errorf("%s %s: %d %s, want %d", tc.req.Method, tc.req.Path, resp.Status, resp.Body, tc.status)
				}
			})
		}
	})
}
