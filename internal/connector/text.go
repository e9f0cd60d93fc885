package connector

import (
	"fmt"
	"regexp"
	"strings"
)

// Readable texts of the message kinds that are not text: both drivers
// write them the same way, so a client reads one wording whichever driver
// runs.

// LocationText is a pin as text: its name and address, and the
// coordinates that make it a place.
func LocationText(name, address string, lat, lng float64) string {
	var label []string
	for _, v := range []string{name, address} {
		if v = strings.TrimSpace(v); v != "" {
			label = append(label, v)
		}
	}
	coords := fmt.Sprintf("%.6f,%.6f", lat, lng)
	if len(label) == 0 {
		return "Location: " + coords
	}
	return "Location: " + strings.Join(label, ", ") + " (" + coords + ")"
}

var vcardTel = regexp.MustCompile(`(?m)^TEL[^:\r\n]*:([^\r\n]+)`)

// ContactText is a shared contact card as text: the name and its numbers.
func ContactText(name, vcard string) string {
	var tels []string
	for _, m := range vcardTel.FindAllStringSubmatch(vcard, -1) {
		tels = append(tels, strings.TrimSpace(m[1]))
	}
	if name == "" {
		name = "unnamed"
	}
	if len(tels) == 0 {
		return name
	}
	return name + " (" + strings.Join(tels, ", ") + ")"
}

// ContactCardText is the text of one shared contact card.
func ContactCardText(name, vcard string) string { return "Contact: " + ContactText(name, vcard) }

// ContactsText is the text of several shared cards (ContactText each).
func ContactsText(cards []string) string { return "Contacts: " + strings.Join(cards, "; ") }

// ReactionText is a reaction as text; an empty emoji removes one.
func ReactionText(emoji string) string {
	if emoji == "" {
		return "Removed a reaction"
	}
	return "Reacted " + emoji
}

// PollText is a poll as text: its question and options.
func PollText(question string, options []string) string {
	return "Poll: " + question + " (" + strings.Join(options, " / ") + ")"
}
