package loadtest

import (
	"reflect"
	"testing"
)

// TestCheckSends: each broken guarantee is counted, and only that one.
func TestCheckSends(t *testing.T) {
	stored := func(ids ...string) func(string) []SentEvent {
		return func(string) []SentEvent {
			out := []SentEvent{{ExternalID: ""}} // the "stored, not yet sent" event
			for _, id := range ids {
				out = append(out, SentEvent{ExternalID: id})
			}
			return out
		}
	}
	handed := func(text string, ids ...string) []HandedOver {
		var out []HandedOver
		for _, id := range ids {
			out = append(out, HandedOver{ProviderID: id, Text: text})
		}
		return out
	}
	tests := []struct {
		name   string
		sends  []SendOutcome
		handed []HandedOver
		events func(string) []SentEvent
		want   SendVerdict
	}{
		{"queued send delivered once and stored", []SendOutcome{{Text: "a"}}, handed("a", "p1"), stored("p1"),
			SendVerdict{Accepted: 1, Reached: 1}},
		{"a send of a company that listens to no event, counted as such", []SendOutcome{{Text: "a", Unheard: true}}, handed("a", "p1"), stored("p1"),
			SendVerdict{Accepted: 1, Unheard: 1, Reached: 1}},
		{"accepted, never handed over", []SendOutcome{{Text: "a"}}, nil, stored(),
			SendVerdict{Accepted: 1, Lost: 1, LostTexts: []string{"a"}}},
		{"handed over twice, the second id overwrote the first", []SendOutcome{{Text: "a"}}, handed("a", "p1", "p2"), stored("p2"),
			SendVerdict{Accepted: 1, Reached: 1, Duplicates: 1, Overwritten: 1, NotStored: 1}},
		{"handed over twice, first id kept", []SendOutcome{{Text: "a"}}, handed("a", "p1", "p2"), stored("p1"),
			SendVerdict{Accepted: 1, Reached: 1, Duplicates: 1}},
		{"stored without the provider id", []SendOutcome{{Text: "a"}}, handed("a", "p1"), stored(),
			SendVerdict{Accepted: 1, Reached: 1, NotStored: 1, Awaiting: 1}},
		{"sync answer with the provider's id", []SendOutcome{{Text: "a", Sync: true, ExternalID: "p1"}}, handed("a", "p1"), stored("p1"),
			SendVerdict{Accepted: 1, Reached: 1}},
		{"sync answer with another id", []SendOutcome{{Text: "a", Sync: true, ExternalID: "p9"}}, handed("a", "p1"), stored("p1"),
			SendVerdict{Accepted: 1, Reached: 1, SyncIDBad: 1}},
		{"no answer, not handed over: unknown, not lost", []SendOutcome{{Text: "a", Answer: "transport"}}, nil, stored(),
			SendVerdict{Unanswered: 1}},
		{"no answer, handed over twice: still a duplicate", []SendOutcome{{Text: "a", Answer: "transport"}}, handed("a", "p1", "p2"), stored(),
			SendVerdict{Unanswered: 1, Duplicates: 1}},
		{"500 after the provider accepted", []SendOutcome{{Text: "a", Answer: "500", Sync: true}}, handed("a", "p1"), stored("p1"),
			SendVerdict{Unanswered: 1, ErrorButDelivered: 1}},
		{"accepted before the transport forgot: not lost", []SendOutcome{{Text: "a", Partial: true}}, nil, stored(),
			SendVerdict{Accepted: 1, Partial: 1}},
		{"accepted before the transport forgot, handed over twice since", []SendOutcome{{Text: "a", Partial: true}}, handed("a", "p1", "p2"), stored(),
			SendVerdict{Accepted: 1, Partial: 1, Duplicates: 1}},
		{"refused and not handed over", []SendOutcome{{Text: "a", Answer: "429"}}, nil, stored(), SendVerdict{}},
		{"refused yet handed over", []SendOutcome{{Text: "a", Answer: "509"}}, handed("a", "p1"), stored(),
			SendVerdict{ErrorButDelivered: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckSends(tt.sends, tt.handed, tt.events)
			got.Problems = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if (got.Violations() == 0) != (tt.want.Violations() == 0) {
				t.Errorf("violations %d", got.Violations())
			}
		})
	}
}

func TestMissingLogRows(t *testing.T) {
	tests := []struct {
		name   string
		acked  map[string]int
		logged map[string]bool
		want   []string
	}{
		{"all logged", map[string]int{"a": 1, "b": 2}, map[string]bool{"a": true, "b": true, "c": true}, nil},
		{"one missing", map[string]int{"a": 1, "b": 1}, map[string]bool{"a": true}, []string{"b"}},
		{"none logged", map[string]int{"b": 1, "a": 1}, nil, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MissingLogRows(tt.acked, tt.logged); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChaosReportVerdict: every broken guarantee fails the suite; at-least-
// once webhook duplicates and unanswered requests do not.
func TestChaosReportVerdict(t *testing.T) {
	tests := []struct {
		name       string
		rep        ChaosReport
		violations int
		pending    bool
	}{
		{"clean, with tolerated duplicates and unanswered sends",
			ChaosReport{Sends: SendVerdict{Accepted: 5, Reached: 5, Unanswered: 3}, Events: EventTally{Expected: 4, Received: 4, Duplicates: 2}}, 0, false},
		{"a lost send", ChaosReport{Sends: SendVerdict{Lost: 1}}, 1, true},
		{"a send whose event has not come", ChaosReport{Chatapp: SendVerdict{NotStored: 1, Awaiting: 1}}, 1, true},
		{"a send stored with another id", ChaosReport{Sends: SendVerdict{NotStored: 1, Overwritten: 1}}, 2, false},
		{"a duplicate send", ChaosReport{Sends: SendVerdict{Duplicates: 1, Overwritten: 1}}, 2, false},
		{"a lost event", ChaosReport{Events: EventTally{Lost: 2}}, 1, true},
		{"a refused delivery", ChaosReport{Events: EventTally{Rejected: 1}}, 1, false},
		{"a delivery without its log row", ChaosReport{MissingLogRows: 3}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rep.Violations(); len(got) != tt.violations {
				t.Errorf("violations %q, want %d", got, tt.violations)
			}
			if got := tt.rep.pending() > 0; got != tt.pending {
				t.Errorf("pending %v, want %v", got, tt.pending)
			}
		})
	}
}
