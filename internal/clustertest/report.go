package clustertest

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/chatmsg/gateway/internal/loadtest"
)

// Report is what the suite found.
type Report struct {
	Replicas          int                  `json:"replicas"`
	OldCommit         string               `json:"old_commit"`
	MigrationsApplied int                  `json:"migrations_applied_by_upgrade"`
	Faults            []*faultCost         `json:"faults"`
	Answers           map[string]int       `json:"answers"`
	Sends             loadtest.SendVerdict `json:"sends"`
	Chatapp           loadtest.SendVerdict `json:"chatapp"`
	Events            loadtest.EventTally  `json:"events"`
	EventsAccepted    int                  `json:"events_accepted"`
	Deliveries        int                  `json:"deliveries_acknowledged"`
	MissingLogRows    int                  `json:"deliveries_without_log_row"`
	Uploads           int                  `json:"uploads"`
	OldUploads        int                  `json:"uploads_by_old_binary"`
	MediaUnserved     int                  `json:"media_reads_failed"`
	MostPerMinute     int                  `json:"most_sends_in_60s_one_company"`
	Settled           bool                 `json:"settled"`
	SettledIn         float64              `json:"settled_in_s"`
	Seconds           float64              `json:"seconds"`
	Other             []string             `json:"violations,omitempty"`
	// LostRows are the stored rows of the sends the last check found lost.
	LostRows []string `json:"lost_rows,omitempty"`
}

func (r *Report) violation(s string) { r.Other = append(r.Other, s) }

func (r *Report) pending() int {
	return r.Sends.Lost + r.Sends.Awaiting + r.Chatapp.Lost + r.Chatapp.Awaiting + r.Events.Lost + r.MissingLogRows
}

// Violations lists every broken guarantee (empty: the suite passed).
func (r *Report) Violations() []string {
	var out []string
	add := func(n int, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Sends.Lost, "accepted sends not handed to the provider")
	add(r.Sends.Duplicates, "sends handed to the provider more than once")
	add(r.Sends.SyncIDBad, "synchronous sends answered with an id the provider did not issue for them")
	add(r.Sends.NotStored, "sends not stored with the provider's id")
	add(r.Sends.Overwritten, "sends whose provider id was overwritten")
	add(r.Sends.ErrorButDelivered, "sends answered with an error although the provider received them")
	add(r.Chatapp.Lost, "accepted chat-app sends not handed to the chat app")
	add(r.Chatapp.Duplicates, "chat-app sends handed to the chat app more than once")
	add(r.Chatapp.SyncIDBad, "synchronous chat-app sends answered with an id the chat app did not issue for them")
	add(r.Chatapp.NotStored, "chat-app sends not stored with the chat app's id")
	add(r.Chatapp.Overwritten, "chat-app sends whose id was overwritten")
	add(r.Chatapp.ErrorButDelivered, "chat-app sends answered with an error although the chat app received them")
	add(r.Events.Lost, "accepted events that did not reach every endpoint")
	add(r.Events.Rejected, "deliveries the receiver refused")
	add(r.MissingLogRows, "deliveries acknowledged without a successful log row")
	return append(out, r.Other...)
}

// WriteText prints the report.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "cluster suite: %d replicas in network namespaces behind HAProxy, %.0f s\n", r.Replicas, r.Seconds)
	fmt.Fprintf(w, "  %-42s %8s %8s %10s %12s  %s\n", "fault", "failed", "requests", "recover_s", "sessions_s", "note")
	for _, f := range r.Faults {
		move := "-"
		if f.Sessions > 0 {
			move = fmt.Sprintf("%.1f (%d)", f.SessionsMove, f.Sessions)
		}
		fmt.Fprintf(w, "  %-42s %8d %8d %10.1f %12s  %s\n", f.Name, f.Failed, f.Requests, f.RecoverS, move, f.Note)
	}
	var kinds []string
	for k := range r.Answers {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Answers[k]))
	}
	fmt.Fprintf(w, "  answers: %s\n", strings.Join(parts, " "))
	s := r.Sends
	fmt.Fprintf(w, "  official sends: %d accepted, %d unanswered/5xx, %d reached the provider, %d lost, %d duplicates\n",
		s.Accepted, s.Unanswered, s.Reached, s.Lost, s.Duplicates)
	s = r.Chatapp
	fmt.Fprintf(w, "  chat-app sends: %d accepted (%d before the last session move: checked for duplicates only), %d unanswered/5xx, %d reached, %d lost, %d duplicates\n",
		s.Accepted, s.Partial, s.Unanswered, s.Reached, s.Lost, s.Duplicates)
	fmt.Fprintf(w, "  events: %d accepted, %d expected receipts, %d received, %d lost; %d deliveries acknowledged, %d without a log row\n",
		r.EventsAccepted, r.Events.Expected, r.Events.Received, r.Events.Lost, r.Deliveries, r.MissingLogRows)
	fmt.Fprintf(w, "  media: %d uploads after the upgrade, each read from every replica: %d failed (%d uploads by the old binary, which kept them on its own disk, not checked)\n",
		r.Uploads, r.MediaUnserved, r.OldUploads)
	fmt.Fprintf(w, "  most sends of one company at the provider in 60 s: %d (limit 600)\n", r.MostPerMinute)
	fmt.Fprintf(w, "  rolling upgrade from %s: %d migration(s) applied by the new replica\n", r.OldCommit, r.MigrationsApplied)
	fmt.Fprintf(w, "  settled: %v after %.0f s\n", r.Settled, r.SettledIn)
	for _, p := range append(r.Sends.Problems, r.Chatapp.Problems...) {
		fmt.Fprintf(w, "    %s\n", p)
	}
	for _, row := range r.LostRows {
		fmt.Fprintf(w, "    %s\n", row)
	}
	if v := r.Violations(); len(v) > 0 {
		fmt.Fprintf(w, "FAIL: %s\n", strings.Join(v, "; "))
	} else {
		fmt.Fprintln(w, "PASS")
	}
}
