package loadtest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/providersim"
)

// MediaResult is media-large: one document of the largest size the
// document allows taken through every media path of a replica, each step
// with the growth of the gateway's peak RSS over what it was before the
// step (VmHWM, reset through /proc/PID/clear_refs).
type MediaResult struct {
	SizeMB float64     `json:"size_mb"`
	Steps  []MediaStep `json:"steps"`
}

// MediaStep is one request of media-large.
type MediaStep struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// PeakGrowthMB is the gateway's peak RSS during the step minus its RSS
	// before it.
	PeakGrowthMB float64 `json:"peak_growth_mb"`
	Status       int     `json:"status"`
	Error        string  `json:"error,omitempty"`
}

// TargetMediaGrowthMB bounds what one 100 MB document may add to a
// replica's RSS on any media path (issue 26).
const TargetMediaGrowthMB = 32

// mediaSteps are media-large's steps, in order.
var mediaSteps = []string{"upload", "template send with it (enqueue=false)", "serve", "multipart file send (enqueue=false)"}

// mediaDocSize is the document media-large moves: the API document's
// 100 MB limit for documents, less room for the form's other parts.
const mediaDocSize = 100<<20 - 4<<10

// runMediaLarge uploads a 100 MB PDF as header media, sends it in a
// template on the official channel (enqueue=false: answered once the
// provider took it), serves it back from its URL, and sends the same
// document as a multipart file. Each step is measured on its own.
func (r *runner) runMediaLarge(ctx context.Context, run int, res *Result) error {
	co, tplID, err := r.mediaCompany(ctx)
	if err != nil {
		return err
	}
	pid := r.stack.Gateway.PID()
	mr := &MediaResult{SizeMB: float64(mediaDocSize) / (1 << 20)}
	res.Media = mr
	step := func(name string, fn func(ctx context.Context) (int, error)) error {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("reset the gateway's peak RSS: %w", err)
		}
		before, err := RSS(pid)
		if err != nil {
			return err
		}
		begin := time.Now()
		status, ferr := fn(ctx)
		s := MediaStep{Name: name, Seconds: time.Since(begin).Seconds(), Status: status}
		peak, err := statusBytes(pid, "VmHWM")
		if err != nil {
			return err
		}
		s.PeakGrowthMB = float64(peak-before) / (1 << 20)
		if ferr != nil {
			s.Error = ferr.Error()
		}
		r.o.Log("media-large %s: %d in %.1f s, peak RSS +%.1f MB %s", name, status, s.Seconds, s.PeakGrowthMB, s.Error)
		mr.Steps = append(mr.Steps, s)
		res.Started++
		if ferr == nil {
			res.OK++
		}
		return nil
	}
	var upload struct {
		Data struct {
			URL string `json:"url"`
		} `json:"data"`
	}
	if err := step(mediaSteps[0], func(ctx context.Context) (int, error) {
		status, body, err := r.postForm(ctx, "/api/provider-templates/upload-send-media", co.Token,
			map[string]string{"provider_account_id": strconv.FormatInt(co.ProviderAccountID, 10)}, fmt.Sprintf("invoice-%d.pdf", run))
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("answered %d %s", status, clipBody(body))
		}
		if err == nil {
			err = json.Unmarshal(body, &upload)
		}
		return status, err
	}); err != nil {
		return err
	}
	if upload.Data.URL == "" {
		return fmt.Errorf("media-large: the upload failed: %+v", mr.Steps)
	}
	if err := step(mediaSteps[1], func(ctx context.Context) (int, error) {
		in := map[string]any{"platform": "ofc_chatapp", "sender_key": co.ChannelKey, "contact_key": co.Contacts[0],
			"provider_template_id": tplID, "header_media_url": upload.Data.URL, "enqueue": false}
		b, _ := json.Marshal(in)
		status, body, err := r.api.Do(ctx, "POST", "/api/api-send-message", co.Token, b)
		return status, sentOK(status, body, err)
	}); err != nil {
		return err
	}
	if err := step(mediaSteps[2], func(ctx context.Context) (int, error) {
		return r.fetchDocument(ctx, upload.Data.URL)
	}); err != nil {
		return err
	}
	return step(mediaSteps[3], func(ctx context.Context) (int, error) {
		status, body, err := r.postForm(ctx, "/api/api-send-message", co.Token, map[string]string{"platform": "ofc_chatapp",
			"sender_key": co.ChannelKey, "contact_key": co.Contacts[0], "enqueue": "false"}, fmt.Sprintf("report-%d.pdf", run))
		return status, sentOK(status, body, err)
	})
}

