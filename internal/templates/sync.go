package templates

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/store"
)

// SyncResult counts what a sync changed.
type SyncResult struct {
	ProviderAccountID int64 `json:"provider_account_id"`
	Added             int   `json:"added"`
	Updated           int   `json:"updated"`
	Disabled          int   `json:"disabled"`
	Total             int   `json:"total"`
}

// Sync reads every template of the channel's provider account and stores
// them: new ones are added, known ones (same name and language) updated in
// place so their ids stay, and those the provider no longer lists are
// marked DISABLED. Errors: Rule for a channel that is not official;
// Refused/Unavailable from the provider (recorded as the account's last
// sync error); Internal.
func (s *Service) Sync(ctx context.Context, ch channels.Channel) (SyncResult, error) {
	res := SyncResult{}
	if ch.TypeID != channels.OfficialChatapp || ch.ProviderAccount == nil {
		return res, fault.New(fault.Rule, "only official channels have provider templates")
	}
	acc := ch.ProviderAccount
	res.ProviderAccountID = acc.ID
	list, err := s.deps.Provider.ListTemplates(ctx, acc)
	if err != nil {
		s.recordSync(ctx, ch, err)
		return res, err
	}
	now := s.deps.Now()
	err = s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		var existing []templateRow
		if err := tx.NewSelect().Model(&existing).Where("t.provider_account_id = ?", acc.ID).Scan(ctx); err != nil {
			return fault.Internalf(err, "read stored templates")
		}
		byKey := map[string]*templateRow{}
		for i := range existing {
			byKey[existing[i].Name+"\x00"+existing[i].Language] = &existing[i]
		}
		seen := map[int64]bool{}
		for _, t := range list {
			row, err := rowFrom(ch, t, now)
			if err != nil {
				return err
			}
			if old := byKey[t.Name+"\x00"+t.Language]; old != nil {
				row.ID, row.CreatedAt = old.ID, old.CreatedAt
				if _, err := tx.NewUpdate().Model(&row).WherePK().ExcludeColumn("created_at").Exec(ctx); err != nil {
					return fault.Internalf(err, "update template %s", t.Name)
				}
				res.Updated++
			} else {
				if _, err := tx.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
					return fault.Internalf(err, "insert template %s", t.Name)
				}
				byKey[t.Name+"\x00"+t.Language] = &row
				res.Added++
			}
			seen[row.ID] = true
		}
		var gone []int64
		for _, old := range existing {
			if !seen[old.ID] && old.Status != StatusDisabled {
				gone = append(gone, old.ID)
			}
		}
		if len(gone) > 0 {
			if _, err := tx.NewUpdate().Model((*templateRow)(nil)).Set("status = ?", StatusDisabled).Set("updated_at = ?", now).
				Where("id IN (?)", bun.In(gone)).Exec(ctx); err != nil {
				return fault.Internalf(err, "disable templates")
			}
		}
		res.Disabled = len(gone)
		res.Total = len(list)
		return upsertSyncState(ctx, tx, ch, &now, "")
	})
	return res, err
}

// rowFrom converts the provider's template to a row.
func rowFrom(ch channels.Channel, t official.Template, now time.Time) (templateRow, error) {
	comps, err := json.Marshal(t.Components)
	if err != nil {
		return templateRow{}, fault.Internalf(err, "encode components")
	}
	row := templateRow{CompanyID: ch.CompanyID, ProviderAccountID: ch.ProviderAccount.ID, ExternalID: t.ID, Name: t.Name,
		Language: t.Language, Category: t.Category, Status: strings.ToUpper(t.Status), ParameterFormat: strings.ToUpper(t.ParameterFormat),
		Components: string(comps), SyncedAt: now, CreatedAt: now, UpdatedAt: now}
	if row.ParameterFormat == "" {
		row.ParameterFormat = "POSITIONAL"
	}
	for _, c := range t.Components {
		switch strings.ToUpper(c.Type) {
		case "HEADER":
			row.HeaderFormat = strings.ToUpper(c.Format)
			if c.Example != nil && len(c.Example.HeaderHandle) > 0 {
				row.HeaderMediaURL = c.Example.HeaderHandle[0]
			}
		case "BUTTONS":
			row.HasButtons = len(c.Buttons) > 0
		}
	}
	return row, nil
}

