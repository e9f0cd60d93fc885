package whatsmeow

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/jpeg"
	"image/png"
	"testing"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/chatmsg/gateway/internal/connector"
)

// mp4With is the bytes of an MP4 fragment holding a track header box of
// version v whose dimensions are w×h.
func mp4With(v byte, w, h uint32) []byte {
	size := 80
	if v == 1 {
		size = 92
	}
	body := make([]byte, size)
	body[0] = v
	binary.BigEndian.PutUint32(body[size-8:], w<<16)
	binary.BigEndian.PutUint32(body[size-4:], h<<16)
	box := binary.BigEndian.AppendUint32(nil, uint32(8+size))
	box = append(box, "tkhd"...)
	return append(append([]byte("....moov....trak"), box...), body...)
}

func TestImagesAndVideosCarryDimensionsAndThumbnail(t *testing.T) {
	t.Parallel()
	up := wa.UploadResponse{URL: "https://mmg.example/x", FileLength: 42}
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewGray(image.Rect(0, 0, 640, 320))); err != nil {
		t.Fatal(err)
	}
	im := MediaMessage(&connector.File{Name: "p.png", ContentType: "image/png", Data: pic.Bytes()}, up, "").GetImageMessage()
	if im.GetWidth() != 640 || im.GetHeight() != 320 {
		t.Fatalf("image dimensions %dx%d", im.GetWidth(), im.GetHeight())
	}
	thumb, err := jpeg.Decode(bytes.NewReader(im.GetJPEGThumbnail()))
	if err != nil {
		t.Fatalf("thumbnail is not a JPEG: %v", err)
	}
	if b := thumb.Bounds(); b.Dx() != thumbSide || b.Dy() != thumbSide/2 {
		t.Fatalf("thumbnail %v, want %dx%d (aspect kept)", b, thumbSide, thumbSide/2)
	}

	for _, v := range []byte{0, 1} {
		vm := MediaMessage(&connector.File{Name: "v.mp4", ContentType: "video/mp4", Data: mp4With(v, 1280, 720)}, up, "clip").GetVideoMessage()
		if vm.GetWidth() != 1280 || vm.GetHeight() != 720 || vm.GetCaption() != "clip" {
			t.Fatalf("video (tkhd v%d): %v", v, vm)
		}
	}
	// An audio track's header (0×0) is skipped for the video track's.
	both := append(mp4With(0, 0, 0), mp4With(0, 480, 854)...)
	if w, h, ok := VideoDimensions(both); !ok || w != 480 || h != 854 {
		t.Fatalf("second track: %d×%d %v", w, h, ok)
	}
	for _, bad := range [][]byte{nil, []byte("tkhd"), []byte("no boxes here")} {
		if _, _, ok := VideoDimensions(bad); ok {
			t.Errorf("dimensions read from %q", bad)
		}
	}
}

func TestReplyContextAndCompanionIDs(t *testing.T) {
	t.Parallel()
	chat := types.NewJID("5511977776666", types.DefaultUserServer)
	text := WithReply(TextMessage("yes"), "3EB0AAA", chat)
	ci := text.GetExtendedTextMessage().GetContextInfo()
	if text.GetExtendedTextMessage().GetText() != "yes" || ci.GetStanzaID() != "3EB0AAA" || ci.GetRemoteJID() != chat.String() {
		t.Fatalf("reply text: %v", text)
	}
	img := WithReply(&waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: proto.String("c")}}, "3EB0BBB", types.NewJID("120363025246125486", types.GroupServer))
	if ci := img.GetImageMessage().GetContextInfo(); ci.GetStanzaID() != "3EB0BBB" || ci.RemoteJID != nil {
		t.Fatalf("reply image in a group: %v", img)
	}
	if plain := WithReply(TextMessage("x"), "", chat); plain.GetConversation() != "x" {
		t.Fatalf("no reply: %v", plain)
	}

	id := (&Driver{}).NewMessageID(connector.Account{})
	if len(id) != len(wa.WebMessageIDPrefix)+18 || id[:4] != wa.WebMessageIDPrefix || id == (&Driver{}).NewMessageID(connector.Account{}) {
		t.Fatalf("message ids %q", id)
	}
	// The text sent before an audio takes an id derived from the send's,
	// the same on every attempt and distinct from it.
	if CompanionID(id, "text") != CompanionID(id, "text") || CompanionID(id, "text") == id || CompanionID(id, "text") == CompanionID("3EB0OTHER", "text") {
		t.Fatal("companion ids must be stable per send and distinct")
	}
}

// TestNinthDigitRecipient: only a Brazilian mobile with the ninth digit is
// looked up (a nil client proves the others are not), once per session.
func TestNinthDigitRecipient(t *testing.T) {
	t.Parallel()
	s := (&Driver{}).newSession(connector.Account{}, nil)
	for _, to := range []types.JID{
		types.NewJID("14155550100", types.DefaultUserServer), types.NewJID("551187654321", types.DefaultUserServer),
		types.NewJID("120363025246125486", types.GroupServer), types.NewJID("123456789012345", types.HiddenUserServer),
	} {
		if got := s.recipient(t.Context(), nil, to); got != to {
			t.Errorf("%s became %s", to, got)
		}
	}
	registered := types.NewJID("551187654321", types.DefaultUserServer)
	s.registered["5511987654321"] = registered
	if got := s.recipient(t.Context(), nil, types.NewJID("5511987654321", types.DefaultUserServer)); got != registered {
		t.Fatalf("cached registration not used: %s", got)
	}
}
