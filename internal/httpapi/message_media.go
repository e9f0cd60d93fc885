package httpapi

import (
	"context"
	"errors"
	"os"

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
	// The file is whatever a contact sent: hardenedFileHeaders keeps it
	// from running on the gateway's origin.
	fh := hardenedFileHeaders(f.ContentType, f.FileName)
	return api.GetMessageMedia200AsteriskResponse{Body: file, ContentType: fh.contentType, ContentLength: size,
		Headers: api.GetMessageMedia200ResponseHeaders{ContentDisposition: fh.disposition, XContentTypeOptions: fh.nosniff, ContentSecurityPolicy: fh.csp}}, nil
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
