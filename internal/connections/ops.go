package connections

import (
	"context"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/connector/sim"
	"github.com/chatmsg/gateway/internal/fault"
)

// op is one call on a connection's live session. Ops are plain values so
// they can cross the mailbox as JSON when the session lives on another
// replica; run executes on the holder and answers the type invoke expects.
type op interface {
	name() string
	run(ctx context.Context, s *Service, l *live) (any, error)
}

var opTypes = map[string]func() op{
	"qr": func() op { return &opQR{} }, "logout": func() op { return &opLogout{} }, "close": func() op { return &opClose{} },
	"contacts": func() op { return &opContacts{} }, "groups": func() op { return &opGroups{} },
	"group_info": func() op { return &opGroupInfo{} }, "check": func() op { return &opCheck{} },
	"send": func() op { return &opSend{} }, "edit": func() op { return &opEdit{} }, "revoke": func() op { return &opRevoke{} },
	"sim_scan": func() op { return &opSimScan{} }, "sim_unlink": func() op { return &opSimUnlink{} },
	"sim_contacts": func() op { return &opSimContacts{} }, "sim_group": func() op { return &opSimGroup{} },
	"sim_inbound": func() op { return &opSimInbound{} }, "sim_receipt": func() op { return &opSimReceipt{} },
	"sim_outbox": func() op { return &opSimOutbox{} },
}

type none struct{}

type opQR struct {
	Opts connector.PairingOptions `json:"opts"`
}

func (opQR) name() string { return "qr" }
func (o opQR) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return l.sess.Pairing(ctx, o.Opts)
}

type opLogout struct{}

func (opLogout) name() string { return "logout" }
func (opLogout) run(ctx context.Context, s *Service, l *live) (any, error) {
	if err := l.sess.Logout(ctx); err != nil {
		return nil, err
	}
	return none{}, s.forgetDevice(ctx, l, "logged out through the API")
}

// opClose ends a held session without logging out (the number changed).
type opClose struct{}

func (opClose) name() string { return "close" }
func (opClose) run(ctx context.Context, s *Service, l *live) (any, error) {
	s.drop(l)
	s.release(ctx, l.channelID, l.fence)
	return none{}, nil
}

type opContacts struct{}

func (opContacts) name() string { return "contacts" }
func (opContacts) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return l.sess.Contacts(ctx)
}

type opGroups struct{}

func (opGroups) name() string { return "groups" }
func (opGroups) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return l.sess.Groups(ctx)
}

type opGroupInfo struct {
	Key string `json:"key"`
}

func (opGroupInfo) name() string { return "group_info" }
func (o opGroupInfo) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return l.sess.GroupInfo(ctx, o.Key)
}

type opCheck struct {
	Entries []string `json:"entries"`
	Groups  bool     `json:"groups"`
}

func (opCheck) name() string { return "check" }
func (o opCheck) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return l.sess.Check(ctx, o.Entries, o.Groups)
}

type opSend struct {
	Message connector.Outgoing `json:"message"`
}

func (opSend) name() string { return "send" }
func (o opSend) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return l.sess.Send(ctx, o.Message)
}

type opEdit struct {
	Chat       connector.Chat `json:"chat"`
	ExternalID string         `json:"external_id"`
	Text       string         `json:"text"`
}

func (opEdit) name() string { return "edit" }
func (o opEdit) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return none{}, l.sess.Edit(ctx, o.Chat, o.ExternalID, o.Text)
}

type opRevoke struct {
	Chat       connector.Chat `json:"chat"`
	ExternalID string         `json:"external_id"`
}

func (opRevoke) name() string { return "revoke" }
func (o opRevoke) run(ctx context.Context, _ *Service, l *live) (any, error) {
	return none{}, l.sess.Revoke(ctx, o.Chat, o.ExternalID)
}

// Simulator control ops: they run on the holder because the simulated chat
// app lives in the holder's process.

// MsgSimulatorDisabled answers control calls when another driver runs.
const MsgSimulatorDisabled = "The chat-app simulator is not enabled: start the gateway with CONNECTOR_DRIVER=simulator"

func simSession(l *live) (*sim.Session, error) {
	ss, ok := l.sess.(*sim.Session)
	if !ok {
		return nil, fault.New(fault.NotImplemented, MsgSimulatorDisabled)
	}
	return ss, nil
}

type opSimScan struct{}

func (opSimScan) name() string { return "sim_scan" }
func (opSimScan) run(ctx context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return none{}, ss.Scan(ctx)
}

type opSimUnlink struct{}

func (opSimUnlink) name() string { return "sim_unlink" }
func (opSimUnlink) run(ctx context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return none{}, ss.Unlink(ctx)
}

type opSimContacts struct {
	Contacts []sim.ContactSpec `json:"contacts"`
}

func (opSimContacts) name() string { return "sim_contacts" }
func (o opSimContacts) run(_ context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return ss.SeedContacts(o.Contacts)
}

type opSimGroup struct {
	Group sim.GroupSpec `json:"group"`
}

func (opSimGroup) name() string { return "sim_group" }
func (o opSimGroup) run(_ context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return ss.SeedGroup(o.Group)
}

type opSimInbound struct {
	Message sim.InboundSpec `json:"message"`
}

func (opSimInbound) name() string { return "sim_inbound" }
func (o opSimInbound) run(ctx context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return ss.Deliver(ctx, o.Message)
}

type opSimReceipt struct {
	ExternalID string `json:"external_id"`
	StatusID   int    `json:"status_id"`
	Reason     string `json:"reason"`
}

func (opSimReceipt) name() string { return "sim_receipt" }
func (o opSimReceipt) run(ctx context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return ss.Ack(ctx, o.ExternalID, o.StatusID, o.Reason)
}

type opSimOutbox struct{}

func (opSimOutbox) name() string { return "sim_outbox" }
func (opSimOutbox) run(_ context.Context, _ *Service, l *live) (any, error) {
	ss, err := simSession(l)
	if err != nil {
		return nil, err
	}
	return ss.Outbox(), nil
}
