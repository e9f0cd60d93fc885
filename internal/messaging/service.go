package messaging

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/ratelimit"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// ChannelDirectory resolves company channels (*channels.Service).
type ChannelDirectory interface {
	FindByKey(ctx context.Context, companyID int64, t channels.TypeID, key string) (channels.Channel, error)
	Get(ctx context.Context, companyID, id int64) (channels.Channel, error)
}

// JobInserter inserts River jobs inside a transaction (*jobs.Runner).
type JobInserter interface {
	Insert(ctx context.Context, tx *store.Tx, args river.JobArgs, opts *river.InsertOpts) error
}

// Deps are what the messaging service works with.
type Deps struct {
	DB            *store.DB
	Channels      ChannelDirectory
	Conversations conversations.ForMessaging
	Events        webhooks.Publisher
	// Limiter shares the send rate limit between replicas (Redis) or within
	// one process (memory).
	Limiter ratelimit.Limiter
	// Templates resolves official template sends; nil refuses them.
	Templates TemplatePreparer
	Now       clock.Clock
	Times     clock.Formatter
	// Files stores message files (internal/filestore); MissingFiles logs,
	// once per file, a row whose file the store lacks.
	Files        filestore.Store
	MissingFiles *filestore.MissingLog
	// PublicBaseURL is how clients reach the gateway: the URLs of message
	// files (media.url) start with it.
	PublicBaseURL string
	Logger        *slog.Logger
}

// Options tune limits; zero values mean the documented defaults.
type Options struct {
	// SendRate is the number of sends a company may make per SendWindow
	// (600 per minute, shared by all its tokens).
	SendRate   int
	SendWindow time.Duration
	// MaxAttempts bounds a queued send's attempts (default 8).
	MaxAttempts int
	// Workers is how many queued sends this replica's queue loop works at
	// once (default 256, as the WORKERS setting).
	Workers int
	// SendShare is how many of those one sender (a company's channel)
	// holds at most (default 16, as SEND_SLOTS_PER_SENDER; at most
	// Workers).
	SendShare int
	// SendLease is how long a claim holds a queued message before the
	// queue takes its replica for dead (default a minute); an attempt
	// still running renews it every third of it.
	SendLease time.Duration
	// Registerer receives the messaging metrics (none when nil).
	Registerer prometheus.Registerer
	// DebugRegisterer receives the tuning figures (none when nil): which
	// path stored a send, and how many outcomes one write took.
	DebugRegisterer prometheus.Registerer
	// MediaURLLifetime is how long a minted URL of a message's file stays
	// valid (MEDIA_URL_TTL; default 7 days).
	MediaURLLifetime time.Duration
}

// Service is the messaging capability.
type Service struct {
	deps    Deps
	opts    Options
	metrics *metrics

	mu          sync.RWMutex
	transports  map[channels.TypeID]Transport
	authorizers map[channels.TypeID]GroupAuthorizer
	fetchers    map[channels.TypeID]MediaFetcher
	jobs        JobInserter
	queue       *sendQueue
	sent        *workqueue.Group[sentRecord, sentResult] // Sent outcomes, a group commit (outcome.go)
	handed      *workqueue.Group[handOffRecord, bool]    // hand-offs, a group commit (attempt.go)
	insert      messageInsert                            // storeOne's INSERT (PostgreSQL)
}

// NewService returns the messaging service. Transports and group
// authorizers are registered by the channel capabilities; the job inserter
// of media fetches is attached with UseJobs once the River runner (which
// needs this service's workers) exists.
func NewService(deps Deps, opts Options) *Service {
	if deps.Now == nil {
		deps.Now = clock.System
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if opts.SendRate <= 0 {
		opts.SendRate = 600
	}
	if opts.SendWindow <= 0 {
		opts.SendWindow = time.Minute
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.Workers <= 0 {
		opts.Workers = 256
	}
	if opts.SendShare <= 0 {
		opts.SendShare = defaultSendShare
	}
	if opts.SendLease <= 0 {
		opts.SendLease = defaultSendLease
	}
	if opts.MediaURLLifetime <= 0 {
		opts.MediaURLLifetime = DefaultMediaURLLifetime
	}
	s := &Service{deps: deps, opts: opts, metrics: newMetrics(opts.Registerer, opts.DebugRegisterer), transports: map[channels.TypeID]Transport{}, authorizers: map[channels.TypeID]GroupAuthorizer{},
		fetchers: map[channels.TypeID]MediaFetcher{}, queue: newSendQueue(opts.Workers, opts.SendShare)}
	s.sent, s.handed = s.newSentGroup(), s.newHandOffGroup()
	if deps.DB != nil && deps.DB.Dialect == store.Postgres {
		s.insert = newMessageInsert(deps.DB)
	}
	if deps.DB != nil && opts.Registerer != nil {
		opts.Registerer.MustRegister(&backlog{s: s})
	}
	return s
}

// RegisterTransport makes tr the sender for channels of type t (official:
// the provider client; unofficial: the connector). Call it at wiring time.
func (s *Service) RegisterTransport(t channels.TypeID, tr Transport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transports[t] = tr
}

// RegisterGroupAuthorizer makes ga the group-send check for channels of
// type t. Only the unofficial channel has one.
func (s *Service) RegisterGroupAuthorizer(t channels.TypeID, ga GroupAuthorizer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorizers[t] = ga
}

// UseJobs attaches the River inserter of the media-fetch jobs.
func (s *Service) UseJobs(j JobInserter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = j
}

func (s *Service) transport(t channels.TypeID) Transport {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.transports[t]
}

func (s *Service) authorizer(t channels.TypeID) GroupAuthorizer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.authorizers[t]
}

func (s *Service) inserter() JobInserter {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.jobs
}

// Get returns a company's message. Errors: NotFound (also for another
// company's message).
func (s *Service) Get(ctx context.Context, companyID, id int64) (Message, error) {
	row, err := loadMessage(ctx, s.deps.DB.Bun, companyID, id)
	if err != nil {
		return Message{}, err
	}
	return row.toDomain(), nil
}

// DeleteChannelMessages deletes every message of a company channel inside
// tx (a connection being deleted takes its messages with it). Run the
// returned function after tx commits: it removes the stored files, which a
// rollback could not bring back. Errors: Internal.
func (s *Service) DeleteChannelMessages(ctx context.Context, tx *store.Tx, companyChannelID int64) (afterCommit func(), err error) {
	var paths []string
	if err := tx.NewSelect().Model((*messageRow)(nil)).Column("media_path").
		Where("company_channel_id = ?", companyChannelID).Where("media_path IS NOT NULL").Scan(ctx, &paths); err != nil {
		return nil, fault.Internalf(err, "list channel media")
	}
	if _, err := tx.NewDelete().Model((*messageRow)(nil)).Where("company_channel_id = ?", companyChannelID).Exec(ctx); err != nil {
		return nil, fault.Internalf(err, "delete channel messages")
	}
	return func() {
		for _, p := range paths {
			s.removeMedia(p)
		}
	}, nil
}
