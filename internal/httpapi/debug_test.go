package httpapi_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/httpapi"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestTuningFiguresOnlyOnTheDebugListener: the figures that tune the
// service are not on the operator's /metrics, and the debug listener
// serves them.
func TestTuningFiguresOnlyOnTheDebugListener(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		const tuning = "gateway_messages_sent_outcomes_per_write"
		public, err := h.App.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range public {
			if f.GetName() == tuning {
				t.Errorf("%s is on /metrics", tuning)
			}
		}
		srv := httptest.NewServer(httpapi.DebugHandler(h.App.DebugRegistry))
		defer srv.Close()
		resp, err := srv.Client().Get(srv.URL + "/debug/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), tuning) {
			t.Errorf("/debug/metrics: %d, %s missing", resp.StatusCode, tuning)
		}
	})
}
