package httpapi

import (
	"context"
	"errors"
	"io"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/templates"
)

func (s *Server) VerifyProviderWebhook(ctx context.Context, req api.VerifyProviderWebhookRequestObject) (api.VerifyProviderWebhookResponseObject, error) {
	challenge, err := s.Official.VerifyProviderWebhook(ctx, req.PhoneNumberId, deref(req.Params.HubMode), deref(req.Params.HubVerifyToken), deref(req.Params.HubChallenge))
	if err != nil {
		return nil, err
	}
	return api.VerifyProviderWebhook200TextResponse(challenge), nil
}

func (s *Server) ReceiveProviderWebhook(ctx context.Context, req api.ReceiveProviderWebhookRequestObject) (api.ReceiveProviderWebhookResponseObject, error) {
	// The signature covers the exact bytes received, so the body is read
	// raw (the document declares it application/* for that reason).
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, "The webhook body could not be read.", err)
	}
	sum, err := s.Official.ReceiveProviderWebhook(ctx, req.PhoneNumberId, deref(req.Params.XHubSignature256), body)
	if err != nil {
		return nil, err
	}
	return api.ReceiveProviderWebhook200JSONResponse{Success: true, Messages: sum.Messages, Receipts: sum.Receipts, Ignored: sum.Ignored}, nil
}

func (s *Server) GetUploadedMedia(ctx context.Context, req api.GetUploadedMediaRequestObject) (api.GetUploadedMediaResponseObject, error) {
	f, err := s.Templates.OpenMedia(ctx, req.Token, req.Filename)
	if errors.Is(err, templates.ErrGone) {
		return api.GetUploadedMedia410JSONResponse{Message: "This media expired and was deleted"}, nil
	}
	switch fault.KindOf(err) {
	case fault.NotFound:
		return api.GetUploadedMedia404JSONResponse{Message: "Media not found"}, nil
	case fault.Unavailable:
		s.logStoreUnavailable(ctx, "getUploadedMedia", err)
		return api.GetUploadedMedia503JSONResponse{MediaStoreUnavailableJSONResponse: storeUnavailable(err)}, nil
	}
	if err != nil {
		return nil, err
	}
	// Streamed from the media store by the strict handler, which closes it.
	body, size := f.Body, f.Size
	fh := hardenedFileHeaders(f.ContentType, f.FileName)
	headers := api.GetUploadedMedia200ResponseHeaders{ContentDisposition: fh.disposition, XContentTypeOptions: fh.nosniff, ContentSecurityPolicy: fh.csp}
	switch f.ContentType {
	case "image/jpeg":
		return api.GetUploadedMedia200ImagejpegResponse{Body: body, ContentLength: size, Headers: headers}, nil
	case "image/png":
		return api.GetUploadedMedia200ImagepngResponse{Body: body, ContentLength: size, Headers: headers}, nil
	case "image/webp":
		return api.GetUploadedMedia200ImagewebpResponse{Body: body, ContentLength: size, Headers: headers}, nil
	case "video/mp4":
		return api.GetUploadedMedia200Videomp4Response{Body: body, ContentLength: size, Headers: headers}, nil
	case "video/3gpp":
		return api.GetUploadedMedia200Video3gppResponse{Body: body, ContentLength: size, Headers: headers}, nil
	case "application/pdf":
		return api.GetUploadedMedia200ApplicationpdfResponse{Body: body, ContentLength: size, Headers: headers}, nil
	}
	_ = body.Close()
	return nil, fault.Internalf(errors.New(f.ContentType), "uploaded media of an unexpected type")
}
