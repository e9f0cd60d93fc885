// Package msgtype owns the message-type vocabulary of the API
// (MessageTypeId) and how a file's media type maps onto it. Messaging,
// both channel capabilities and the chat-app drivers read one table, so a
// type added here is sent, received and stored the same way everywhere.
// It is a leaf: it imports nothing of the gateway.
package msgtype

import "strings"

// Message type ids (MessageTypeId in both documents).
const (
	Text     = 1
	Image    = 2
	Video    = 3
	Audio    = 4
	Document = 5
	Template = 6
	Sticker  = 7
	Location = 8
	// Contacts is one or more contact cards, summarised in the text.
	Contacts = 9
	// Reaction is an emoji reaction to another message (replied_message_id).
	Reaction = 10
	// Reply is the contact's choice of a button or list row the company
	// offered; the text is the choice's title.
	Reply = 11
	// Order is an order from the company's catalog, summarised in the text.
	Order = 12
	// System is a notice of the platform (a contact changed number, a group
	// was created or changed), not something the contact wrote.
	System = 13
	// Unsupported is a message the platform could not pass on; the text
	// says what it was.
	Unsupported = 14
	// Poll is a poll a contact sent; the text has its question and
	// options.
	Poll = 15
)

// ForContentType is the message type of a file of contentType (parameters
// such as "; codecs=opus" allowed): images, videos and audio are sent as
// such, anything else as a document.
func ForContentType(contentType string) int {
	switch {
	case strings.HasPrefix(contentType, "image/"):
		return Image
	case strings.HasPrefix(contentType, "video/"):
		return Video
	case strings.HasPrefix(contentType, "audio/"):
		return Audio
	}
	return Document
}

// extensions are the file extensions of the media types files commonly
// have on both channels (the provider's accepted uploads and what the chat
// app sends).
var extensions = map[string]string{
	"image/jpeg":      ".jpg",
	"image/png":       ".png",
	"image/webp":      ".webp",
	"video/mp4":       ".mp4",
	"video/3gpp":      ".3gp",
	"audio/mpeg":      ".mp3",
	"audio/ogg":       ".ogg",
	"audio/mp4":       ".m4a",
	"application/pdf": ".pdf",
}

// Extension is the file extension (with its dot) of contentType, ignoring
// parameters; "" when the type is not a known one, so each caller picks
// its own fallback.
func Extension(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return extensions[strings.ToLower(strings.TrimSpace(mt))]
}
