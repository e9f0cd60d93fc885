package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/fault"
)

// statusPreference lists, per error kind, the statuses to answer with in
// order of preference; the first one the operation documents wins. This is
// the one place that maps kinds to statuses, and it lets the document decide
// per endpoint (e.g. "not found" is 404 on the template list, 509 on webhook
// management).
var statusPreference = map[fault.Kind][]int{
	fault.Unauthenticated:    {401},
	fault.Forbidden:          {403},
	fault.NotFound:           {404, 509, 422},
	fault.Invalid:            {0 /* x-validation-status */, 422, 509, 400},
	fault.Rule:               {509, 422, 400},
	fault.WindowClosed:       {409, 509},
	fault.GroupNotAuthorized: {400, 509},
	fault.RateLimited:        {429},
	fault.Quota:              {402, 509},
	fault.Refused:            {509},
	fault.Unavailable:        {503, 509},
	fault.NotImplemented:     {501},
	fault.Internal:           {500},
}

// statusFor picks the status for kind on op.
func statusFor(op *openapi3.Operation, kind fault.Kind) int {
	prefs, ok := statusPreference[kind]
	if !ok {
		return http.StatusInternalServerError
	}
	for _, s := range prefs {
		if s == 0 {
			s = validationStatus(op)
		}
		if s == http.StatusNotFound && op != nil && op.Extensions["x-simulator"] == true {
			// A simulator operation's 404 means "the simulator is not the
			// driver" (the path does not exist); its missing records keep
			// the connection endpoints' 509.
			continue
		}
		if op == nil || documented(op, s) {
			return s
		}
	}
	// An undocumented combination is a bug in the document or the code;
	// answer the most specific status anyway rather than hide the error.
	if prefs[0] == 0 {
		return validationStatus(op)
	}
	return prefs[0]
}

// writeError answers err the way op documents it. The body is built from the
// documented schema for the chosen status: `message` always, `success:false`
// or `status:false` where that schema has them, `errors` for field errors,
// `details` for a remote party's reason; text/plain where the document says
// so (the plan-quota answer).
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, op *openapi3.Operation, err error) {
	fe := fault.As(err)
	status := statusFor(op, fe.Kind)
	if errors.Is(fe, errBodyTooLarge) && documented(op, http.StatusRequestEntityTooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	// The logged cause is clipped: causes can quote client input (a value,
	// a driver's echo of it), and one request must not buy a log line that
	// grows with what it sent.
	if fe.Kind == fault.Internal {
		logger.ErrorContext(r.Context(), "request failed", "request_id", requestID(r.Context()), "operation", operationID(op),
			"err", clip(causeText(err), maxLogCause), "status", status)
	} else if fe.Err != nil {
		logger.WarnContext(r.Context(), "request refused", "request_id", requestID(r.Context()), "operation", operationID(op),
			"kind", fe.Kind.String(), "err", clip(causeText(fe.Err), maxLogCause), "status", status)
	}
	msg := fe.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	if fe.Kind == fault.RateLimited {
		secs := fe.RetryAfterSeconds
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if isPlainText(op, status) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(msg))
		return
	}
	schema := responseSchema(op, status)
	body := map[string]any{"message": msg}
	if hasProperty(schema, "success") {
		body["success"] = false
	}
	if hasProperty(schema, "status") {
		body["status"] = false
	}
	if hasProperty(schema, "errors") {
		fields := fe.Fields
		if fields == nil {
			fields = map[string][]string{}
		}
		body["errors"] = fields
	}
	if hasProperty(schema, "details") && fe.Details != nil {
		body["details"] = fe.Details
	}
	writeJSON(w, status, body)
}

// maxLogCause bounds the logged text of an error's cause.
const maxLogCause = 400

// errBodyTooLarge marks a body over its operation's limit, answered 413
// where the operation documents it.
var errBodyTooLarge = errors.New("request body too large")

func causeText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func operationID(op *openapi3.Operation) string {
	if op == nil {
		return "unmatched"
	}
	return op.OperationID
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