func upsertSyncState(ctx context.Context, db bun.IDB, ch channels.Channel, syncedAt *time.Time, lastError string) error {
	var errText *string
	if lastError != "" {
		errText = &lastError
	}
	q := `INSERT INTO template_sync_state (provider_account_id, company_id, company_channel_id, synced_at, last_error) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (provider_account_id) DO UPDATE SET company_channel_id = EXCLUDED.company_channel_id, last_error = EXCLUDED.last_error`
	if syncedAt != nil {
		q += `, synced_at = EXCLUDED.synced_at`
	}
	if _, err := db.ExecContext(ctx, q, ch.ProviderAccount.ID, ch.CompanyID, ch.ID, syncedAt, errText); err != nil {
		return fault.Internalf(err, "record template sync")
	}
	return nil
}

// recordSync notes a failed sync on the account (so the periodic job keeps
// trying and an operator can see why).
func (s *Service) recordSync(ctx context.Context, ch channels.Channel, cause error) {
	msg := fault.As(cause).Message
	if err := upsertSyncState(ctx, s.deps.DB.Bun, ch, nil, msg); err != nil {
		s.deps.Logger.WarnContext(ctx, "record template sync failure", "err", err)
	}
}

// syncIfNever syncs an account the first time its templates are needed;
// a failure is logged and the (empty) store answers.
func (s *Service) syncIfNever(ctx context.Context, ch channels.Channel) {
	n, err := s.deps.DB.Bun.NewSelect().Table("template_sync_state").Where("provider_account_id = ?", ch.ProviderAccount.ID).
		Where("synced_at IS NOT NULL").Count(ctx)
	if err != nil || n > 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := s.Sync(ctx, ch); err != nil {
		s.deps.Logger.WarnContext(ctx, "first template sync failed", "provider_account_id", ch.ProviderAccount.ID, "err", err)
	}
}

// SyncAll syncs every account whose templates are in use and were last
// synced before olderThan ago. It returns how many accounts it synced and
// the first error (the others are recorded per account).
func (s *Service) SyncAll(ctx context.Context, olderThan time.Duration) (int, error) {
	type state struct {
		ProviderAccountID int64      `bun:"provider_account_id"`
		CompanyID         int64      `bun:"company_id"`
		CompanyChannelID  int64      `bun:"company_channel_id"`
		SyncedAt          *time.Time `bun:"synced_at"`
	}
	var states []state
	cutoff := s.deps.Now().Add(-olderThan)
	if err := s.deps.DB.Bun.NewSelect().Table("template_sync_state").Column("provider_account_id", "company_id", "company_channel_id", "synced_at").
		Where("synced_at IS NULL OR synced_at <= ?", cutoff).Order("provider_account_id").Scan(ctx, &states); err != nil {
		return 0, fault.Internalf(err, "list accounts to sync")
	}
	var first error
	done := 0
	for _, st := range states {
		ch, err := s.deps.Channels.Get(ctx, st.CompanyID, st.CompanyChannelID)
		if err == nil {
			_, err = s.Sync(ctx, ch)
		}
		if err != nil {
			s.deps.Logger.WarnContext(ctx, "template sync failed", "provider_account_id", st.ProviderAccountID, "err", err)
			if first == nil {
				first = fmt.Errorf("account %d: %w", st.ProviderAccountID, err)
			}
			continue
		}
		done++
	}
	return done, first
}

// SyncArgs is the periodic job that keeps stored templates current.
type SyncArgs struct{}

// Kind implements river.JobArgs.
func (SyncArgs) Kind() string { return "templates.sync" }

// SyncWorker runs SyncAll for accounts not synced within Interval.
type SyncWorker struct {
	river.WorkerDefaults[SyncArgs]
	svc      *Service
	interval time.Duration
}

// NewSyncWorker returns the periodic sync worker.
func NewSyncWorker(svc *Service, interval time.Duration) *SyncWorker {
	return &SyncWorker{svc: svc, interval: interval}
}

// Work implements river.Worker. Per-account failures are recorded and
// retried at the next period rather than retrying the whole job.
func (w *SyncWorker) Work(ctx context.Context, _ *river.Job[SyncArgs]) error {
	n, err := w.svc.SyncAll(ctx, w.interval/2)
	if err != nil {
		w.svc.deps.Logger.WarnContext(ctx, "periodic template sync incomplete", "synced", n, "err", err)
	}
	return nil
}
