package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/idempotency"
)

// Messages of the two Idempotency-Key refusals (documented in openapi.yaml).
const (
	idempotencyReusedMessage     = "This Idempotency-Key was already used for a different request."
	idempotencyInProgressMessage = "A request with this Idempotency-Key is still being processed; retry later."
)

// storedAnswerLimit bounds the answer kept for replay; the answers of the
// idempotent operations are small JSON documents far below it.
const storedAnswerLimit = 256 << 10

// replayedHeaders are the response headers a replay repeats.
var replayedHeaders = []string{"Content-Type", "Location"}

// idempotent makes the operations marked x-idempotent honour an
// Idempotency-Key: it runs after authentication and validation, so a request
// the document refuses never claims a key, and wraps the handler, so the
// work happens once per company, key and request.
func idempotent(keys *idempotency.Service, logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		op := operationFrom(ctx)
		key := r.Header.Get("Idempotency-Key")
		p, authenticated := auth.FromContext(ctx)
		if keys == nil || key == "" || op == nil || op.Extensions["x-idempotent"] != true || !authenticated {
			next.ServeHTTP(w, r)
			return
		}
		fp, err := requestFingerprint(r)
		if err != nil {
			writeError(w, r, logger, op, fault.Wrap(fault.Invalid, "The request could not be read.", err))
			return
		}
		claim, answer, err := keys.Begin(ctx, p.CompanyID, key, fp)
		switch {
		case errors.Is(err, idempotency.ErrReused):
			writeDocumented(w, op, http.StatusUnprocessableEntity, idempotencyReusedMessage, map[string][]string{"Idempotency-Key": {idempotencyReusedMessage}})
			return
		case errors.Is(err, idempotency.ErrInProgress):
			writeDocumented(w, op, http.StatusConflict, idempotencyInProgressMessage, nil)
			return
		case err != nil:
			writeError(w, r, logger, op, err)
			return
		case answer != nil:
			for k, vs := range answer.Header {
				w.Header()[k] = vs
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(answer.Status)
			_, _ = w.Write(answer.Body)
			return
		}

		rec := &answerRecorder{statusRecorder: statusRecorder{ResponseWriter: w}}
		// The key must end claimed with an answer or released, whatever
		// happens to the request: a client that hung up or a handler that
		// panicked must not leave it blocked until it goes stale.
		finish := context.WithoutCancel(ctx)
		defer func() {
			if p := recover(); p != nil {
				if err := claim.Release(finish); err != nil {
					logger.ErrorContext(ctx, "idempotency: release after panic", "err", err)
				}
				panic(p)
			}
		}()
		next.ServeHTTP(rec, r)
		if !rec.storable() {
			if err := claim.Release(finish); err != nil {
				logger.ErrorContext(ctx, "idempotency: release", "request_id", requestID(ctx), "err", err)
			}
			return
		}
		kept := http.Header{}
		for _, h := range replayedHeaders {
			if v := rec.Header().Values(h); len(v) > 0 {
				kept[h] = v
			}
		}
		if err := claim.Complete(finish, idempotency.Answer{Status: rec.status, Header: kept, Body: rec.body.Bytes()}); err != nil {
			// The answer went out; only its replay is lost, and the key stays
			// claimed until it goes stale, so a retry cannot redo the work.
			logger.ErrorContext(ctx, "idempotency: store answer", "request_id", requestID(ctx), "err", err)
		}
	})
}

// answerRecorder passes the response through and keeps a copy for replay.
type answerRecorder struct {
	statusRecorder
	body     bytes.Buffer
	overflow bool
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.body.Len()+len(b) <= storedAnswerLimit {
		a.body.Write(b)
	} else {
		a.overflow = true
	}
	return a.statusRecorder.Write(b)
}

// storable reports whether the answer is the request's outcome. A rate
// limit, a server failure and a 509 refusal (rules, connection or provider:
// nothing was accepted) did nothing a retry must not repeat, so those
// release the key and a retry after the cause is fixed does the work.
func (a *answerRecorder) storable() bool {
	return a.status != 0 && a.status < 500 && a.status != http.StatusTooManyRequests && !a.overflow
}

// writeDocumented answers status with the body op documents for it:
// message, plus success/status false and errors where that schema has them.
func writeDocumented(w http.ResponseWriter, op *openapi3.Operation, status int, msg string, fields map[string][]string) {
	schema := responseSchema(op, status)
	body := map[string]any{"message": msg}
	for _, flag := range []string{"success", "status"} {
		if hasProperty(schema, flag) {
			body[flag] = false
		}
	}
	if hasProperty(schema, "errors") {
		if fields == nil {
			fields = map[string][]string{}
		}
		body["errors"] = fields
	}
	writeJSON(w, status, body)
}

// requestFingerprint identifies "the same request" for a key: method, path,
// query and body. JSON bodies compare by value (member order and spacing do
// not matter) and multipart forms by their parts (a client library picks a
// new boundary on every retry). It leaves r.Body readable.
func requestFingerprint(r *http.Request) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s?%s\n", r.Method, r.URL.Path, r.URL.Query().Encode())
	if f := formOf(r.Context()); f != nil && !f.unreadable {
		// The form as the edge spooled it: each part hashed as it arrived.
		fmt.Fprint(h, "multipart\n")
		for _, p := range f.parts {
			sum := sha256.Sum256(p.text)
			if p.file != nil {
				sum = p.file.SHA256
			}
			fmt.Fprintf(h, "%q %q %q %x\n", p.name, p.fileName, p.header.Get("Content-Type"), sum)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "", err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if mediaType(r.Header.Get("Content-Type")) == "application/json" {
		if canonical, ok := canonicalJSON(body); ok {
			fmt.Fprintf(h, "json\n%s", canonical)
			return hex.EncodeToString(h.Sum(nil)), nil
		}
	}
	fmt.Fprintf(h, "raw\n%s", body)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func canonicalJSON(body []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	out, err := json.Marshal(v) // map keys come out sorted
	return out, err == nil
}
