package eventstream

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// TicketTTL is how long a stream ticket opens streams. A browser's
// EventSource reconnects with the same URL, so a ticket serves every
// reconnect within it; after it the page asks for a new one and resumes
// with last_event_id.
const TicketTTL = time.Minute

// ticketPrefix tells a ticket from a token in logs and support requests.
const ticketPrefix = "est_"

// MsgTicketInvalid answers a stream request whose ticket is unknown or
// expired (401).
const MsgTicketInvalid = "Stream ticket is invalid or expired."

type ticketRow struct {
	bun.BaseModel `bun:"table:event_stream_tickets"`
	TicketHash    string    `bun:"ticket_hash,pk"`
	CompanyID     int64     `bun:"company_id"`
	UserID        int64     `bun:"user_id"`
	TokenID       int64     `bun:"token_id"`
	ExpiresAt     time.Time `bun:"expires_at"`
}

// Ticket is an issued stream ticket.
type Ticket struct {
	Ticket    string
	ExpiresAt time.Time
}

func hashTicket(t string) string {
	sum := sha256.Sum256([]byte(t))
	return hex.EncodeToString(sum[:])
}

// IssueTicket issues a ticket for p's company. The caller (the HTTP
// pipeline) has checked p's permission: the ticket carries it, for
// TicketTTL.
func (s *Service) IssueTicket(ctx context.Context, p auth.Principal) (Ticket, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Ticket{}, fault.Internalf(err, "ticket")
	}
	t := ticketPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now().UTC()
	row := ticketRow{TicketHash: hashTicket(t), CompanyID: p.CompanyID, UserID: p.UserID, TokenID: p.TokenID, ExpiresAt: now.Add(TicketTTL)}
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		// Expired tickets go as new ones come: the table holds about a
		// minute of them.
		if _, err := tx.NewDelete().Model((*ticketRow)(nil)).Where("expires_at < ?", now).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewInsert().Model(&row).Exec(ctx)
		return err
	})
	if err != nil {
		return Ticket{}, fault.Internalf(err, "store ticket")
	}
	return Ticket{Ticket: t, ExpiresAt: row.ExpiresAt}, nil
}

// RedeemTicket returns the company a valid ticket opens streams for.
// Errors: Unauthenticated.
func (s *Service) RedeemTicket(ctx context.Context, ticket string) (int64, error) {
	var row ticketRow
	err := s.db.Bun.NewSelect().Model(&row).Where("ticket_hash = ?", hashTicket(ticket)).
		Where("expires_at > ?", s.now().UTC()).Limit(1).Scan(ctx)
	if store.IsNoRows(err) {
		return 0, fault.New(fault.Unauthenticated, MsgTicketInvalid)
	}
	if err != nil {
		return 0, fault.Internalf(err, "read ticket")
	}
	return row.CompanyID, nil
}
