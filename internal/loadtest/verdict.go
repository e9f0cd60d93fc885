package loadtest

import (
	"fmt"
	"sort"
)

// SendOutcome is what the client learnt of one send.
type SendOutcome struct {
	Text string
	// Answer is "" for 2xx, else the status or "transport" (no answer: the
	// gateway may or may not have accepted it).
	Answer string
	// Sync is a synchronous send; ExternalID is the provider id its 2xx
	// answer carried.
	Sync       bool
	ExternalID string
	// Unheard: the company listens to no message event, so no event
	// carries the id the send stored (the fault suite reads it from the
	// database).
	Unheard bool
	// Partial: the transport's record may not cover this send's whole life
	// (the chat-app simulator forgets what it received when the gateway's
	// process ends). Only duplicates and error answers are checked for it.
	Partial bool
}

// HandedOver is one message the provider simulator received.
type HandedOver struct {
	ProviderID string
	Text       string
	// MessageID is the gateway's message id (biz_opaque_callback_data).
	MessageID string
}

// SendVerdict counts what went wrong with sends.
type SendVerdict struct {
	Accepted   int `json:"accepted"`   // answered 2xx
	Unanswered int `json:"unanswered"` // no answer or 5xx: may or may not have been accepted
	Reached    int `json:"reached"`    // accepted and handed to the provider
	Partial    int `json:"partial"`    // accepted, the transport's record may have forgotten it
	// Unheard: the part of Accepted sent by companies that listen to no
	// message event (their stored ids are read from the database).
	Unheard int `json:"unheard"`
	Lost    int `json:"lost"` // accepted, never handed to the provider
	// LostTexts are the texts of the lost sends, for the report to show
	// what their rows say.
	LostTexts  []string `json:"lost_texts,omitempty"`
	Duplicates int      `json:"duplicates"`  // hand-overs beyond the first of one send
	SyncIDBad  int      `json:"sync_id_bad"` // a synchronous 2xx whose ExternalID the provider never issued for it
	// NotStored: handed over, but no omnichat.message.sent event carries
	// the provider's id for it: the stored message does not record the
	// hand-over (or its event was lost).
	NotStored int `json:"not_stored"`
	// Awaiting: the part of NotStored for which no event carries any
	// other id either; its event may still be on its way.
	Awaiting int `json:"awaiting_event"`
	// Overwritten: an event carries another provider id than the first
	// one the provider issued (a second hand-over replaced it).
	Overwritten int `json:"overwritten"`
	// ErrorButDelivered: answered with an error (5xx, or a refusal), yet
	// handed to the provider; a client retry would send it again.
	ErrorButDelivered int      `json:"error_but_delivered"`
	Problems          []string `json:"problems,omitempty"`
}

// maxProblems bounds the examples a verdict lists.
const maxProblems = 20

func (v *SendVerdict) problem(format string, args ...any) {
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// Violations is the number of broken guarantees.
func (v SendVerdict) Violations() int {
	return v.Lost + v.Duplicates + v.SyncIDBad + v.NotStored + v.Overwritten + v.ErrorButDelivered
}

// CheckSends compares what clients were answered with what the provider
// received and what the gateway reported through its events: every
// accepted send reached the provider exactly once and is stored with the
// provider's id; no send reached it twice, answered or not.
func CheckSends(sends []SendOutcome, handed []HandedOver, events func(text string) []SentEvent) SendVerdict {
	byText := map[string][]HandedOver{}
	for _, h := range handed {
		byText[h.Text] = append(byText[h.Text], h)
	}
	var v SendVerdict
	for _, s := range sends {
		got := byText[s.Text]
		if n := len(got); n > 1 {
			v.Duplicates += n - 1
			v.problem("%q handed to the transport %d times (transport ids %v, gateway message ids %v)", s.Text, n, providerIDs(got), messageIDs(got))
		}
		switch {
		case s.Answer == "":
			v.Accepted++
			if s.Unheard {
				v.Unheard++
			}
		case s.Answer == "transport":
			v.Unanswered++
			continue
		case s.Answer[0] == '5' && s.Answer != "509": // 509 is the API document's business refusal
			v.Unanswered++
			if len(got) > 0 {
				v.ErrorButDelivered++
				v.problem("%q answered %s but was handed to the transport", s.Text, s.Answer)
			}
			continue
		default:
			if len(got) > 0 {
				v.ErrorButDelivered++
				v.problem("%q answered %s (refused) but was handed to the transport", s.Text, s.Answer)
			}
			continue
		}
		if s.Partial {
			v.Partial++
			continue
		}
		if len(got) == 0 {
			v.Lost++
			v.LostTexts = append(v.LostTexts, s.Text)
			v.problem("%q accepted but not handed to the transport (within the bound)", s.Text)
			continue
		}
		v.Reached++
		first := got[0].ProviderID
		if s.Sync && s.ExternalID != first {
			v.SyncIDBad++
			v.problem("%q answered ExternalID %q, the transport issued %q", s.Text, s.ExternalID, first)
		}
		stored, other := false, ""
		for _, e := range events(s.Text) {
			switch e.ExternalID {
			case "":
			case first:
				stored = true
			default:
				other = e.ExternalID
			}
		}
		if other != "" {
			v.Overwritten++
			v.problem("%q: the transport issued %q, an event carries %q", s.Text, first, other)
		}
		if !stored {
			v.NotStored++
			if other == "" {
				v.Awaiting++
			}
			v.problem("%q: no omnichat.message.sent carries the transport's id %q", s.Text, first)
		}
	}
	return v
}

func providerIDs(hs []HandedOver) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ProviderID
	}
	return out
}

// messageIDs are the gateway's message ids of hand-overs, where the
// transport echoes them (providersim: biz_opaque_callback_data; the
// chat-app simulator does not show them).
func messageIDs(hs []HandedOver) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.MessageID
		if out[i] == "" {
			out[i] = "?"
		}
	}
	return out
}

// MissingLogRows returns the delivery ids a receiver acknowledged that
// have no successful attempt in the gateway's delivery log.
func MissingLogRows(acknowledged map[string]int, logged map[string]bool) []string {
	var out []string
	for id := range acknowledged {
		if !logged[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
