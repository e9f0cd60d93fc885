package whatsmeow

import (
	"context"
	"errors"
	"strconv"
	"strings"

	wa "go.mau.fi/whatsmeow"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
)

// Messages of the faults the driver returns.
const (
	MsgUnreachable  = "The chat app could not be reached"
	MsgGroupMissing = "Group not found"
	MsgNotInGroup   = "The account is not a member of the group"
	MsgRefused      = "The chat app refused the request"
	// MsgNotOpened is error 463: the chat app refuses a first message to a
	// contact who never wrote to this number (its anti-spam rule for
	// linked devices), until the contact writes.
	MsgNotOpened = "The chat app refused the message: this contact has never written to this number, and it accepts a first message only after they do (error 463)"
)

// codeNotOpened is the send error of MsgNotOpened.
const codeNotOpened = 463

// MapError turns a library error into a fault of the connector contract:
// not logged in → Rule, unknown group → NotFound, not a participant or a
// server refusal → Refused (with the server's code and text in Details),
// anything about the connection → Unavailable (retried when queued).
func MapError(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	var iq *wa.IQError
	var disc *wa.DisconnectedError
	switch {
	case errors.Is(err, wa.ErrNotLoggedIn):
		return fault.Wrap(fault.Rule, connector.MsgNotLogged, err)
	case errors.Is(err, wa.ErrGroupNotFound):
		return fault.Wrap(fault.NotFound, MsgGroupMissing, err)
	case errors.Is(err, wa.ErrNotInGroup):
		return &fault.Error{Kind: fault.Refused, Message: MsgNotInGroup, Details: map[string]any{"reason": MsgNotInGroup}, Err: err}
	case errors.As(err, &iq):
		if iq.Code == 404 {
			return fault.Wrap(fault.NotFound, MsgGroupMissing, err)
		}
		return &fault.Error{Kind: fault.Refused, Message: MsgRefused, Details: map[string]any{"code": iq.Code, "reason": iq.Text}, Err: err}
	case serverCode(err) == codeNotOpened:
		return &fault.Error{Kind: fault.Refused, Message: MsgNotOpened, Details: map[string]any{"code": codeNotOpened, "reason": MsgNotOpened}, Err: err}
	case errors.Is(err, wa.ErrServerReturnedError), errors.Is(err, wa.ErrUnknownServer), errors.Is(err, wa.ErrRecipientADJID),
		errors.Is(err, wa.ErrBroadcastListUnsupported):
		return &fault.Error{Kind: fault.Refused, Message: MsgRefused, Details: map[string]any{"reason": err.Error()}, Err: err}
	case errors.Is(err, wa.ErrNotConnected), errors.Is(err, wa.ErrIQTimedOut), errors.Is(err, wa.ErrMessageTimedOut),
		errors.As(err, &disc), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fault.Wrap(fault.Unavailable, MsgUnreachable, err)
	}
	return fault.Wrap(fault.Unavailable, MsgUnreachable, err)
}

// serverCode is the code of a send the server answered with an error (the
// library reports it as ErrServerReturnedError followed by the number); 0
// for any other error.
func serverCode(err error) int {
	if !errors.Is(err, wa.ErrServerReturnedError) {
		return 0
	}
	msg := err.Error()
	i := strings.LastIndexByte(msg, ' ')
	code, convErr := strconv.Atoi(msg[i+1:])
	if convErr != nil {
		return 0
	}
	return code
}