// mediaCompany is media-large's company, made on first use: an official
// channel, one contact whose window is open, and an approved template
// with a DOCUMENT header.
func (r *runner) mediaCompany(ctx context.Context) (*Company, int64, error) {
	const name = "media-large"
	if co := r.scenarioCos[name]; co != nil {
		return co, r.mediaTemplate, nil
	}
	cs, err := r.setup.Companies(ctx, name, 8200, 1, 1)
	if err != nil {
		return nil, 0, err
	}
	co := cs[0]
	if _, err := r.setup.Provider.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: co.BusinessAccountID,
		Templates: []providersim.Template{{Name: "invoice_document", Language: "pt_BR", Category: "UTILITY",
			Components: []providersim.TemplateDefComponent{{Type: "HEADER", Format: "DOCUMENT"}, {Type: "BODY", Text: "Sua fatura."}}}}}); err != nil {
		return nil, 0, err
	}
	var list struct {
		Templates []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"templates"`
	}
	if err := r.api.JSON(ctx, "GET", fmt.Sprintf("/api/provider-templates/for-channel?company_channel_id=%d", co.ChannelID), co.Token, nil, &list); err != nil {
		return nil, 0, err
	}
	for _, t := range list.Templates {
		if t.Name == "invoice_document" {
			if r.scenarioCos == nil {
				r.scenarioCos = map[string]*Company{}
			}
			r.scenarioCos[name], r.mediaTemplate = co, t.ID
			return co, t.ID, nil
		}
	}
	return nil, 0, fmt.Errorf("media-large: the seeded template is not listed: %+v", list.Templates)
}

// postForm POSTs a multipart form of fields and a mediaDocSize PDF named
// fileName, generated as it is sent, so this side holds no copy either.
func (r *runner) postForm(ctx context.Context, path, token string, fields map[string]string, fileName string) (int, []byte, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		var err error
		for k, v := range fields {
			if err == nil {
				err = mw.WriteField(k, v)
			}
		}
		var part io.Writer
		if err == nil {
			part, err = mw.CreateFormFile("file", fileName)
		}
		if err == nil {
			_, err = io.Copy(part, PDFDocument(mediaDocSize))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.stack.GatewayURL+path, pr)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// fetchDocument GETs a media URL (the gateway's own, its host replaced by
// the first replica's address) and checks it is the document sent.
func (r *runner) fetchDocument(ctx context.Context, raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.stack.GatewayURL+u.EscapedPath(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("served %d bytes: %v", n, err)
	}
	want := sha256.New()
	_, _ = io.Copy(want, PDFDocument(mediaDocSize))
	if n != mediaDocSize || string(got.Sum(nil)) != string(want.Sum(nil)) {
		return resp.StatusCode, fmt.Errorf("served %d bytes, not the %d uploaded", n, mediaDocSize)
	}
	return resp.StatusCode, nil
}

// sentOK checks a synchronous send's answer: 200 with Status true.
func sentOK(status int, body []byte, err error) error {
	if err != nil {
		return err
	}
	var out struct {
		Status bool `json:"Status"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil || !out.Status {
		return fmt.Errorf("answered %d %s", status, clipBody(body))
	}
	return nil
}

func clipBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// PDFDocument is a size-byte reader that starts like a PDF (so the gateway
// takes it for one) and repeats a pattern after, never held whole: the
// same bytes on every call, so a copy can be checked against another.
func PDFDocument(size int64) io.Reader {
	head := "%PDF-1.7\n"
	return io.MultiReader(strings.NewReader(head), io.LimitReader(&docPattern{}, size-int64(len(head))))
}

type docPattern struct{ i byte }

func (p *docPattern) Read(b []byte) (int, error) {
	for k := range b {
		b[k] = p.i
		p.i += 7
	}
	return len(b), nil
}
