package whatsmeow

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/jpeg"
	_ "image/png" // decoders for thumbnails of sent images
)

// thumbSide is the longest side of the preview the phone shows before it
// downloads an image (the chat app's own clients send about this size).
const thumbSide = 72

// ImageThumbnail decodes an image (JPEG or PNG) and returns its dimensions
// and a small JPEG preview; ok is false when it cannot be decoded (the
// image is then sent without them).
func ImageThumbnail(data []byte) (w, h uint32, thumb []byte, ok bool) {
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return 0, 0, nil, false
	}
	b := img.Bounds()
	sw, sh := b.Dx(), b.Dy()
	if sw <= 0 || sh <= 0 {
		return 0, 0, nil, false
	}
	tw, th := thumbSide, thumbSide
	if sw >= sh {
		th = max(1, sh*thumbSide/sw)
	} else {
		tw = max(1, sw*thumbSide/sh)
	}
	dst := image.NewRGBA(image.Rect(0, 0, tw, th))
	for y := range th {
		for x := range tw {
			dst.Set(x, y, img.At(b.Min.X+x*sw/tw, b.Min.Y+y*sh/th))
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 60}); err != nil {
		return 0, 0, nil, false
	}
	return uint32(sw), uint32(sh), buf.Bytes(), true
}

// VideoDimensions reads the width and height of the first video track of
// an MP4 (the track header box, "tkhd"); ok is false when there is none.
func VideoDimensions(data []byte) (w, h uint32, ok bool) {
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte("tkhd"))
		if i < 0 {
			return 0, 0, false
		}
		start := off + i + 4 // the box body: version, flags, fields
		off = start
		if start >= len(data) {
			return 0, 0, false
		}
		// Width and height are the last 8 bytes of the box, 16.16 fixed
		// point; the body is 80 bytes (version 0) or 92 (version 1).
		size := 80
		if data[start] == 1 {
			size = 92
		}
		if start+size > len(data) {
			return 0, 0, false
		}
		w = binary.BigEndian.Uint32(data[start+size-8:]) >> 16
		h = binary.BigEndian.Uint32(data[start+size-4:]) >> 16
		if w > 0 && h > 0 {
			return w, h, true
		}
	}
}
