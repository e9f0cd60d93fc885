package httpapi

import (
	"mime"
	"strings"
)

// fileHeaders are the headers every file the gateway serves by token goes
// out with (/media/… and /message-media/…): the files come from users and
// contacts, and the gateway's origin must never run what is in them.
type fileHeaders struct {
	contentType string
	disposition string
	nosniff     string
	csp         string
}

// fileCSP sandboxes the document (no script, no form, no same origin) and
// lets it load nothing.
const fileCSP = "sandbox; default-src 'none'"

// hardenedFileHeaders chooses the headers of a file of the given type. The
// type is parsed and lower-cased before it is judged ("image/SVG+xml;
// charset=utf-8" is SVG); only images a browser shows as pictures, video
// and audio are inline, everything else is an attachment. The type is
// served in the form it was judged in; an unparsable or empty one as
// application/octet-stream.
func hardenedFileHeaders(contentType, fileName string) fileHeaders {
	mt, params, err := mime.ParseMediaType(contentType)
	if err == nil && strings.Contains(mt, "/") {
		contentType = mime.FormatMediaType(mt, params) // lower-cased, as judged
	}
	if err != nil || contentType == "" || !strings.Contains(mt, "/") {
		contentType, mt = "application/octet-stream", "application/octet-stream"
	}
	disposition := "attachment"
	if major, _, _ := strings.Cut(mt, "/"); (major == "image" && mt != "image/svg+xml") || major == "video" || major == "audio" {
		disposition = "inline"
	}
	if d := mime.FormatMediaType(disposition, map[string]string{"filename": fileName}); d != "" {
		disposition = d
	}
	return fileHeaders{contentType: contentType, disposition: disposition, nosniff: "nosniff", csp: fileCSP}
}
