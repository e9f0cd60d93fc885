package whatsmeow

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/chatmsg/gateway/internal/connector"
	gwstore "github.com/chatmsg/gateway/internal/store"
)

// The media inbox. The library hands events over on one goroutine per
// connection and acknowledges a message once the handler returns; a media
// download there (seconds, sometimes a minute) would hold up every other
// event of the connection. So a message with media is first written to
// this table — a quick local write, after which the message may be
// acknowledged, since it can no longer be lost — and a worker of the
// session downloads the file and hands the message over, deleting the row
// only once it is stored. Rows a replica could not finish (crash, lease
// lost) are finished by whichever replica opens the session next.

// inboxDDL is the same on both engines.
const inboxDDL = `CREATE TABLE IF NOT EXISTS whatsmeow_gateway_inbox (
	channel_id BIGINT NOT NULL,
	external_id TEXT NOT NULL,
	inbound TEXT NOT NULL,
	message TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	created_ms BIGINT NOT NULL,
	PRIMARY KEY (channel_id, external_id)
)`

// maxDownloadAttempts bounds the tries of one file: after them the message
// is handed over with its text only (the chat app's media links expire),
// rather than never.
const maxDownloadAttempts = 5

// inboxPoll is how often a session looks at its inbox without being told.
const inboxPoll = 30 * time.Second

func createInbox(ctx context.Context, db *gwstore.DB) error {
	_, err := db.Bun.ExecContext(ctx, inboxDDL)
	return err
}

// park writes a media message to the inbox and wakes the worker.
func (s *session) park(ctx context.Context, in connector.Inbound, content *waE2E.Message) error {
	in.File = nil // downloaded later; its name and type are read again from content
	inJSON, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode inbound: %w", err)
	}
	raw, err := proto.Marshal(content)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	_, err = s.d.db.Bun.NewRaw(`INSERT INTO whatsmeow_gateway_inbox (channel_id, external_id, inbound, message, created_ms) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (channel_id, external_id) DO NOTHING`,
		s.acct.ChannelID, in.ExternalID, string(inJSON), base64.StdEncoding.EncodeToString(raw), s.d.now().UnixMilli()).Exec(ctx)
	if err != nil {
		return fmt.Errorf("park media message: %w", err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

type inboxRow struct {
	ExternalID string `bun:"external_id"`
	Inbound    string `bun:"inbound"`
	Message    string `bun:"message"`
	Attempts   int    `bun:"attempts"`
}

// runInbox is the session's worker: it drains the inbox when told and
// every inboxPoll, until the session closes.
func (s *session) runInbox() {
	tick := time.NewTicker(inboxPoll)
	defer tick.Stop()
	for {
		s.drainInbox(context.Background())
		select {
		case <-s.done:
			return
		case <-s.kick:
		case <-tick.C:
		}
	}
}

// drainInbox hands over every parked message of the connection it can:
// downloaded, or with its text only once the download failed too often. It
// stops at the first message the handler refuses (lease lost, database
// down): the rest waits for the next round or the next holder.
func (s *session) drainInbox(ctx context.Context) {
	var rows []inboxRow
	err := s.d.db.Bun.NewRaw(`SELECT external_id, inbound, message, attempts FROM whatsmeow_gateway_inbox WHERE channel_id = ? ORDER BY created_ms, external_id`,
		s.acct.ChannelID).Scan(ctx, &rows)
	if err != nil {
		s.d.log.Warn("read media inbox", "channel_id", s.acct.ChannelID, "err", err)
		return
	}
	for _, r := range rows {
		if s.isClosed() {
			return
		}
		var in connector.Inbound
		raw, err := base64.StdEncoding.DecodeString(r.Message)
		var msg waE2E.Message
		if err == nil {
			err = json.Unmarshal([]byte(r.Inbound), &in)
		}
		if err == nil {
			err = proto.Unmarshal(raw, &msg)
		}
		if err != nil {
			// Written by this code, so unreadable only if corrupted: say so
			// and drop it rather than block the inbox for ever.
			s.d.log.Error("unreadable media inbox row dropped", "channel_id", s.acct.ChannelID, "id", r.ExternalID, "err", err)
			s.unpark(ctx, r.ExternalID)
			continue
		}
		_, _, media, file, _ := content(&msg)
		data, err := s.download(ctx, media)
		if err != nil {
			if r.Attempts+1 < maxDownloadAttempts {
				s.d.log.Warn("download inbound media; will try again", "channel_id", s.acct.ChannelID, "id", r.ExternalID, "attempt", r.Attempts+1, "err", err)
				_, _ = s.d.db.Bun.NewRaw(`UPDATE whatsmeow_gateway_inbox SET attempts = attempts + 1 WHERE channel_id = ? AND external_id = ?`,
					s.acct.ChannelID, r.ExternalID).Exec(ctx)
				continue
			}
			s.d.log.Error("inbound media could not be downloaded; the message is kept without its file", "channel_id", s.acct.ChannelID, "id", r.ExternalID, "err", err)
			file = nil
		} else if file != nil {
			file.Data = data
		}
		in.File = file
		if err := s.h.Inbound(ctx, in); err != nil {
			s.d.log.Warn("parked message not stored; kept for later", "channel_id", s.acct.ChannelID, "id", r.ExternalID, "err", err)
			return
		}
		s.unpark(ctx, r.ExternalID)
	}
}

func (s *session) unpark(ctx context.Context, externalID string) {
	_, err := s.d.db.Bun.NewRaw(`DELETE FROM whatsmeow_gateway_inbox WHERE channel_id = ? AND external_id = ?`, s.acct.ChannelID, externalID).Exec(ctx)
	if err != nil {
		// Handed over already: a second hand-over is a duplicate messaging
		// ignores.
		s.d.log.Warn("remove parked message", "channel_id", s.acct.ChannelID, "id", externalID, "err", err)
	}
}

// download fetches a file with the session's client (or the test's
// DownloadFunc).
func (s *session) download(ctx context.Context, media wa.DownloadableMessage) ([]byte, error) {
	if media == nil {
		return nil, fmt.Errorf("no media in the parked message")
	}
	if s.d.DownloadFunc != nil {
		return s.d.DownloadFunc(ctx, media)
	}
	s.mu.Lock()
	cli := s.client
	s.mu.Unlock()
	if cli == nil {
		return nil, fmt.Errorf("no client")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return cli.Download(ctx, media)
}

func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
