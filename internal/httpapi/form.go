package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/messaging"
)

// A multipart body is read once, at the edge, part by part: text parts are
// kept (each bounded, and the form's text in all), file parts are written
// to the spool as they arrive. Every layer after the edge reads the form:
//
//   - the validator gets the form with each file's bytes left out (the
//     document's files are `format: binary`, whose content it does not
//     check), so it never buffers a file;
//   - the idempotency fingerprint hashes the parts as they were spooled;
//   - handlers bind the text parts from the same skeleton and read files
//     from the spool.
//
// So a 100 MB document costs a replica a few buffers, not 100 MB per layer.
const (
	// maxFormTextBytes bounds the text parts of a form in all: what a JSON
	// body may carry (README: "100 MB of file plus 1 MB of form").
	maxFormTextBytes = 1 << 20
	// maxFormParts bounds the parts of a form: the largest form has a dozen
	// fields and at most 100 variable values.
	maxFormParts = 1000
)

// form is a multipart body read at the edge.
type form struct {
	parts []formPart
	// boundary is the body's; contentType the request's Content-Type.
	boundary, contentType string
	// unreadable: the body is not a multipart form (no boundary, a part
	// cut off); the validator then checks only the parameters.
	unreadable bool
	// problem is the first text the edge refuses (a NUL byte, invalid
	// UTF-8, a part too long). It is answered after the validator's own
	// findings, which the document's messages rank first.
	problem *fault.Error
}

// formPart is one part: text, or a file in the spool.
type formPart struct {
	header         textproto.MIMEHeader
	name, fileName string
	text           []byte
	file           *filestore.Spooled
}

type formKey struct{}

// formOf is the request's multipart form, nil for other bodies.
func formOf(ctx context.Context) *form {
	f, _ := ctx.Value(formKey{}).(*form)
	return f
}

// readForm reads r's multipart body into a form. The error is an answer
// to give at once: a body over its limit (413) or a spool that cannot be
// written (500). Anything wrong with the form itself is recorded in it.
// The caller removes the form's files when the request ends.
func readForm(r *http.Request, op *openapi3.Operation, spool filestore.Spool, human string) (*form, error) {
	f := &form{contentType: r.Header.Get("Content-Type")}
	_, params, err := mime.ParseMediaType(f.contentType)
	f.boundary = params["boundary"]
	if err != nil || f.boundary == "" {
		f.unreadable = true
		return f, nil
	}
	props := multipartProperties(op)
	mr := multipart.NewReader(r.Body, f.boundary)
	textBytes := 0
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return f, f.unread(err, human)
		}
		if len(f.parts) == maxFormParts {
			return f, formTooLarge(fmt.Sprintf("A form may not have more than %d parts", maxFormParts))
		}
		p := formPart{header: part.Header, name: part.FormName(), fileName: part.FileName()}
		if p.fileName != "" && !isText(props[p.name]) {
			// Bounded by the body's own limit (MaxBytesReader).
			p.file, err = spool.Write(part, multipartBodyLimit)
			if err != nil {
				var pathErr *fs.PathError
				if errors.As(err, &pathErr) {
					return f, fault.Internalf(err, "spool a multipart file")
				}
				return f, f.unread(err, human)
			}
			f.parts = append(f.parts, p)
			f.check(op, p.name, p.name, p.fileName)
			continue
		}
		p.text, err = io.ReadAll(io.LimitReader(part, maxTextPartBytes+1))
		if err == nil && len(p.text) > maxTextPartBytes {
			// Kept to its first bytes, which are enough for the validator
			// to judge a length limit; the rest is read and dropped.
			_, err = io.Copy(io.Discard, part)
			f.refuse(op, p.name, "text part too long")
		}
		if err != nil {
			return f, f.unread(err, human)
		}
		if textBytes += len(p.text); textBytes > maxFormTextBytes {
			return f, formTooLarge("The form's text parts may not be greater than 1 MB in all")
		}
		f.parts = append(f.parts, p)
		f.check(op, p.name, p.name, string(p.text))
	}
}

// formTooLarge refuses a form over one of its bounds like a body over its
// size: 413 where the operation documents it.
func formTooLarge(msg string) *fault.Error {
	return &fault.Error{Kind: fault.Invalid, Message: msg, Fields: map[string][]string{"body": {msg}},
		Err: fmt.Errorf("%w: %s", errBodyTooLarge, msg)}
}

// unread records a body that could not be read as a form. A body over its
// limit is answered at once; a form cut off or malformed is the
// validator's "could not be read", like any other unreadable body.
func (f *form) unread(err error, human string) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return tooLarge(human)
	}
	f.unreadable = true
	return nil
}

// check records the first field, file name or text of the form that may
// not be stored.
func (f *form) check(op *openapi3.Operation, field string, texts ...string) {
	for _, s := range texts {
		if why := badText(s); why != "" {
			f.refuse(op, field, why)
			return
		}
	}
}

func (f *form) refuse(op *openapi3.Operation, field, why string) {
	if f.problem == nil {
		field = clip(field, 64)
		f.problem = edgeFault(issue{field: field, message: multipartInvalidMessage(op, field)}, "multipart part "+why)
	}
}

// skeleton is the form as the validator and the binders read it: every
// part with its headers, text parts with their bytes, file parts empty. It
// keeps the body's boundary where Go's writer accepts it, so the request's
// Content-Type stays true.
func (f *form) skeleton() (body []byte, contentType string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	contentType = f.contentType
	if mw.SetBoundary(f.boundary) != nil {
		contentType = mw.FormDataContentType()
	}
	for _, p := range f.parts {
		w, err := mw.CreatePart(p.header)
		if err == nil {
			_, err = w.Write(p.text)
		}
		if err != nil { // a bytes.Buffer does not fail
			panic(err)
		}
	}
	_ = mw.Close()
	return b.Bytes(), contentType
}

// install makes r carry the form: its body is the skeleton (read again
// through GetBody), its context the form.
func (f *form) install(r *http.Request) *http.Request {
	r = r.WithContext(context.WithValue(r.Context(), formKey{}, f))
	if f.unreadable {
		return r
	}
	body, ct := f.skeleton()
	r.Header.Set("Content-Type", ct)
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Body, _ = r.GetBody()
	return r
}

// remove deletes the form's spooled files.
func (f *form) remove(logger *slog.Logger) {
	for _, p := range f.parts {
		if p.file != nil {
			if err := p.file.Remove(); err != nil {
				logger.Warn("remove a spooled upload", "err", err)
			}
		}
	}
}

// file is the form's first file part named name, nil when it has none.
func (f *form) file(name string) *formPart {
	for i := range f.parts {
		if p := &f.parts[i]; p.name == name && p.file != nil {
			return p
		}
	}
	return nil
}

// media is a file part as a message's file, read from the spool.
func (p *formPart) media() *messaging.Media {
	return &messaging.Media{FileName: p.fileName, Size: p.file.Size,
		Open: func(context.Context) (io.ReadCloser, error) { return p.file.Open() }}
}

// multipartProperties are the properties of op's multipart body schema.
func multipartProperties(op *openapi3.Operation) openapi3.Schemas {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	mt := op.RequestBody.Value.Content.Get("multipart/form-data")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	return mt.Schema.Value.Properties
}

// isText reports whether a form property is text, not a file: a property
// the document declares and not as `format: binary`. A client that sends
// text as a file part still has it checked as text.
func isText(prop *openapi3.SchemaRef) bool {
	return prop != nil && prop.Value != nil && prop.Value.Format != "binary"
}
