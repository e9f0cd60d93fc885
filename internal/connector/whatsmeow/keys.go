package whatsmeow

import (
	"strings"

	"go.mau.fi/whatsmeow/types"

	"github.com/chatmsg/gateway/internal/connector"
)

// Keys are what clients write (connector.ParseChat); JIDs are what the
// library speaks. Contacts live on the user server (@s.whatsapp.net),
// groups on the group server (@g.us); the library may also name a user by
// a LID (@lid), which only the session's LID map turns back into a number.

// ChatJID is the library identifier of a recipient.
func ChatJID(chat connector.Chat) (types.JID, error) {
	c, err := connector.ParseChat(chat.Key, chat.IsGroup)
	if err != nil {
		return types.JID{}, err
	}
	if c.IsGroup {
		return types.NewJID(c.Key, types.GroupServer), nil
	}
	if lid, ok := strings.CutSuffix(c.Key, "@"+connector.LIDServer); ok {
		return types.NewJID(lid, types.HiddenUserServer), nil
	}
	return types.NewJID(c.Key, types.DefaultUserServer), nil
}

// ChatOf is the recipient a library identifier names; ok is false for
// servers that are neither a user nor a group (broadcast, newsletter, LID).
func ChatOf(jid types.JID) (connector.Chat, bool) {
	switch jid.Server {
	case types.DefaultUserServer, types.LegacyUserServer:
		return connector.Chat{Key: jid.User}, jid.User != ""
	case types.GroupServer:
		return connector.Chat{Key: jid.User, IsGroup: true}, jid.User != ""
	}
	return connector.Chat{}, false
}

// DeviceRef is how connections stores a paired device: its full JID
// (number, device number and server).
func DeviceRef(jid types.JID) string { return jid.String() }

// ParseDeviceRef reads a stored device ref back.
func ParseDeviceRef(ref string) (types.JID, error) { return types.ParseJID(ref) }

// phoneOf is the number behind a user JID, or "" when only a LID is known
// and resolve (the session's LID map) cannot turn it into one.
func phoneOf(jid, alt types.JID, resolve func(types.JID) (types.JID, bool)) string {
	for _, j := range []types.JID{jid, alt} {
		if j.Server == types.DefaultUserServer || j.Server == types.LegacyUserServer {
			return j.User
		}
	}
	if jid.Server == types.HiddenUserServer && resolve != nil {
		if pn, ok := resolve(jid.ToNonAD()); ok {
			return pn.User
		}
	}
	return ""
}

// phoneQuery is how IsOnWhatsApp wants a number.
func phoneQuery(number string) string { return "+" + strings.TrimPrefix(number, "+") }
