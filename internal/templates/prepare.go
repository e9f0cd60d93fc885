package templates

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/netguard"
	"github.com/chatmsg/gateway/internal/official"
)

var variable = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

// headerTypes are the media types accepted per media header format
// (checked on the bytes).
var headerTypes = map[string][]string{
	"IMAGE":    {"image/jpeg", "image/png", "image/webp"},
	"VIDEO":    {"video/mp4", "video/3gpp"},
	"DOCUMENT": {"application/pdf"},
}

var headerTypeNames = map[string]string{
	"IMAGE":    "an image (JPEG, PNG or WEBP)",
	"VIDEO":    "a video (MP4 or 3GPP)",
	"DOCUMENT": "a PDF document",
}

// headerLimit is the provider's size limit of a media header format.
func headerLimit(format string) (int, string) {
	switch format {
	case "IMAGE":
		return messaging.LimitFor(msgtype.Image)
	case "VIDEO":
		return messaging.LimitFor(msgtype.Video)
	}
	return messaging.LimitFor(msgtype.Document)
}

func isMediaHeader(format string) bool { _, ok := headerTypes[format]; return ok }

// values resolves variables: positional ones ({{1}}) from req.Positional
// by number, named ones from req.Named (keys starting with an underscore
// are reserved and ignored). A variable without a value is an empty text
// (the API document's rule 4).
type values struct{ req messaging.TemplateRequest }

func (v values) of(name string) string {
	if n, err := strconv.Atoi(name); err == nil {
		if n >= 1 && n <= len(v.req.Positional) {
			return v.req.Positional[n-1]
		}
		return ""
	}
	if strings.HasPrefix(name, "_") {
		return ""
	}
	return v.req.Named[name]
}

// Render replaces every variable of text with its value.
func Render(text string, req messaging.TemplateRequest) string {
	v := values{req}
	return variable.ReplaceAllStringFunc(text, func(m string) string {
		return v.of(variable.FindStringSubmatch(m)[1])
	})
}

// params lists the parameters of a component's text as the provider wants
// them: positional ones once each in the order of their numbers, named
// ones once each in order of appearance, with their names.
func params(text string, req messaging.TemplateRequest) []messaging.TemplateParam {
	v := values{req}
	var names []string
	for _, m := range variable.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	positional := len(names) > 0
	for _, n := range names {
		if _, err := strconv.Atoi(n); err != nil {
			positional = false
		}
	}
	if positional {
		sort.Slice(names, func(i, j int) bool { a, _ := strconv.Atoi(names[i]); b, _ := strconv.Atoi(names[j]); return a < b })
	}
	out := make([]messaging.TemplateParam, 0, len(names))
	for _, n := range names {
		p := messaging.TemplateParam{Text: v.of(n)}
		if !positional {
			p.Name = n
		}
		out = append(out, p)
	}
	return out
}

// PrepareTemplate resolves a template send through ch: the template must
// be one of ch's provider account, approved; variables are filled
// (missing ones empty); header media from header_media_url is fetched
// through the SSRF guard (or read from the gateway's own uploads) and
// checked against the header format and its size limit.
//
// Errors: Rule for an unknown or foreign template, one not approved,
// header media fields not allowed for the header, media of the wrong
// type, over the limit, expired or that could not be fetched.
func (s *Service) PrepareTemplate(ctx context.Context, ch channels.Channel, req messaging.TemplateRequest) (messaging.PreparedTemplate, error) {
	var out messaging.PreparedTemplate
	if ch.ProviderAccount == nil {
		return out, fault.New(fault.Rule, "provider_template_id is only accepted with platform ofc_chatapp")
	}
	t, err := s.Get(ctx, ch.CompanyID, req.TemplateID)
	if fault.KindOf(err) == fault.NotFound || (err == nil && t.ProviderAccountID != ch.ProviderAccount.ID) {
		return out, fault.New(fault.Rule, "Template not found for this sender: provider_template_id must be a template of the sender's official channel")
	}
	if err != nil {
		return out, err
	}
	if t.Status != StatusApproved {
		return out, fault.New(fault.Rule, fmt.Sprintf("Template %s is not approved by the provider (status %s)", t.Name, t.Status))
	}
	send := messaging.TemplateSend{Name: t.Name, Language: t.Language, Positional: req.Positional, HeaderFormat: t.HeaderFormat}
	if len(req.Named) > 0 {
		send.Named = map[string]string{}
		for k, v := range req.Named {
			if !strings.HasPrefix(k, "_") {
				send.Named[k] = v
			}
		}
	}
	button := 0
	for _, c := range t.Components {
		switch strings.ToUpper(c.Type) {
		case "HEADER":
			if strings.ToUpper(c.Format) == "TEXT" {
				if ps := params(c.Text, req); len(ps) > 0 {
					send.Components = append(send.Components, messaging.TemplateComponentParams{Type: "header", Params: ps})
				}
			}
		case "BODY":
			out.Text = Render(c.Text, req)
			if ps := params(c.Text, req); len(ps) > 0 {
				send.Components = append(send.Components, messaging.TemplateComponentParams{Type: "body", Params: ps})
			}
		case "BUTTONS":
			for _, b := range c.Buttons {
				if strings.ToUpper(b.Type) == "URL" {
					if ps := params(b.URL, req); len(ps) > 0 {
						send.Components = append(send.Components, messaging.TemplateComponentParams{Type: "button", SubType: "url", Index: button, Params: ps})
					}
				}
				button++
			}
		}
	}

	if req.HeaderMediaFilename != "" && req.HeaderMediaURL == "" {
		return out, fault.New(fault.Rule, "header_media_filename is only accepted together with header_media_url")
	}
	if req.HeaderMediaURL != "" {
		if !isMediaHeader(t.HeaderFormat) {
			return out, fault.New(fault.Rule, "header_media_url is only accepted for templates with an IMAGE, VIDEO or DOCUMENT header")
		}
		if req.HeaderMediaFilename != "" && t.HeaderFormat != "DOCUMENT" {
			return out, fault.New(fault.Rule, "header_media_filename is only accepted for templates with a DOCUMENT header")
		}
		m, err := s.headerMedia(ctx, ch.CompanyID, req.HeaderMediaURL, t.HeaderFormat)
		if err != nil {
			return out, err
		}
		if name := official.DocumentFileName(req.HeaderMediaFilename); name != "" {
			m.FileName = name // the recipient sees the client's own name
		}
		send.HeaderMedia = m
	} else if isMediaHeader(t.HeaderFormat) {
		send.HeaderMediaURL = t.HeaderMediaURL
	}
	out.Send = send
	return out, nil
}

