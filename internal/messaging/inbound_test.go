package messaging

import "testing"

// TestNotAuthor: a far-side change applies only to a message of the same
// conversation by the one who made it. The cases the simulator cannot
// produce are here: a group message stored before its member was recorded,
// and keys written with a leading "+".
func TestNotAuthor(t *testing.T) {
	t.Parallel()
	const ana, bia, team = "5511977776666", "5511966665555", "120363025246125486"
	member := func(k string) *string { return &k }
	direct := func(source int) *messageRow {
		return &messageRow{ContactKey: ana, MessageSourceID: source}
	}
	inGroup := func(source int, sender *string) *messageRow {
		return &messageRow{ContactKey: team, IsGroup: true, MessageSourceID: source, SenderKey: sender}
	}
	for _, tc := range []struct {
		name    string
		row     *messageRow
		change  InboundChange
		applies bool
	}{
		{"the contact's own message", direct(SourceContact), InboundChange{ContactKey: "+" + ana, SenderKey: ana}, true},
		{"the company's message, changed by the contact", direct(SourceAPI), InboundChange{ContactKey: ana, SenderKey: ana}, false},
		{"the company's message, changed from the phone", direct(SourceAPI), InboundChange{ContactKey: ana, FromMe: true}, true},
		{"a message typed on the phone, changed from the phone", direct(SourceAttendant), InboundChange{ContactKey: ana, FromMe: true}, true},
		{"the contact's message, changed from the phone", direct(SourceContact), InboundChange{ContactKey: ana, FromMe: true}, false},
		{"another conversation's message", direct(SourceContact), InboundChange{ContactKey: bia, SenderKey: bia}, false},
		{"a direct message named from a group with the same key", direct(SourceContact), InboundChange{ContactKey: ana, IsGroup: true, SenderKey: ana}, false},
		{"the member's own group message", inGroup(SourceContact, member(ana)), InboundChange{ContactKey: team, IsGroup: true, SenderKey: "+" + ana}, true},
		{"another member's group message", inGroup(SourceContact, member(bia)), InboundChange{ContactKey: team, IsGroup: true, SenderKey: ana}, false},
		{"a group message stored before members were recorded", inGroup(SourceContact, nil), InboundChange{ContactKey: team, IsGroup: true, SenderKey: ana}, false},
		{"a change from a member the far side did not name", inGroup(SourceContact, member(ana)), InboundChange{ContactKey: team, IsGroup: true}, false},
		{"the company's group message, changed by a member", inGroup(SourceAPI, nil), InboundChange{ContactKey: team, IsGroup: true, SenderKey: ana}, false},
		{"the company's group message, changed from the phone", inGroup(SourceAPI, nil), InboundChange{ContactKey: team, IsGroup: true, FromMe: true}, true},
	} {
		if why := notAuthor(tc.row, tc.change); (why == "") != tc.applies {
			t.Errorf("%s: applies=%v (%q), want %v", tc.name, why == "", why, tc.applies)
		}
	}
}
