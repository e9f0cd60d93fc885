package httpapi

import (
	"context"
	"errors"
	"mime"
	"os"
	"strings"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
)

// GetMessageMedia serves a message's file at a URL an event or an API
// answer gave; the token in the URL is the only authorization.
func (s *Server) GetMessageMedia(ctx context.Context, req api.GetMessageMediaRequestObject) (api.GetMessageMediaResponseObject, error) {
	f, err := s.Messaging.OpenMessageMedia(ctx, req.Token, req.Filename)
	if fault.KindOf(err) == fault.NotFound {
		return api.GetMessageMedia404JSONResponse{Message: "Media not found"}, nil
	}
	if err != nil {
		return nil, err
	}
	file, err := os.Open(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return api.GetMessageMedia404JSONResponse{Message: "Media not found"}, nil
	}
	if err != nil {
		return nil, fault.Internalf(err, "open message media")
	}
	size := f.Size
	if fi, err := file.Stat(); err == nil {
		size = fi.Size()
	}
	ct := f.ContentType
	if _, _, err := mime.ParseMediaType(ct); err != nil || ct == "" {
		ct = "application/octet-stream"
	}
	// The file is whatever a contact sent: only media a browser shows as
	// media is inline; anything else (HTML, SVG, …) is a download, and the
	// sandbox keeps any script in it away from the gateway's origin.
	disposition := "attachment"
	if major, _, _ := strings.Cut(ct, "/"); (major == "image" && ct != "image/svg+xml") || major == "video" || major == "audio" {
		disposition = "inline"
	}
	disposition = mime.FormatMediaType(disposition, map[string]string{"filename": f.FileName})
	nosniff, csp := "nosniff", "sandbox; default-src 'none'"
	return api.GetMessageMedia200AsteriskResponse{Body: file, ContentType: ct, ContentLength: size,
		Headers: api.GetMessageMedia200ResponseHeaders{ContentDisposition: &disposition, XContentTypeOptions: &nosniff, ContentSecurityPolicy: &csp}}, nil
}

// toAPIMedia is the answer's `media` of m: nil without a file URL.
func (s *Server) toAPIMedia(m messaging.Message) *api.MessageMedia {
	l := m.MediaLink
	if l == nil {
		return nil
	}
	return &api.MessageMedia{MimeType: l.ContentType, Filename: l.FileName, Size: int(l.Size), Url: l.URL, ExpiresAt: s.Times.Offset(l.ExpiresAt)}
}

func (s *Server) GetMessageMediaLink(ctx context.Context, req api.GetMessageMediaLinkRequestObject) (api.GetMessageMediaLinkResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	m, err := s.Messaging.GetMessageMediaLink(ctx, p.CompanyID, int64(req.Id))
	if err != nil {
		return nil, err
	}
	return api.GetMessageMediaLink200JSONResponse{Success: true, Data: *s.toAPIMedia(m), Message: "Media URL created."}, nil
}
