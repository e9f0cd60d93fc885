package official

import (
	"regexp"
	"strings"

	"github.com/chatmsg/gateway/internal/fault"
)

// Contact keys on the official channel are the recipient's number as the
// provider addresses it: country code and digits, nothing else. Clients
// often write numbers formatted for people ("+55 (11) 97777-6666"); the
// formatting is dropped so that every spelling is one conversation.

// MsgBadNumber is the message of the Invalid fault for a contact key that
// is not a phone number.
const MsgBadNumber = "Contact key must be a number with country code, digits only"

// MsgBadGroupKey is the message of the Invalid fault for an empty group key.
const MsgBadGroupKey = "Group key is required"

var (
	// numberFormatting is what people put between the digits of a number.
	numberFormatting = strings.NewReplacer("+", "", " ", "", "-", "", "(", "", ")", "", ".", "")
	// e164 is a number with country code: at most 15 digits, no leading 0.
	e164 = regexp.MustCompile(`^[1-9][0-9]{7,14}$`)
)

// NormalizeContactKey implements messaging.KeyNormalizer: a contact's
// number reduced to its digits. Group keys are the provider's own ids and
// pass trimmed (the provider decides whether it serves groups).
// Errors: Invalid for a key that is not a number with country code.
func (t *Transport) NormalizeContactKey(key string, isGroup bool) (string, error) {
	key = strings.TrimSpace(key)
	if isGroup {
		if key == "" {
			return "", fault.New(fault.Invalid, MsgBadGroupKey)
		}
		return key, nil
	}
	digits := numberFormatting.Replace(key)
	if !e164.MatchString(digits) {
		return "", fault.New(fault.Invalid, MsgBadNumber)
	}
	return digits, nil
}
