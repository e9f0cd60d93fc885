package connections

import (
	"context"
	"fmt"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
)

// Transport sends, edits and revokes through connections for the messaging
// capability (messaging.Transport for channel type 2), and checks group
// sends (messaging.GroupAuthorizer).
type Transport struct{ s *Service }

var (
	_ messaging.Transport       = (*Transport)(nil)
	_ messaging.GroupAuthorizer = (*Transport)(nil)
	_ messaging.KeyNormalizer   = (*Transport)(nil)
	_ messaging.IDAssigner      = (*Transport)(nil)
)

// NewExternalID implements messaging.IDAssigner with the driver's own id
// scheme (the chat app takes the id from the sender). It needs no live
// session, so messaging can store it before the first attempt on any
// replica.
func (t *Transport) NewExternalID(ch channels.Channel) string {
	if g, ok := t.s.driver.(connector.IDGenerator); ok {
		return g.NewMessageID(connector.Account{ChannelID: ch.ID, CompanyID: ch.CompanyID, Key: ch.Key})
	}
	return ""
}

// Transport returns the messaging transport of unofficial channels.
func (s *Service) Transport() *Transport { return &Transport{s: s} }

// Group authorization messages (answered 400 by the send endpoint).
const (
	MsgNotGroupMember = "The sender is not a member of the group"
	MsgNotGroupAdmin  = "The group is in announce mode and the sender is not an administrator"
)

func (t *Transport) requireLogged(ctx context.Context, ch channels.Channel) error {
	conn, err := t.s.channels.UnofficialByID(ctx, ch.ID)
	if err != nil {
		return err
	}
	if !conn.Logged {
		return fault.New(fault.Rule, connector.MsgNotLogged)
	}
	return nil
}

// Send implements messaging.Transport. Errors: Invalid for a malformed
// contact or group key, Rule when the connection is not logged in or a
// template is asked for, Refused when the chat app refused, Unavailable when
// the session could not be reached.
func (t *Transport) Send(ctx context.Context, ch channels.Channel, out messaging.Outbound) (messaging.SendResult, error) {
	if out.Template != nil {
		return messaging.SendResult{}, fault.New(fault.Rule, "Templates are sent only on official channels")
	}
	chat, err := connector.ParseChat(out.ContactKey, out.IsGroup)
	if err != nil {
		return messaging.SendResult{}, err
	}
	if err := t.requireLogged(ctx, ch); err != nil {
		return messaging.SendResult{}, err
	}
	msg := connector.Outgoing{ExternalID: out.ExternalID, Chat: chat, Text: out.Text}
	if m := out.Media; m != nil {
		// Whole, unlike the official channel's streamed upload: the chat
		// app's client encrypts a file in memory, and a call forwarded to
		// the replica holding the session carries it.
		data, err := m.ReadAll(ctx)
		if err != nil {
			return messaging.SendResult{}, fmt.Errorf("read the file of message %d: %w", out.MessageID, err)
		}
		msg.File = &connector.File{Name: m.FileName, ContentType: m.ContentType, Data: data}
	}
	if err := out.HandOff(ctx); err != nil {
		return messaging.SendResult{}, err
	}
	sent, err := invoke[connector.Sent](ctx, t.s, ch.ID, opSend{Message: msg})
	if err != nil {
		return messaging.SendResult{}, err
	}
	return messaging.SendResult{ExternalID: sent.ExternalID, Raw: map[string]any{
		"driver": t.s.driver.Name(), "id": sent.ExternalID, "chat": chat.Key, "is_group": chat.IsGroup, "timestamp": sent.At.Unix(),
	}}, nil
}

// NormalizeContactKey implements messaging.KeyNormalizer: a number or a
// group key as the chat app addresses it, without the "+", suffixes
// (@s.whatsapp.net, @c.us, @g.us) or device part clients may add, so that
// every spelling of a recipient is one conversation. Errors: Invalid for a
// malformed number or group key.
func (t *Transport) NormalizeContactKey(key string, isGroup bool) (string, error) {
	chat, err := connector.ParseChat(key, isGroup)
	return chat.Key, err
}

// Edit implements messaging.Transport. Errors: as Send's, and Refused when
// the chat app refuses the edit (too late, unknown message).
func (t *Transport) Edit(ctx context.Context, ch channels.Channel, target messaging.Target, text string) error {
	chat, err := connector.ParseChat(target.ContactKey, target.IsGroup)
	if err != nil {
		return err
	}
	if err := t.requireLogged(ctx, ch); err != nil {
		return err
	}
	_, err = invoke[none](ctx, t.s, ch.ID, opEdit{Chat: chat, ExternalID: target.ExternalID, Text: text})
	return err
}

// Revoke implements messaging.Transport. Errors: as Edit's.
func (t *Transport) Revoke(ctx context.Context, ch channels.Channel, target messaging.Target) error {
	chat, err := connector.ParseChat(target.ContactKey, target.IsGroup)
	if err != nil {
		return err
	}
	if err := t.requireLogged(ctx, ch); err != nil {
		return err
	}
	_, err = invoke[none](ctx, t.s, ch.ID, opRevoke{Chat: chat, ExternalID: target.ExternalID})
	return err
}

// AuthorizeGroupSend implements messaging.GroupAuthorizer: the connection
// must be a member of the group and, in announce mode, an administrator.
func (t *Transport) AuthorizeGroupSend(ctx context.Context, ch channels.Channel, groupKey string) error {
	key, err := connector.NormalizeGroupKey(groupKey)
	if err != nil {
		return err
	}
	if err := t.requireLogged(ctx, ch); err != nil {
		return err
	}
	g, err := invoke[connector.Group](ctx, t.s, ch.ID, opGroupInfo{Key: key})
	switch {
	case fault.KindOf(err) == fault.NotFound:
		return fault.New(fault.GroupNotAuthorized, MsgNotGroupMember)
	case err != nil:
		return err
	case !g.IsMember:
		return fault.New(fault.GroupNotAuthorized, MsgNotGroupMember)
	case g.Announce && !g.IsAdmin:
		return fault.New(fault.GroupNotAuthorized, MsgNotGroupAdmin)
	}
	return nil
}
