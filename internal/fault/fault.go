// Package fault is the one error type of the service: every capability
// returns a *fault.Error with a Kind and a message that is safe to show to a
// client; the HTTP adapter maps kinds to the status and body each endpoint's
// contract prescribes, and job workers map them to retry or cancel.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

const (
	// Internal is a failure of the service itself; the message is never shown.
	Internal Kind = iota
	Unauthenticated
	Forbidden
	NotFound
	// Invalid is malformed input (a missing or ill-typed field).
	Invalid
	// Rule is a business-rule violation on well-formed input.
	Rule
	// WindowClosed is the official channel's closed 24-hour session window.
	WindowClosed
	// GroupNotAuthorized is a group send the sender may not make.
	GroupNotAuthorized
	RateLimited
	Quota
	// Unavailable is a dependency (provider, connector) that did not answer.
	Unavailable
	// Refused is a remote party (the provider) that answered no.
	Refused
	// NotImplemented marks a capability this build does not serve yet.
	NotImplemented
)

var kindNames = map[Kind]string{
	Internal: "internal", Unauthenticated: "unauthenticated", Forbidden: "forbidden",
	NotFound: "not_found", Invalid: "invalid", Rule: "rule", WindowClosed: "window_closed",
	GroupNotAuthorized: "group_not_authorized", RateLimited: "rate_limited", Quota: "quota",
	Unavailable: "unavailable", Refused: "refused", NotImplemented: "not_implemented",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a domain error. Message is client-safe; Err is the cause, logged
// but never sent.
type Error struct {
	Kind    Kind
	Message string
	// Fields carries per-field messages for Invalid errors (422 bodies).
	Fields map[string][]string
	// Details carries structured, client-safe context (a provider's reason).
	Details map[string]any
	// RetryAfterSeconds is set on RateLimited errors.
	RetryAfterSeconds int
	Err               error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind with a client-safe message.
func New(kind Kind, message string) *Error { return &Error{Kind: kind, Message: message} }

// Wrap returns an error of kind that keeps err as its (private) cause.
func Wrap(kind Kind, message string, err error) *Error {
	return &Error{Kind: kind, Message: message, Err: err}
}

// Internalf wraps an unexpected failure with context for the logs.
func Internalf(err error, format string, args ...any) *Error {
	return &Error{Kind: Internal, Message: "Internal server error.", Err: fmt.Errorf(format+": %w", append(args, err)...)}
}

// KindOf reports the kind of err; errors that are not *Error are Internal.
func KindOf(err error) Kind {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	return Internal
}

// As returns err as *Error, wrapping foreign errors as Internal.
func As(err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return &Error{Kind: Internal, Message: "Internal server error.", Err: err}
}
