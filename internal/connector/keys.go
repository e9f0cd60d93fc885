package connector

import (
	"regexp"
	"strings"

	"github.com/chatmsg/gateway/internal/fault"
)

// Keys as clients write them: a contact is a number with country code,
// digits only; a group is "number-digits" (older groups: creator number and
// creation time) or a plain run of digits (newer groups, 18 digits today).
// Clients never need the chat app's suffixes; when one is sent anyway
// (@s.whatsapp.net, @c.us, @g.us) it is accepted and dropped.

var (
	numberKey     = regexp.MustCompile(`^[1-9][0-9]{7,14}$`)
	groupKeyPair  = regexp.MustCompile(`^[1-9][0-9]{7,14}-[0-9]{6,12}$`)
	groupKeyPlain = regexp.MustCompile(`^[1-9][0-9]{9,24}$`)
	lidKey        = regexp.MustCompile(`^[1-9][0-9]{5,24}$`)
)

// Messages of the Invalid faults key normalisation returns.
const (
	MsgBadNumber   = "Contact key must be a number with country code, digits only"
	MsgBadGroupKey = "Group key must be number-digits or a plain group number"
)

// stripSuffix drops a known server suffix and a device part ("…:12@…").
func stripSuffix(raw string) (key, server string) {
	key = strings.TrimSpace(raw)
	if i := strings.LastIndexByte(key, '@'); i >= 0 {
		key, server = key[:i], strings.ToLower(key[i+1:])
	}
	if i := strings.IndexByte(key, ':'); i >= 0 {
		key = key[:i]
	}
	return strings.TrimPrefix(key, "+"), server
}

// LIDServer is the suffix of a contact known only by its LID (the chat
// app's hidden user id): such a key keeps its suffix, because its digits
// are not a phone number.
const LIDServer = "lid"

// NormalizeNumber returns the digits of a contact number (or "<lid>@lid"
// for a contact known only by its LID), or an Invalid fault.
func NormalizeNumber(raw string) (string, error) {
	key, server := stripSuffix(raw)
	if server == LIDServer {
		if !lidKey.MatchString(key) {
			return "", fault.New(fault.Invalid, MsgBadNumber)
		}
		return key + "@" + LIDServer, nil
	}
	if server != "" && server != "s.whatsapp.net" && server != "c.us" {
		return "", fault.New(fault.Invalid, MsgBadNumber)
	}
	if !numberKey.MatchString(key) {
		return "", fault.New(fault.Invalid, MsgBadNumber)
	}
	return key, nil
}

// NormalizeGroupKey returns a group key without suffix, or an Invalid fault.
func NormalizeGroupKey(raw string) (string, error) {
	key, server := stripSuffix(raw)
	if server != "" && server != "g.us" {
		return "", fault.New(fault.Invalid, MsgBadGroupKey)
	}
	if !groupKeyPair.MatchString(key) && !groupKeyPlain.MatchString(key) {
		return "", fault.New(fault.Invalid, MsgBadGroupKey)
	}
	return key, nil
}

// ParseChat normalises a recipient key as the send endpoint receives it.
func ParseChat(raw string, isGroup bool) (Chat, error) {
	if isGroup {
		k, err := NormalizeGroupKey(raw)
		return Chat{Key: k, IsGroup: true}, err
	}
	k, err := NormalizeNumber(raw)
	return Chat{Key: k}, err
}

// BrazilianMobile reports a Brazilian mobile number written with the ninth
// digit (55, a two-digit area code, 9 and eight digits): the chat app may
// know it registered without that digit.
func BrazilianMobile(num string) bool {
	return len(num) == 13 && strings.HasPrefix(num, "55") && num[4] == '9' && numberKey.MatchString(num)
}

// WithoutNinthDigit is num without its ninth digit (BrazilianMobile).
func WithoutNinthDigit(num string) string {
	if !BrazilianMobile(num) {
		return num
	}
	return num[:4] + num[5:]
}
