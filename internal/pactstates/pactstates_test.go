package pactstates_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/pactstates"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// Without PACT_PROVIDER_STATES=1 the endpoint does not exist: the same
// request that sets up a state on a gateway started with it answers 404
// (the API's own not-found) and creates nothing.
func TestEndpointAbsentWithoutTheSetting(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		cases := []struct {
			name    string
			enabled bool
			want    int
		}{
			{"PACT_PROVIDER_STATES unset", false, http.StatusNotFound},
			{"PACT_PROVIDER_STATES=1", true, http.StatusOK},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h := apitest.Start(t, db, apitest.Options{Configure: func(cfg *config.Config) { cfg.PactProviderStates = c.enabled }})
				before := companies(t, db)
				status, body := post(t, h.Server.URL, pactstates.Request{State: pactstates.StateCompany, Action: "setup"})
				if status != c.want {
					t.Fatalf("POST %s answered %d, want %d: %s", pactstates.Path, status, c.want, body)
				}
				if !c.enabled {
					if after := companies(t, db); after != before {
						t.Fatalf("companies went from %d to %d without the setting", before, after)
					}
					return
				}
				var got map[string]any
				if err := json.Unmarshal(body, &got); err != nil || got["token"] == "" || got["companyId"] == nil {
					t.Fatalf("setup answered %s", body)
				}
				status, body = post(t, h.Server.URL, pactstates.Request{State: pactstates.StateCompany, Action: "teardown",
					Params: map[string]any{"companyId": got["companyId"]}})
				if status != http.StatusOK {
					t.Fatalf("teardown answered %d: %s", status, body)
				}
			})
		}
	})
}

// Every state sets up (through the public API on a real gateway) and its
// teardown leaves every table with the rows it had before: a staging
// database is left as it was. The state's token works during the state and
// no longer afterwards.
func TestStatesLeaveTheDatabaseAsItWas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true, Configure: func(cfg *config.Config) { cfg.PactProviderStates = true }})
		// Data that is not the states': a company of its own must survive.
		other := h.Tenant("Existing customer")
		before := rowCounts(t, db)
		for _, name := range pactstates.Names() {
			t.Run(name, func(t *testing.T) {
				status, body := post(t, h.Server.URL, pactstates.Request{State: name, Action: "setup"})
				if status != http.StatusOK {
					t.Fatalf("setup answered %d: %s", status, body)
				}
				var values map[string]any
				if err := json.Unmarshal(body, &values); err != nil {
					t.Fatal(err)
				}
				token, _ := values["token"].(string)
				if got := tokenStatus(t, h.Server.URL, token); got != http.StatusOK && got != http.StatusForbidden {
					t.Fatalf("the state's token answered %d during the state", got)
				}
				status, body = post(t, h.Server.URL, pactstates.Request{State: name, Action: "teardown",
					Params: map[string]any{"params": map[string]any{"companyId": values["companyId"]}}})
				if status != http.StatusOK {
					t.Fatalf("teardown answered %d: %s", status, body)
				}
				if got := tokenStatus(t, h.Server.URL, token); got != http.StatusUnauthorized {
					t.Fatalf("the state's token answered %d after teardown, want 401", got)
				}
			})
		}
		after := rowCounts(t, db)
		var diff []string
		for table, n := range after {
			if before[table] != n && !bookkeeping(table) {
				diff = append(diff, fmt.Sprintf("%s: %d → %d", table, before[table], n))
			}
		}
		if len(diff) > 0 {
			t.Fatalf("the states left rows behind:\n%s", strings.Join(diff, "\n"))
		}
		if got := tokenStatus(t, h.Server.URL, other.Token); got != http.StatusOK {
			t.Fatalf("the existing company's token answered %d", got)
		}
	})
}

// Teardown deletes only companies the states created.
func TestTeardownRefusesOtherCompanies(t *testing.T) {
	db := storetest.SQLite(t)
	h := apitest.Start(t, db, apitest.Options{Configure: func(cfg *config.Config) { cfg.PactProviderStates = true }})
	other := h.Tenant("Existing customer")
	status, body := post(t, h.Server.URL, pactstates.Request{State: pactstates.StateCompany, Action: "teardown",
		Params: map[string]any{"companyId": other.CompanyID}})
	if status != http.StatusNotFound {
		t.Fatalf("teardown of a company the states did not create answered %d: %s", status, body)
	}
	if got := tokenStatus(t, h.Server.URL, other.Token); got != http.StatusOK {
		t.Fatalf("its token answered %d afterwards", got)
	}
}

func post(t *testing.T, base string, req pactstates.Request) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(base+pactstates.Path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

func tokenStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/channel-webhooks", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func companies(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.Bun.NewRaw("SELECT count(*) FROM companies").Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// rowCounts counts the rows of every table of the database.
func rowCounts(t *testing.T, db *store.DB) map[string]int {
	t.Helper()
	ctx := context.Background()
	var tables []string
	q := "SELECT name FROM sqlite_master WHERE type = 'table'"
	if db.Dialect == store.Postgres {
		q = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
	}
	if err := db.Bun.NewRaw(q).Scan(ctx, &tables); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, table := range tables {
		var n int
		if err := db.Bun.NewRaw(`SELECT count(*) FROM "`+table+`"`).Scan(ctx, &n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// bookkeeping tables are not data a state leaves behind: autoincrement
// counters, and River's job rows, which River itself deletes once finished
// (its completed-job retention).
func bookkeeping(table string) bool {
	return table == "sqlite_sequence" || strings.HasPrefix(table, "river_")
}
