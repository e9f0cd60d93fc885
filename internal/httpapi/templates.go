package httpapi

import (
	"context"
	"strings"
	"time"

	"github.com/oapi-codegen/runtime"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/templates"
)

func (s *Server) ListProviderTemplatesForChannel(ctx context.Context, req api.ListProviderTemplatesForChannelRequestObject) (api.ListProviderTemplatesForChannelResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	isOfficial, list, err := s.Templates.ListForChannel(ctx, p.CompanyID, int64(req.Params.CompanyChannelId))
	if err != nil {
		return nil, err
	}
	return api.ListProviderTemplatesForChannel200JSONResponse{Official: isOfficial, Templates: convert(list, toAPITemplate)}, nil
}

// toAPITemplate passes the provider's component types and header formats on
// as it gives them (upper case): the document lists them as open sets the
// provider decides, so a value it adds later reaches clients instead of
// being dropped. A component without a type is the only one left out.
func toAPITemplate(t templates.Template) api.Template {
	out := api.Template{Id: int(t.ID), Name: t.Name, Language: t.Language, HasButtons: t.HasButtons, Category: t.Category,
		Status: t.Status, Value: api.TemplateValue{Name: t.Name, Language: t.Language, Components: []api.TemplateComponent{}}}
	for _, c := range t.Components {
		typ := strings.ToUpper(strings.TrimSpace(c.Type))
		if typ == "" {
			continue
		}
		comp := api.TemplateComponent{Type: typ}
		if f := strings.ToUpper(strings.TrimSpace(c.Format)); f != "" {
			comp.Format = &f
		}
		if c.Text != "" {
			text := c.Text
			comp.Text = &text
		}
		if len(c.Buttons) > 0 {
			buttons := make([]api.TemplateButton, len(c.Buttons))
			for i, b := range c.Buttons {
				buttons[i] = api.TemplateButton{Type: b.Type, Text: b.Text}
				if b.URL != "" {
					u := b.URL
					buttons[i].Url = &u
				}
				if b.PhoneNumber != "" {
					n := b.PhoneNumber
					buttons[i].PhoneNumber = &n
				}
			}
			comp.Buttons = &buttons
		}
		out.Value.Components = append(out.Value.Components, comp)
	}
	return out
}

func (s *Server) UploadSendMedia(ctx context.Context, req api.UploadSendMediaRequestObject) (api.UploadSendMediaResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	if req.Body == nil {
		return nil, fault.New(fault.Invalid, "File is required")
	}
	var form api.UploadSendMediaRequest
	if err := runtime.BindMultipart(&form, *req.Body); err != nil {
		return nil, fault.Wrap(fault.Invalid, "The multipart body could not be read.", err)
	}
	// The binder read the skeleton, whose files are empty; the file itself
	// is in the spool.
	part := formOf(ctx).file("file")
	if part == nil {
		return nil, fault.New(fault.Invalid, "File is required")
	}
	file, err := part.file.Open()
	if err != nil {
		return nil, fault.Internalf(err, "read the spooled upload")
	}
	defer file.Close()
	up, err := s.Templates.UploadSendMedia(ctx, p.CompanyID, int64(form.ProviderAccountId), part.fileName, file, part.file.Size)
	if fault.KindOf(err) == fault.Unavailable {
		s.logStoreUnavailable(ctx, "uploadSendMedia", err)
		return api.UploadSendMedia503JSONResponse{MediaStoreUnavailableJSONResponse: storeUnavailable(err)}, nil
	}
	if err != nil {
		return nil, err
	}
	var out api.UploadSendMedia200JSONResponse
	out.Data.Url, out.Data.Filename = up.URL, up.FileName
	out.Data.ExpiresAt = up.ExpiresAt.In(s.Times.Location).Truncate(time.Second)
	return out, nil
}
