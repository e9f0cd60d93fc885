package app

import (
	"context"
	"fmt"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/connector/sim"
	wmdriver "github.com/chatmsg/gateway/internal/connector/whatsmeow"
)

// newConnections builds the connector driver the configuration names (or
// the one the options give: tests share one simulated chat app between
// in-process replicas) and the connections service over it.
func (a *App) newConnections(ctx context.Context, opts Options) (*connections.Service, error) {
	driver := opts.Connector
	if driver == nil {
		switch a.Config.ConnectorDriver {
		case config.ConnectorWhatsmeow:
			d, err := wmdriver.New(ctx, a.DB, a.Logger, a.Clock)
			if err != nil {
				return nil, err
			}
			driver = d
		case config.ConnectorSimulator, "":
			driver = sim.New(a.Clock)
		default:
			return nil, fmt.Errorf("unknown connector driver %q", a.Config.ConnectorDriver)
		}
	}
	_, a.simulated = driver.(*sim.Driver)
	o := connections.Options{DB: a.DB, Channels: a.Channels, Driver: driver, Now: a.Clock, Logger: a.Logger.With("component", "connections"),
		Registry: a.Registry, Events: a.Webhooks, Times: clock.NewFormatter(a.Config.TimeZone)}
	if opts.ConnectionOptions != nil {
		opts.ConnectionOptions(&o)
	}
	return connections.New(o), nil
}

// wireConnections plugs connections into messaging, both ways: messaging
// sends, edits, revokes and checks group sends through connections on
// unofficial channels; connections hands it inbound messages and receipts,
// and deletes a connection's messages with it.
func (a *App) wireConnections() {
	tr := a.Connections.Transport()
	a.Messaging.RegisterTransport(channels.UnofficialChatapp, tr)
	a.Messaging.RegisterGroupAuthorizer(channels.UnofficialChatapp, tr)
	a.Connections.SetReceiver(a.Messaging)
	a.Connections.OnDelete(a.Messaging.DeleteChannelMessages)
}
