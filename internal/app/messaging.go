package app

import (
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/netguard"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/templates"
)

// templateSyncInterval is how often stored templates are refreshed from
// the provider.
const templateSyncInterval = time.Hour

// newMessaging wires messaging, the official provider (client, Transport,
// inbound webhooks) and templates. Conversations, webhooks and the limiter
// must exist; the River runner is attached later (UseJobs).
func (a *App) newMessaging(opts Options) {
	cfg := a.Config
	logger := a.Logger
	a.ProviderClient = official.NewClient(official.ClientOptions{Logger: logger.With("component", "provider"), Registerer: a.Registry,
		Concurrency: cfg.Workers})
	guard := netguard.New(cfg.OutboundAllowCIDRs)
	a.Templates = templates.NewService(templates.Deps{
		DB: a.DB, Channels: a.Channels, Provider: a.ProviderClient,
		// Header media URLs are user-supplied: fetched through the SSRF
		// guard, following (re-checked) redirects.
		Fetch: guard.NewClient(netguard.ClientOptions{Timeout: time.Minute, MaxRedirects: 3}),
		Now:   a.Clock, Files: a.Files, MissingFiles: a.missingFiles, Spool: a.spool, PublicBaseURL: cfg.PublicBaseURL,
		Logger: logger.With("component", "templates"),
	})
	mopts := messaging.Options{Registerer: a.Registry, DebugRegisterer: a.DebugRegistry, MediaURLLifetime: cfg.MediaURLLifetime, Workers: cfg.Workers,
		SendShare: cfg.SendSlotsPerSender}
	if opts.MessagingOptions != nil {
		opts.MessagingOptions(&mopts)
	}
	a.Messaging = messaging.NewService(messaging.Deps{
		DB: a.DB, Channels: a.Channels, Conversations: a.Conversations, Events: a.Webhooks, Limiter: a.Limiter,
		Templates: a.Templates, Now: a.Clock, Times: clock.NewFormatter(cfg.TimeZone),
		Files: a.Files, MissingFiles: a.missingFiles, PublicBaseURL: cfg.PublicBaseURL,
		Logger: logger.With("component", "messaging"),
	}, mopts)
	a.Messaging.RegisterTransport(channels.OfficialChatapp, official.NewTransport(a.ProviderClient))
	a.Messaging.RegisterMediaFetcher(channels.OfficialChatapp, official.NewMediaFetcher(a.ProviderClient))
	a.Official = official.NewService(a.Channels, a.Messaging, official.Options{Logger: logger.With("component", "official"),
		Limiter: a.Limiter, RatePerAccount: cfg.HTTP.ProviderWebhookRate})
}

// addMessagingWorkers registers the media-fetch worker and the periodic
// workers of templates and messaging (queued sends have the send queue).
func (a *App) addMessagingWorkers(workers *river.Workers) {
	river.AddWorker(workers, messaging.NewFetchMediaWorker(a.Messaging))
	river.AddWorker(workers, messaging.NewMediaLinkCleanupWorker(a.Messaging))
	river.AddWorker(workers, templates.NewSyncWorker(a.Templates, templateSyncInterval))
	river.AddWorker(workers, templates.NewMediaCleanupWorker(a.Templates))
}

// messagingPeriodicJobs are the periodic jobs of templates and messaging:
// the template sync, the deletion of uploads that expired unused, and of
// expired URLs of message files.
func (a *App) messagingPeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(templateSyncInterval), func() (river.JobArgs, *river.InsertOpts) {
			return templates.SyncArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(15*time.Minute), func() (river.JobArgs, *river.InsertOpts) {
			return templates.MediaCleanupArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return messaging.MediaLinkCleanupArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}
