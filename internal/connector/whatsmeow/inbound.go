package whatsmeow

import (
	"strings"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/msgtype"
)

// Parsed is what one library message event means for the gateway: a
// message to store (In, with Media to download first), a change of a
// stored one (Change), or nothing (Skip says why).
type Parsed struct {
	In     connector.Inbound
	Change *connector.Change
	Media  wa.DownloadableMessage
	Skip   string
}

// Why events are skipped.
const (
	SkipProtocol  = "protocol-only message"
	SkipBroadcast = "status or broadcast"
	SkipChat      = "neither a contact nor a group"
)

// ParseMessage reads a library message event. resolve is the session's LID
// map; a sender it cannot resolve is kept under its LID ("<lid>@lid").
func ParseMessage(e *events.Message, resolve func(types.JID) (types.JID, bool)) Parsed {
	if e.Message == nil && e.RawMessage != nil {
		e.UnwrapRaw()
	}
	info := e.Info
	if info.Chat.Server == types.BroadcastServer || info.Chat.Server == types.NewsletterServer {
		return Parsed{Skip: SkipBroadcast}
	}
	var chat connector.Chat
	switch {
	case info.IsGroup:
		g, ok := ChatOf(info.Chat)
		if !ok {
			return Parsed{Skip: SkipChat}
		}
		chat = g
	case info.IsFromMe:
		// Typed on the phone: the conversation is the recipient's.
		chat = connector.Chat{Key: userKey(info.Chat, info.RecipientAlt, resolve)}
	default:
		chat = connector.Chat{Key: userKey(info.Sender, info.SenderAlt, resolve)}
	}
	if chat.Key == "" {
		return Parsed{Skip: SkipChat}
	}
	m := e.Message
	sender := userKey(info.Sender, info.SenderAlt, resolve)
	if pm := m.GetProtocolMessage(); pm != nil {
		// Who made the change is the event's (authenticated) sender, never
		// what the changed message's key claims: messaging checks it wrote
		// the message.
		chg := &connector.Change{ExternalID: pm.GetKey().GetID(), Chat: chat, FromMe: info.IsFromMe, SenderKey: sender, At: info.Timestamp}
		switch pm.GetType() {
		case waE2E.ProtocolMessage_REVOKE:
			chg.Revoked = true
			return Parsed{Change: chg}
		case waE2E.ProtocolMessage_MESSAGE_EDIT:
			chg.Text, _, _, _, _ = content(pm.GetEditedMessage())
			return Parsed{Change: chg}
		}
	}
	text, typeID, media, file, ok := content(m)
	if !ok {
		if protocolOnly(m) {
			return Parsed{Skip: SkipProtocol}
		}
		// Something a contact wrote that the gateway does not model: kept,
		// so it is not lost, with a text that says so.
		text, typeID = "Unsupported message", msgtype.Unsupported
	}
	in := connector.Inbound{ExternalID: info.ID, Chat: chat, SenderKey: sender,
		SenderName: info.PushName, Text: text, TypeID: typeID, SentAt: info.Timestamp, FromMe: info.IsFromMe, File: file}
	if ci := contextInfo(m); ci != nil {
		in.IsForwarded = ci.GetIsForwarded() || ci.GetForwardingScore() > 0
		in.ReplyTo = ci.GetStanzaID()
	}
	if r := m.GetReactionMessage(); r != nil {
		in.ReplyTo = r.GetKey().GetID()
	}
	return Parsed{In: in, Media: media}
}

// userKey is the number of a user, or its LID kept as "<lid>@lid" when no
// number is known: the message is stored and can be answered, never
// dropped.
func userKey(jid, alt types.JID, resolve func(types.JID) (types.JID, bool)) string {
	if pn := phoneOf(jid, alt, resolve); pn != "" {
		return pn
	}
	for _, j := range []types.JID{jid, alt} {
		if j.Server == types.HiddenUserServer && j.User != "" {
			return j.User + "@" + types.HiddenUserServer
		}
	}
	return ""
}

// protocolOnly reports a message that carries no content of its own:
// sender-key distribution, key shares, history-sync notices and other
// protocol messages. Stored, it would be an empty text and, sharing the
// real message's id, make the real one look like a duplicate.
func protocolOnly(m *waE2E.Message) bool {
	if m == nil {
		return true
	}
	if m.SenderKeyDistributionMessage != nil || m.ProtocolMessage != nil || m.PollUpdateMessage != nil ||
		m.KeepInChatMessage != nil || m.PinInChatMessage != nil || m.EncReactionMessage != nil {
		return true
	}
	// Nothing set but the context every message carries.
	other := false
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		other = fd.Name() != "messageContextInfo"
		return !other
	})
	return !other
}

