package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
)

// GetMessageMedia serves a message's file at a URL an event or an API
// answer gave; the token in the URL is the only authorization.
func (s *Server) GetMessageMedia(ctx context.Context, req api.GetMessageMediaRequestObject) (api.GetMessageMediaResponseObject, error) {
	f, err := s.Messaging.OpenMessageMedia(ctx, req.Token, req.Filename)
	switch fault.KindOf(err) {
	case fault.NotFound:
		return api.GetMessageMedia404JSONResponse{Message: "Media not found"}, nil
	case fault.Unavailable:
		s.logStoreUnavailable(ctx, "getMessageMedia", err)
		return api.GetMessageMedia503JSONResponse{MediaStoreUnavailableJSONResponse: storeUnavailable(err)}, nil
	}
	if err != nil {
		return nil, err
	}
	// The strict handler streams Body to the client and closes it: the
	// file never sits whole in memory, whichever store holds it.
	size := f.Size
	// The file is whatever a contact sent: hardenedFileHeaders keeps it
	// from running on the gateway's origin.
	fh := hardenedFileHeaders(f.ContentType, f.FileName)
	return api.GetMessageMedia200AsteriskResponse{Body: f.Body, ContentType: fh.contentType, ContentLength: size,
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

// storeUnavailable is the 503 of an operation whose media store could not
// be reached, with the error's Retry-After.
func storeUnavailable(err error) api.MediaStoreUnavailableJSONResponse {
	fe := fault.As(err)
	secs := max(fe.RetryAfterSeconds, 1)
	return api.MediaStoreUnavailableJSONResponse{Body: api.Message{Message: fe.Message}, Headers: api.MediaStoreUnavailableResponseHeaders{RetryAfter: secs}}
}

// logStoreUnavailable logs an answer refused because the media store could
// not be reached (the operator's alarm; the client only sees 503).
func (s *Server) logStoreUnavailable(ctx context.Context, op string, err error) {
	s.Logger.WarnContext(ctx, "media store unavailable", "request_id", requestID(ctx), "operation", op, "err", clip(causeText(err), maxLogCause))
}
