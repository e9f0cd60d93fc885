// Package idempotency owns the Idempotency-Key records: per company and key,
// the fingerprint of the first request and, once it finished, its answer.
// A repeat of the same request within TTL gets that answer back instead of
// doing the work again; a repeat that arrives while the first still runs
// waits for it; the same key on a different request is refused.
package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
)

// TTL is how long a key and its answer are kept.
const TTL = 24 * time.Hour

var (
	// ErrReused means the key was already used for a different request.
	ErrReused = errors.New("idempotency key reused for a different request")
	// ErrInProgress means the first request with the key was still running
	// when the wait bound ran out.
	ErrInProgress = errors.New("idempotency key still in progress")
)

// Answer is a finished request's response as it is replayed.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Options tune the service; zero values take the defaults.
type Options struct {
	Now    clock.Clock
	Logger *slog.Logger
	// Wait bounds how long a repeat waits for the first request (10 s).
	Wait time.Duration
	// Poll is how often a waiting repeat looks again (50 ms).
	Poll time.Duration
	// StaleAfter is how long a claim may stay unfinished before a repeat
	// takes it over (5 min): its request's process died. It is longer than
	// any request may run, so a live request is never taken over.
	StaleAfter time.Duration
	// Secrets seals stored answer bodies, which may hold a secret (a new
	// webhook subscription's); nil stores them in clear. They live 24 h, so
	// a retired key stays in the ring that long after a rotation.
	Secrets *secrets.Keyring
}

// Service keeps the records in the database, so the guarantee holds across
// replicas.
type Service struct {
	db   *store.DB
	opts Options
}

// NewService returns the service over db.
func NewService(db *store.DB, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = clock.System
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = 5 * time.Minute
	}
	return &Service{db: db, opts: opts}
}

type record struct {
	bun.BaseModel `bun:"table:idempotency_keys"`
	CompanyID     int64     `bun:"company_id,pk"`
	Key           string    `bun:"idem_key,pk"`
	Fingerprint   string    `bun:"fingerprint"`
	Owner         string    `bun:"owner"`
	Status        *int      `bun:"status"`
	Header        *string   `bun:"header"`
	Body          []byte    `bun:"body"`
	ClaimedAt     time.Time `bun:"claimed_at"`
	ExpiresAt     time.Time `bun:"expires_at"`
}

// Claim is the right to do the work of a key; exactly one of Complete or
// Release ends it.
type Claim struct {
	s         *Service
	companyID int64
	key       string
	owner     string
}

// Begin starts a request with key for the company. It returns a Claim when
// this request is the one to do the work, or the stored Answer to replay.
// Errors: ErrReused (another fingerprint), ErrInProgress (the first request
// outlasted the wait), the context's error, or Internal.
func (s *Service) Begin(ctx context.Context, companyID int64, key, fingerprint string) (*Claim, *Answer, error) {
	deadline := time.Now().Add(s.opts.Wait) // real time: how long this caller waits
	for {
		now := s.opts.Now()
		owner, err := newOwner()
		if err != nil {
			return nil, nil, fault.Internalf(err, "idempotency owner id")
		}
		rec := record{CompanyID: companyID, Key: key, Fingerprint: fingerprint, Owner: owner, ClaimedAt: now, ExpiresAt: now.Add(TTL)}
		res, err := s.db.Bun.NewInsert().Model(&rec).On("CONFLICT (company_id, idem_key) DO NOTHING").Exec(ctx)
		if err != nil {
			return nil, nil, fault.Internalf(err, "claim idempotency key")
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return &Claim{s: s, companyID: companyID, key: key, owner: owner}, nil, nil
		}

		var cur record
		err = s.db.Bun.NewSelect().Model(&cur).Where("company_id = ? AND idem_key = ?", companyID, key).Scan(ctx)
		if store.IsNoRows(err) {
			continue // released or purged since the insert: claim again
		}
		if err != nil {
			return nil, nil, fault.Internalf(err, "read idempotency key")
		}
		switch {
		case !now.Before(cur.ExpiresAt):
			// Expired but not purged yet: the key is free again.
			if err := s.delete(ctx, companyID, key, cur.Owner); err != nil {
				return nil, nil, err
			}
			continue
		case cur.Fingerprint != fingerprint:
			return nil, nil, ErrReused
		case cur.Status != nil:
			a, err := cur.answer(s.opts.Secrets)
			return nil, a, err
		case now.Sub(cur.ClaimedAt) >= s.opts.StaleAfter:
			res, err := s.db.Bun.NewUpdate().Model((*record)(nil)).Set("owner = ?", owner).Set("claimed_at = ?", now).
				Where("company_id = ? AND idem_key = ? AND owner = ? AND status IS NULL", companyID, key, cur.Owner).Exec(ctx)
			if err != nil {
				return nil, nil, fault.Internalf(err, "take over idempotency key")
			}
			if n, _ := res.RowsAffected(); n == 1 {
				s.opts.Logger.WarnContext(ctx, "idempotency: took over an unfinished key", "company_id", companyID, "claimed_at", cur.ClaimedAt)
				return &Claim{s: s, companyID: companyID, key: key, owner: owner}, nil, nil
			}
			continue
		}
		if !time.Now().Before(deadline) {
			return nil, nil, ErrInProgress
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(s.opts.Poll):
		}
	}
}

