package whatsmeow

import (
	"strings"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCompanionReg"
	"go.mau.fi/whatsmeow/proto/waE2E"
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
// is dropped there and sent by the caller as its own message).
func MediaMessage(f *connector.File, up wa.UploadResponse, caption string) *waE2E.Message {
	ct := f.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	common := func() (url, direct *string, key, enc, sha []byte, length *uint64) {
		return proto.String(up.URL), proto.String(up.DirectPath), up.MediaKey, up.FileEncSHA256, up.FileSHA256, proto.Uint64(up.FileLength)
	}
	var capt *string
	if caption != "" {
		capt = proto.String(caption)
	}
	url, direct, key, enc, sha, length := common()
	switch MediaType(ct) {
	case wa.MediaImage:
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct), Caption: capt}}
	case wa.MediaVideo:
		return &waE2E.Message{VideoMessage: &waE2E.VideoMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct), Caption: capt}}
	case wa.MediaAudio:
		return &waE2E.Message{AudioMessage: &waE2E.AudioMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct)}}
	default:
		name := f.Name
		if name == "" {
			name = "file"
		}
		return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{URL: url, DirectPath: direct, MediaKey: key, FileEncSHA256: enc,
			FileSHA256: sha, FileLength: length, Mimetype: proto.String(ct), FileName: proto.String(name), Title: proto.String(name), Caption: capt}}
	}
}

// Incoming is what an inbound message carries for the gateway: its text
// (or caption), its message type and, for media, the part to download.
func Incoming(m *waE2E.Message) (text string, typeID int, media wa.DownloadableMessage, fileName, mime string) {
	if m == nil {
		return "", msgtype.Text, nil, "", ""
	}
	switch {
	case m.GetConversation() != "":
		return m.GetConversation(), msgtype.Text, nil, "", ""
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetText(), msgtype.Text, nil, "", ""
	case m.GetImageMessage() != nil:
		im := m.GetImageMessage()
		return im.GetCaption(), msgtype.Image, im, "image" + msgtype.Extension(im.GetMimetype()), im.GetMimetype()
	case m.GetVideoMessage() != nil:
		vm := m.GetVideoMessage()
		return vm.GetCaption(), msgtype.Video, vm, "video" + msgtype.Extension(vm.GetMimetype()), vm.GetMimetype()
	case m.GetAudioMessage() != nil:
		am := m.GetAudioMessage()
		return "", msgtype.Audio, am, "audio" + msgtype.Extension(am.GetMimetype()), am.GetMimetype()
	case m.GetDocumentMessage() != nil:
		dm := m.GetDocumentMessage()
		return dm.GetCaption(), msgtype.Document, dm, dm.GetFileName(), dm.GetMimetype()
	case m.GetDocumentWithCaptionMessage().GetMessage().GetDocumentMessage() != nil:
		dm := m.GetDocumentWithCaptionMessage().GetMessage().GetDocumentMessage()
		return dm.GetCaption(), msgtype.Document, dm, dm.GetFileName(), dm.GetMimetype()
	case m.GetStickerMessage() != nil:
		sm := m.GetStickerMessage()
		return "", msgtype.Sticker, sm, "sticker.webp", sm.GetMimetype()
	case m.GetLocationMessage() != nil:
		lm := m.GetLocationMessage()
		return strings.TrimSpace(lm.GetName() + " " + lm.GetAddress()), msgtype.Location, nil, "", ""
	}
	return "", msgtype.Text, nil, "", ""
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

// DisplayName is the linked-device name in the form the chat app accepts
// for phone-number pairing: "Browser (OS)".
func DisplayName(opts connector.PairingOptions) string {
	return strings.TrimSpace(opts.Browser) + " (" + strings.TrimSpace(opts.OS) + ")"
}
