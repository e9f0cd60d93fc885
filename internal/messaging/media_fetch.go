package messaging

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// PendingMedia is a file of an inbound message that the far side keeps
// and the gateway fetches later (the official provider's media id): the
// message is stored and published at once, and FetchMediaArgs fetches the
// file and publishes the message again with it.
type PendingMedia struct {
	// ID is the far side's id of the file.
	ID string
	// ContentType and FileName are what the far side announced (either
	// may be empty).
	ContentType string
	FileName    string
}

// MediaFetcher fetches the file of an inbound message from the far side
// of a channel kind (the official provider).
type MediaFetcher interface {
	// FetchMedia returns the file behind ref. Errors: Refused when the far
	// side will never give it (unknown, too large), Unavailable when it may
	// later; anything else is retried too.
	FetchMedia(ctx context.Context, ch channels.Channel, ref PendingMedia) (Media, error)
}

// RegisterMediaFetcher makes f the fetcher of pending files of channels
// of type t. Call it at wiring time.
func (s *Service) RegisterMediaFetcher(t channels.TypeID, f MediaFetcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetchers[t] = f
}

func (s *Service) fetcher(t channels.TypeID) MediaFetcher {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.fetchers[t]
}

// mediaFetchAttempts bounds the fetch of one file: with fetchBackoff the
// attempts span about 9 hours, well inside the time the provider keeps a
// contact's media (30 days).
const mediaFetchAttempts = 20

// FetchMediaArgs fetches the pending file of one inbound message.
type FetchMediaArgs struct {
	MessageID int64 `json:"message_id"`
}

// Kind implements river.JobArgs.
func (FetchMediaArgs) Kind() string { return "messaging.fetch_media" }

// FetchMediaWorker runs FetchMedia.
type FetchMediaWorker struct {
	river.WorkerDefaults[FetchMediaArgs]
	svc *Service
}

// NewFetchMediaWorker returns the worker of pending inbound files.
func NewFetchMediaWorker(svc *Service) *FetchMediaWorker { return &FetchMediaWorker{svc: svc} }

// Timeout bounds one attempt: a file of up to 100 MB from the provider.
func (w *FetchMediaWorker) Timeout(*river.Job[FetchMediaArgs]) time.Duration { return 5 * time.Minute }

// NextRetry backs off from 1 second, doubling up to an hour: a short
// provider outage delays the file by seconds, a long one costs few calls.
func (w *FetchMediaWorker) NextRetry(job *river.Job[FetchMediaArgs]) time.Time {
	return time.Now().Add(fetchBackoff(job.Attempt))
}

func fetchBackoff(attempt int) time.Duration {
	return workqueue.Doubling(attempt, time.Second, time.Hour)
}

// Work implements river.Worker.
func (w *FetchMediaWorker) Work(ctx context.Context, job *river.Job[FetchMediaArgs]) error {
	err := w.svc.FetchMedia(ctx, job.Args.MessageID)
	if fault.KindOf(err) == fault.NotFound {
		return river.JobCancel(err) // the message or its channel is gone
	}
	return err
}

// queueMediaFetch inserts the fetch of message id's pending file inside
// the transaction that stores the message, so an accepted message never
// loses its file to a crash.
func (s *Service) queueMediaFetch(ctx context.Context, tx *store.Tx, id int64) error {
	j := s.inserter()
	if j == nil {
		return fault.Internalf(nil, "no job runner to fetch the media of message %d", id)
	}
	if err := j.Insert(ctx, tx, FetchMediaArgs{MessageID: id}, &river.InsertOpts{MaxAttempts: mediaFetchAttempts}); err != nil {
		return fault.Internalf(err, "queue the media fetch of message %d", id)
	}
	return nil
}

// FetchMedia fetches the pending file of an inbound message from its
// channel's far side, stores it, attaches it to the message and publishes
// the message again (now with `media`), in one transaction. A message
// whose file is no longer pending changes nothing. A file the far side
// refuses for good is given up: the message keeps its caption, without a
// file, and is not published again.
//
// Errors: NotFound when the message or its channel no longer exists;
// Unavailable and others when the fetch may succeed later (the job
// retries); Internal.
func (s *Service) FetchMedia(ctx context.Context, messageID int64) error {
	row, err := loadMessageByID(ctx, s.deps.DB.Bun, messageID)
	if err != nil {
		return err
	}
	if row.MediaPendingID == nil {
		return nil
	}
	pendingID := *row.MediaPendingID
	ch, err := s.deps.Channels.Get(ctx, row.CompanyID, row.CompanyChannelID)
	if err != nil {
		return err
	}
	f := s.fetcher(ch.TypeID)
	if f == nil {
		return fault.Internalf(nil, "no media fetcher for channels of type %d", ch.TypeID)
	}
	media, err := f.FetchMedia(ctx, ch, PendingMedia{ID: pendingID, ContentType: deref(row.MediaContentType), FileName: deref(row.MediaName)})
	if fault.KindOf(err) == fault.Refused {
		s.deps.Logger.WarnContext(ctx, "inbound media refused by the far side; the message stays without it",
			"message_id", row.ID, "channel_id", ch.ID, "err", err)
		_, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).Set("media_pending_id = NULL").
			Where("id = ?", row.ID).Where("media_pending_id = ?", pendingID).Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "give up the media of message %d", row.ID)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if media.ContentType == "" {
		ct, err := media.Sniff(ctx)
		if err != nil {
			return fault.Internalf(err, "read fetched media of message %d", row.ID)
		}
		media.ContentType = ct
	}
	rel, err := s.saveMedia(ctx, row.CompanyID, &media)
	if err != nil {
		return err // an unreachable store: the job tries again
	}
	attached := false
	err = s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		res, err := tx.NewUpdate().Model((*messageRow)(nil)).
			Set("media_path = ?", rel).Set("media_name = ?", nullable(media.FileName)).
			Set("media_content_type = ?", media.ContentType).Set("media_size = ?", media.Size).
			Set("media_pending_id = NULL").Set("updated_at = ?", s.deps.Now()).Set(bumpVersion).
			Where("id = ?", row.ID).Where("media_pending_id = ?", pendingID).Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "attach the media of message %d", row.ID)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // another attempt attached it first
		}
		attached = true
		cur, err := loadMessageByID(ctx, tx, row.ID)
		if err != nil {
			return err
		}
		return s.publish(ctx, tx, ch, cur.toDomain())
	})
	if err != nil || !attached {
		s.removeMedia(rel)
	}
	return err
}
