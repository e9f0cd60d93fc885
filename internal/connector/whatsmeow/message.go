package whatsmeow

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCompanionReg"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/msgtype"
)

// TextMessage is a plain text message.
func TextMessage(text string) *waE2E.Message {
	return &waE2E.Message{Conversation: proto.String(text)}
}

// MediaType is the library's upload kind for a file.
func MediaType(contentType string) wa.MediaType {
	switch msgtype.ForContentType(contentType) {
	case msgtype.Image:
		return wa.MediaImage
	case msgtype.Video:
		return wa.MediaVideo
	case msgtype.Audio:
		return wa.MediaAudio
	default:
		return wa.MediaDocument
	}
}

// MediaMessage is the message that carries an uploaded file; the text of
// the send becomes its caption (audio has none on the chat app, so the text
// is dropped there and sent by the caller as its own message). Images and
// videos carry their dimensions and images a thumbnail, which the phone
// shows before downloading; ogg/opus audio goes as a voice note.
func MediaMessage(f *connector.File, up wa.UploadResponse, caption string) *waE2E.Message {
	ct := f.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	var capt *string
	if caption != "" {
		capt = proto.String(caption)
	}
	url, direct, length := proto.String(up.URL), proto.String(up.DirectPath), proto.Uint64(up.FileLength)
	key, enc, sha := up.MediaKey, up.FileEncSHA256, up.FileSHA256
	switch MediaType(ct) {
	case wa.MediaImage:
		im := &waE2E.ImageMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct), Caption: capt}
		if w, h, thumb, ok := ImageThumbnail(f.Data); ok {
			im.Width, im.Height, im.JPEGThumbnail = proto.Uint32(w), proto.Uint32(h), thumb
		}
		return &waE2E.Message{ImageMessage: im}
	case wa.MediaVideo:
		vm := &waE2E.VideoMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct), Caption: capt}
		if w, h, ok := VideoDimensions(f.Data); ok {
			vm.Width, vm.Height = proto.Uint32(w), proto.Uint32(h)
		}
		return &waE2E.Message{VideoMessage: vm}
	case wa.MediaAudio:
		am := &waE2E.AudioMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct)}
		if VoiceNote(ct) {
			// The phone plays only opus in ogg as a voice note, and wants
			// exactly this mimetype for it.
			am.PTT, am.Mimetype = proto.Bool(true), proto.String("audio/ogg; codecs=opus")
		}
		return &waE2E.Message{AudioMessage: am}
	default:
		name := f.Name
		if name == "" {
			name = "file"
		}
		return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct), FileName: proto.String(name), Title: proto.String(name), Caption: capt}}
	}
}

// VoiceNote reports audio the chat app plays as a voice note: ogg with
// opus (or ogg without codec parameters, which is opus in practice).
func VoiceNote(contentType string) bool {
	mt, params, _ := strings.Cut(strings.ToLower(contentType), ";")
	if strings.TrimSpace(mt) != "audio/ogg" {
		return false
	}
	return strings.TrimSpace(params) == "" || strings.Contains(params, "opus")
}

// WithReply quotes the message replyTo in msg (nothing when empty): the
// text goes as an extended text, media keep their kind.
func WithReply(msg *waE2E.Message, replyTo string, chat types.JID) *waE2E.Message {
	if replyTo == "" {
		return msg
	}
	ci := &waE2E.ContextInfo{StanzaID: proto.String(replyTo)}
	if chat.Server != types.GroupServer {
		ci.RemoteJID = proto.String(chat.String())
	}
	switch {
	case msg.Conversation != nil:
		return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: msg.Conversation, ContextInfo: ci}}
	case msg.ImageMessage != nil:
		msg.ImageMessage.ContextInfo = ci
	case msg.VideoMessage != nil:
		msg.VideoMessage.ContextInfo = ci
	case msg.AudioMessage != nil:
		msg.AudioMessage.ContextInfo = ci
	case msg.DocumentMessage != nil:
		msg.DocumentMessage.ContextInfo = ci
	}
	return msg
}

// CompanionID derives the id of a second message a send needs (the text
// before an audio) from the send's own id, so a retry repeats both ids.
func CompanionID(id, part string) string {
	sum := sha256.Sum256([]byte(id + "/" + part))
	return wa.WebMessageIDPrefix + strings.ToUpper(hex.EncodeToString(sum[:9]))
}

// PairClient maps the browser a client names (the QR request's `browser`)
// to the library's pairing client type and the device platform the phone
// shows; unknown browsers are "other web client".
func PairClient(browser string) (wa.PairClientType, waCompanionReg.DeviceProps_PlatformType) {
	switch strings.ToLower(strings.TrimSpace(browser)) {
	case "chrome", "google chrome", "chromium":
		return wa.PairClientChrome, waCompanionReg.DeviceProps_CHROME
	case "firefox", "mozilla firefox":
		return wa.PairClientFirefox, waCompanionReg.DeviceProps_FIREFOX
	case "safari":
		return wa.PairClientSafari, waCompanionReg.DeviceProps_SAFARI
	case "edge", "microsoft edge":
		return wa.PairClientEdge, waCompanionReg.DeviceProps_EDGE
	case "opera":
		return wa.PairClientOpera, waCompanionReg.DeviceProps_OPERA
	case "ie", "internet explorer":
		return wa.PairClientIE, waCompanionReg.DeviceProps_IE
	}
	return wa.PairClientOtherWebClient, waCompanionReg.DeviceProps_UNKNOWN
}

// Linked-device names: the chat app answers 400 to a pairing-code request
// whose display name is not "Browser (OS)" with a known browser and a short
// plain OS name, and the code then comes back empty.
const maxOSName = 20

// DeviceOS is the OS name shown for the linked device: letters, digits,
// spaces, dots, dashes and underscores, at most 20 of them; "Linux" when
// nothing usable is left.
func DeviceOS(os string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(os) {
		if b.Len() >= maxOSName {
			break
		}
		if r == ' ' && strings.HasSuffix(b.String(), " ") {
			continue // runs of spaces (left by dropped characters) count once
		}
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(" .-_", r)) {
			b.WriteRune(r)
		}
	}
	if out := strings.TrimSpace(b.String()); out != "" {
		return out
	}
	return "Linux"
}

// browserNames are the names the chat app accepts, by pairing client type.
var browserNames = map[wa.PairClientType]string{
	wa.PairClientChrome: "Chrome", wa.PairClientFirefox: "Firefox", wa.PairClientSafari: "Safari",
	wa.PairClientEdge: "Edge", wa.PairClientOpera: "Opera", wa.PairClientIE: "IE",
}

// DisplayName is the linked-device name in the form the chat app accepts
// for phone-number pairing: "Browser (OS)", with a browser it knows
// (Chrome for any other) and DeviceOS.
func DisplayName(opts connector.PairingOptions) string {
	typ, _ := PairClient(opts.Browser)
	browser, ok := browserNames[typ]
	if !ok {
		browser = "Chrome"
	}
	return browser + " (" + DeviceOS(opts.OS) + ")"
}