// Complete stores the answer of the claimed request for replay.
func (c *Claim) Complete(ctx context.Context, a Answer) error {
	hdr, err := json.Marshal(a.Header)
	if err != nil {
		return fault.Internalf(err, "encode idempotent answer headers")
	}
	h := string(hdr)
	body, err := c.s.opts.Secrets.Seal(bodyPurpose, string(a.Body))
	if err != nil {
		return fault.Internalf(err, "seal idempotent answer")
	}
	res, err := c.s.db.Bun.NewUpdate().Model((*record)(nil)).Set("status = ?", a.Status).Set("header = ?", h).Set("body = ?", []byte(body)).
		Where("company_id = ? AND idem_key = ? AND owner = ?", c.companyID, c.key, c.owner).Exec(ctx)
	if err != nil {
		return fault.Internalf(err, "store idempotent answer")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		c.s.opts.Logger.WarnContext(ctx, "idempotency: claim was taken over before the answer was stored", "company_id", c.companyID)
	}
	return nil
}

// Release gives the key up without an answer (the request failed in a way
// a retry may fix), so the next request with it does the work.
func (c *Claim) Release(ctx context.Context) error {
	return c.s.delete(ctx, c.companyID, c.key, c.owner)
}

func (s *Service) delete(ctx context.Context, companyID int64, key, owner string) error {
	if _, err := s.db.Bun.NewDelete().Model((*record)(nil)).
		Where("company_id = ? AND idem_key = ? AND owner = ?", companyID, key, owner).Exec(ctx); err != nil {
		return fault.Internalf(err, "release idempotency key")
	}
	return nil
}

// Purge deletes expired keys and returns how many.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	res, err := s.db.Bun.NewDelete().Model((*record)(nil)).Where("expires_at <= ?", s.opts.Now()).Exec(ctx)
	if err != nil {
		return 0, fault.Internalf(err, "purge idempotency keys")
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// bodyPurpose binds sealed answer bodies to their column.
const bodyPurpose = "idempotency_keys.body"

func (r record) answer(k *secrets.Keyring) (*Answer, error) {
	body, err := k.Open(bodyPurpose, string(r.Body))
	if err != nil {
		return nil, fault.Internalf(err, "open idempotent answer")
	}
	a := &Answer{Status: *r.Status, Body: []byte(body), Header: http.Header{}}
	if r.Header != nil {
		if err := json.Unmarshal([]byte(*r.Header), &a.Header); err != nil {
			return nil, fault.Internalf(err, "decode idempotent answer headers")
		}
	}
	return a, nil
}

func newOwner() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// PurgeArgs is the periodic job that deletes expired keys.
type PurgeArgs struct{}

// Kind implements river.JobArgs.
func (PurgeArgs) Kind() string { return "idempotency_purge" }

// InsertOpts keeps one purge per period.
func (PurgeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}}
}

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	s *Service
}

func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	n, err := w.s.Purge(ctx)
	if n > 0 {
		w.s.opts.Logger.InfoContext(ctx, "idempotency: purged expired keys", "deleted", n)
	}
	return err
}

// AddWorkers registers the purge worker.
func (s *Service) AddWorkers(workers *river.Workers) {
	river.AddWorker(workers, &purgeWorker{s: s})
}

// PeriodicJobs schedules the purge hourly and once at start.
func (s *Service) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
		func() (river.JobArgs, *river.InsertOpts) { return PurgeArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true, ID: "idempotency_purge"})}
}