// content is the text (or caption), type, media part and inline file of a
// message; ok is false when it has none the gateway models.
func content(m *waE2E.Message) (text string, typeID int, media wa.DownloadableMessage, file *connector.File, ok bool) {
	if m == nil {
		return "", 0, nil, nil, false
	}
	switch {
	case m.GetConversation() != "":
		return m.GetConversation(), msgtype.Text, nil, nil, true
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetText(), msgtype.Text, nil, nil, true
	case m.GetImageMessage() != nil:
		im := m.GetImageMessage()
		return im.GetCaption(), msgtype.Image, im, mediaFile("image", im.GetMimetype()), true
	case m.GetVideoMessage() != nil:
		vm := m.GetVideoMessage()
		return vm.GetCaption(), msgtype.Video, vm, mediaFile("video", vm.GetMimetype()), true
	case m.GetPtvMessage() != nil:
		vm := m.GetPtvMessage()
		return vm.GetCaption(), msgtype.Video, vm, mediaFile("video", vm.GetMimetype()), true
	case m.GetAudioMessage() != nil:
		am := m.GetAudioMessage()
		return "", msgtype.Audio, am, mediaFile("audio", am.GetMimetype()), true
	case m.GetDocumentMessage() != nil:
		dm := m.GetDocumentMessage()
		return dm.GetCaption(), msgtype.Document, dm, &connector.File{Name: dm.GetFileName(), ContentType: dm.GetMimetype()}, true
	case m.GetDocumentWithCaptionMessage().GetMessage().GetDocumentMessage() != nil:
		return content(m.GetDocumentWithCaptionMessage().GetMessage())
	case m.GetStickerMessage() != nil:
		sm := m.GetStickerMessage()
		return "", msgtype.Sticker, sm, &connector.File{Name: "sticker.webp", ContentType: sm.GetMimetype()}, true
	case m.GetLocationMessage() != nil:
		lm := m.GetLocationMessage()
		return connector.LocationText(lm.GetName(), lm.GetAddress(), lm.GetDegreesLatitude(), lm.GetDegreesLongitude()), msgtype.Location, nil, nil, true
	case m.GetLiveLocationMessage() != nil:
		lm := m.GetLiveLocationMessage()
		return connector.LocationText("Live location", lm.GetCaption(), lm.GetDegreesLatitude(), lm.GetDegreesLongitude()), msgtype.Location, nil, nil, true
	case m.GetContactMessage() != nil:
		cm := m.GetContactMessage()
		return connector.ContactCardText(cm.GetDisplayName(), cm.GetVcard()), msgtype.Contacts, nil, vcardFile(cm.GetDisplayName(), cm.GetVcard()), true
	case m.GetContactsArrayMessage() != nil:
		ca := m.GetContactsArrayMessage()
		var parts []string
		var all strings.Builder
		for _, c := range ca.GetContacts() {
			parts = append(parts, connector.ContactText(c.GetDisplayName(), c.GetVcard()))
			all.WriteString(c.GetVcard())
			all.WriteString("\n")
		}
		return connector.ContactsText(parts), msgtype.Contacts, nil, vcardFile(ca.GetDisplayName(), all.String()), true
	case m.GetReactionMessage() != nil:
		return connector.ReactionText(m.GetReactionMessage().GetText()), msgtype.Reaction, nil, nil, true
	case pollOf(m) != nil:
		p := pollOf(m)
		var opts []string
		for _, o := range p.GetOptions() {
			opts = append(opts, o.GetOptionName())
		}
		return connector.PollText(p.GetName(), opts), msgtype.Poll, nil, nil, true
	}
	return "", 0, nil, nil, false
}

func pollOf(m *waE2E.Message) *waE2E.PollCreationMessage {
	for _, p := range []*waE2E.PollCreationMessage{m.GetPollCreationMessage(), m.GetPollCreationMessageV2(), m.GetPollCreationMessageV3()} {
		if p != nil {
			return p
		}
	}
	return nil
}

func mediaFile(kind, mime string) *connector.File {
	return &connector.File{Name: kind + msgtype.Extension(mime), ContentType: mime}
}

// vcardFile keeps the card itself next to its readable text.
func vcardFile(name, vcard string) *connector.File {
	if strings.TrimSpace(vcard) == "" {
		return nil
	}
	if name == "" {
		name = "contact"
	}
	return &connector.File{Name: name + ".vcf", ContentType: "text/vcard", Data: []byte(vcard)}
}

// contextInfo is the reply and forward information of whichever content
// the message carries.
func contextInfo(m *waE2E.Message) *waE2E.ContextInfo {
	for _, ci := range []*waE2E.ContextInfo{
		m.GetExtendedTextMessage().GetContextInfo(), m.GetImageMessage().GetContextInfo(), m.GetVideoMessage().GetContextInfo(),
		m.GetAudioMessage().GetContextInfo(), m.GetDocumentMessage().GetContextInfo(), m.GetStickerMessage().GetContextInfo(),
		m.GetLocationMessage().GetContextInfo(), m.GetContactMessage().GetContextInfo(), m.GetContactsArrayMessage().GetContextInfo(),
		m.GetPtvMessage().GetContextInfo(), m.GetLiveLocationMessage().GetContextInfo(),
	} {
		if ci != nil {
			return ci
		}
	}
	if p := pollOf(m); p != nil {
		return p.GetContextInfo()
	}
	return nil
}
