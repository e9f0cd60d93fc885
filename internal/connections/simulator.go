package connections

import (
	"context"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/connector/sim"
	"github.com/chatmsg/gateway/internal/fault"
)

// Control calls of the simulator driver: the phone and the contacts of a
// connection, driven over the API so tests and local users can pair,
// receive and acknowledge without a real phone. They resolve the connection
// within the company like every other call and run on the replica holding
// its session. With another driver they answer NotImplemented.

func (s *Service) simulated(ctx context.Context, companyID, id int64) (channels.Unofficial, error) {
	if s.driver.Name() != (&sim.Driver{}).Name() {
		return channels.Unofficial{}, fault.New(fault.NotImplemented, MsgSimulatorDisabled)
	}
	return s.resolve(ctx, companyID, Selector{ID: &id})
}

// SimulatorPair scans the current QR code of connection id.
func (s *Service) SimulatorPair(ctx context.Context, companyID, id int64) (channels.Unofficial, error) {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return conn, err
	}
	if conn.Logged {
		return conn, fault.New(fault.Rule, sim.MsgAlreadyLogged)
	}
	if _, err := invoke[none](ctx, s, conn.ID, opSimScan{}); err != nil {
		return conn, err
	}
	return s.resolve(ctx, companyID, Selector{ID: &id})
}

// SimulatorUnlink removes the linked device on the phone.
func (s *Service) SimulatorUnlink(ctx context.Context, companyID, id int64) error {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return err
	}
	if !conn.Logged {
		return fault.New(fault.Rule, connector.MsgNotLogged)
	}
	_, err = invoke[none](ctx, s, conn.ID, opSimUnlink{})
	return err
}

// SimulatorSeedContacts adds contacts to the connection's account.
func (s *Service) SimulatorSeedContacts(ctx context.Context, companyID, id int64, specs []sim.ContactSpec) ([]connector.Contact, error) {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return nil, err
	}
	return invoke[[]connector.Contact](ctx, s, conn.ID, opSimContacts{Contacts: specs})
}

// SimulatorSeedGroup adds a group the connection's account can see.
func (s *Service) SimulatorSeedGroup(ctx context.Context, companyID, id int64, spec sim.GroupSpec) (connector.Group, error) {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return connector.Group{}, err
	}
	return invoke[connector.Group](ctx, s, conn.ID, opSimGroup{Group: spec})
}

// SimulatorInbound makes a contact write to the connection.
func (s *Service) SimulatorInbound(ctx context.Context, companyID, id int64, spec sim.InboundSpec) (connector.Inbound, error) {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return connector.Inbound{}, err
	}
	if !conn.Logged {
		return connector.Inbound{}, fault.New(fault.Rule, connector.MsgNotLogged)
	}
	return invoke[connector.Inbound](ctx, s, conn.ID, opSimInbound{Message: spec})
}

// SimulatorReceipt acknowledges a message the connection sent.
func (s *Service) SimulatorReceipt(ctx context.Context, companyID, id int64, externalID string, statusID int, reason string) (connector.Receipt, error) {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return connector.Receipt{}, err
	}
	if !conn.Logged {
		return connector.Receipt{}, fault.New(fault.Rule, connector.MsgNotLogged)
	}
	return invoke[connector.Receipt](ctx, s, conn.ID, opSimReceipt{ExternalID: externalID, StatusID: statusID, Reason: reason})
}

// SimulatorMessages lists what the connection sent through the simulator.
func (s *Service) SimulatorMessages(ctx context.Context, companyID, id int64) ([]sim.Message, error) {
	conn, err := s.simulated(ctx, companyID, id)
	if err != nil {
		return nil, err
	}
	return invoke[[]sim.Message](ctx, s, conn.ID, opSimOutbox{})
}