// headerMedia opens the media of header_media_url and checks it against
// the header format: its type (from its first bytes) and its size limit.
// The media is read through the returned Media when the send stores it,
// never held whole: the company's own upload from the media store, any
// other URL from the spool it was fetched into.
func (s *Service) headerMedia(ctx context.Context, companyID int64, rawURL, format string) (*messaging.Media, error) {
	limit, limitMsg := headerLimit(format)
	var m *messaging.Media
	if token, ok := s.uploadToken(rawURL); ok {
		f, err := s.openCompanyUpload(ctx, companyID, token)
		if err != nil {
			if errors.Is(err, ErrGone) {
				return nil, fault.New(fault.Rule, "header_media_url has expired: upload the file again")
			}
			if fault.KindOf(err) == fault.NotFound {
				return nil, fault.New(fault.Rule, "header_media_url was not found")
			}
			return nil, err
		}
		if f.Size > int64(limit) {
			return nil, fault.New(fault.Rule, limitMsg)
		}
		m = &messaging.Media{FileName: f.FileName, Size: f.Size, StoreKey: f.Key, Open: func(ctx context.Context) (io.ReadCloser, error) {
			obj, err := s.openFile(ctx, f)
			if err != nil {
				return nil, err
			}
			return obj, nil
		}}
	} else {
		spooled, err := s.fetch(ctx, rawURL, limit, limitMsg)
		if err != nil {
			return nil, err
		}
		m = &messaging.Media{FileName: derivedName(rawURL), Size: spooled.Size,
			Open: func(context.Context) (io.ReadCloser, error) { return spooled.Open() }}
	}
	ct, err := m.Sniff(ctx)
	if fault.KindOf(err) == fault.NotFound {
		return nil, fault.New(fault.Rule, "header_media_url was not found")
	}
	if err != nil {
		return nil, fmt.Errorf("read header media: %w", err)
	}
	if !slices.Contains(headerTypes[format], ct) {
		return nil, fault.New(fault.Rule, fmt.Sprintf("Header media must be %s for the template's %s header; header_media_url is %s", headerTypeNames[format], format, ct))
	}
	m.FileName, m.ContentType = messaging.SafeFileName(m.FileName, ct), ct
	return m, nil
}

// fetch GETs a user-supplied URL through the SSRF guard into the spool,
// reading at most limit bytes. The spooled file is removed when ctx ends
// (the send request that fetched it, which stores what it sends).
func (s *Service) fetch(ctx context.Context, rawURL string, limit int, limitMsg string) (*filestore.Spooled, error) {
	if err := netguard.ValidateURL(rawURL); err != nil {
		return nil, fault.New(fault.Rule, "Header media url must be a valid http or https URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fault.New(fault.Rule, "Header media url must be a valid http or https URL")
	}
	resp, err := s.deps.Fetch.Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrBlocked) {
			return nil, fault.Wrap(fault.Rule, "header_media_url points to an address the service may not reach", err)
		}
		return nil, fault.Wrap(fault.Rule, "header_media_url could not be fetched", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fault.New(fault.Rule, fmt.Sprintf("header_media_url could not be fetched (HTTP %d)", resp.StatusCode))
	}
	if resp.ContentLength > int64(limit) {
		return nil, fault.New(fault.Rule, limitMsg)
	}
	spooled, err := s.deps.Spool.Write(resp.Body, int64(limit))
	if errors.Is(err, filestore.ErrTooLarge) {
		return nil, fault.New(fault.Rule, limitMsg)
	}
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			return nil, fault.Internalf(err, "spool header media") // our disk, not their URL
		}
		return nil, fault.Wrap(fault.Rule, "header_media_url could not be fetched", err)
	}
	context.AfterFunc(ctx, func() {
		if err := spooled.Remove(); err != nil {
			s.deps.Logger.Warn("remove fetched header media", "err", err)
		}
	})
	return spooled, nil
}

// derivedName is the file name a URL suggests (its last path segment).
func derivedName(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	base := path.Base(u.Path)
	if base == "/" || base == "." {
		return ""
	}
	if unescaped, err := url.PathUnescape(base); err == nil {
		return unescaped
	}
	return base
}
