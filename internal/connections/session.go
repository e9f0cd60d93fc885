package connections

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Leases. Each connection's live session is held by exactly one replica: the
// one whose id is in the connection's chatapp_sessions row with an expiry in
// the future. The holder renews the expiry every heartbeat; a replica that
// stops renewing (crash, partition, kill -9) loses the connection once the
// expiry passes, and the next heartbeat of any other replica takes it over
// and reopens the session from the stored device. Every takeover increments
// the row's fence, and every write a holder makes about its session carries
// (owner, fence) in its WHERE clause, so a holder that lost its lease while
// paused cannot overwrite the new holder's state.

// stoppedStates are the terminal states a heartbeat leaves alone.
var stoppedStates = []string{connector.StateReplaced, connector.StateBanned, connector.StateOutdated}

// live is a session this replica holds.
type live struct {
	channelID int64
	fence     int64
	sess      connector.Session

	mu       sync.Mutex
	lastUsed time.Time
}

func (l *live) touch(now time.Time) {
	l.mu.Lock()
	l.lastUsed = now
	l.mu.Unlock()
}

func (l *live) idleSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastUsed
}

func (s *Service) nowMS() int64 { return s.now().UnixMilli() }

// local returns the session this replica holds for channelID, if any.
func (s *Service) local(channelID int64) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[channelID]
}

func (s *Service) lockFor(channelID int64) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := s.opening[channelID]
	if lk == nil {
		lk = &sync.Mutex{}
		s.opening[channelID] = lk
	}
	return lk
}

type claimRow struct {
	Fence     int64          `bun:"fence"`
	DeviceRef sql.NullString `bun:"device_ref"`
}

// claim takes the lease of channelID when nobody holds it or its holder's
// lease expired. It answers the fence and stored device when this replica
// got it, or the current holder otherwise.
func (s *Service) claim(ctx context.Context, channelID int64) (fence int64, deviceRef, owner string, err error) {
	now := s.nowMS()
	var rows []claimRow
	err = s.db.Bun.NewRaw(`
INSERT INTO chatapp_sessions (company_channel_id, owner_id, fence, lease_expires_ms) VALUES (?, ?, 1, ?)
ON CONFLICT (company_channel_id) DO UPDATE SET owner_id = excluded.owner_id, fence = chatapp_sessions.fence + 1,
	lease_expires_ms = excluded.lease_expires_ms
WHERE chatapp_sessions.owner_id = '' OR chatapp_sessions.lease_expires_ms < ?
RETURNING fence, device_ref`, channelID, s.id, now+s.ttl.Milliseconds(), now).Scan(ctx, &rows)
	if err != nil {
		if store.IsForeignKeyViolation(err) {
			return 0, "", "", fault.New(fault.NotFound, "Connection not found")
		}
		return 0, "", "", fault.Internalf(err, "claim connection lease")
	}
	if len(rows) == 1 {
		return rows[0].Fence, rows[0].DeviceRef.String, s.id, nil
	}
	var holder struct {
		Owner   string `bun:"owner_id"`
		Expires int64  `bun:"lease_expires_ms"`
	}
	err = s.db.Bun.NewRaw(`SELECT owner_id, lease_expires_ms FROM chatapp_sessions WHERE company_channel_id = ?`, channelID).Scan(ctx, &holder)
	if err != nil {
		return 0, "", "", fault.Internalf(err, "read connection lease")
	}
	if holder.Owner == "" || holder.Expires < now {
		return 0, "", "", errReroute // expired in between: the caller tries again
	}
	return 0, "", holder.Owner, nil
}

// renew extends the lease of l; false means it was lost (taken over, or the
// connection deleted).
func (s *Service) renew(ctx context.Context, l *live) (bool, error) {
	res, err := s.db.Bun.NewRaw(`UPDATE chatapp_sessions SET lease_expires_ms = ? WHERE company_channel_id = ? AND owner_id = ? AND fence = ?`,
		s.nowMS()+s.ttl.Milliseconds(), l.channelID, s.id, l.fence).Exec(ctx)
	if err != nil {
		return true, fault.Internalf(err, "renew connection lease")
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// release gives the lease up so another replica can take the connection at
// once (shutdown, logout, idle pairing).
func (s *Service) release(ctx context.Context, channelID, fence int64) {
	_, err := s.db.Bun.NewRaw(`UPDATE chatapp_sessions SET owner_id = '', lease_expires_ms = 0 WHERE company_channel_id = ? AND owner_id = ? AND fence = ?`,
		channelID, s.id, fence).Exec(context.WithoutCancel(ctx))
	if err != nil {
		s.log.WarnContext(ctx, "release connection lease", "channel_id", channelID, "err", err)
	}
}

// acquire returns this replica's live session of channelID, claiming the
// lease and opening the session when no replica holds it. When another
// replica holds it, it answers that replica's id instead.
func (s *Service) acquire(ctx context.Context, channelID int64) (*live, string, error) {
	if l := s.local(channelID); l != nil {
		return l, "", nil
	}
	lk := s.lockFor(channelID)
	lk.Lock()
	defer lk.Unlock()
	if l := s.local(channelID); l != nil {
		return l, "", nil
	}
	fence, ref, owner, err := s.claim(ctx, channelID)
	if err != nil {
		return nil, "", err
	}
	if owner != s.id {
		return nil, owner, nil
	}
	ch, err := s.channels.UnofficialByID(ctx, channelID)
	if err != nil {
		s.release(ctx, channelID, fence)
		return nil, "", err
	}
	sess, err := s.driver.Open(ctx, connector.Account{ChannelID: channelID, CompanyID: ch.CompanyID, Key: ch.Key, DeviceRef: ref}, &handler{s: s, channelID: channelID, fence: fence})
	if err != nil {
		s.release(ctx, channelID, fence)
		return nil, "", err
	}
	l := &live{channelID: channelID, fence: fence, sess: sess, lastUsed: s.now()}
	s.mu.Lock()
	s.live[channelID] = l
	s.mu.Unlock()
	s.metrics.sessions.Set(float64(s.liveCount()))
	s.log.InfoContext(ctx, "connection session opened", "channel_id", channelID, "fence", fence, "paired", ref != "")
	// The stored flag follows what the chat app says on (re)open: stored
	// credentials it rejects mean logged out.
	if ref != "" && !sess.Logged() {
		if err := s.forgetDevice(ctx, l, "stored credentials rejected"); err != nil {
			return nil, "", err
		}
		return l, "", nil
	}
	if _, err := s.channels.SetUnofficialLogged(ctx, channelID, sess.Logged()); err != nil {
		return nil, "", err
	}
	return l, "", nil
}

func (s *Service) liveCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// drop closes a held session and forgets it locally (the lease is left as
// it is: released by the caller when appropriate).
func (s *Service) drop(l *live) {
	s.mu.Lock()
	if s.live[l.channelID] == l {
		delete(s.live, l.channelID)
	}
	s.mu.Unlock()
	l.sess.Close()
	s.metrics.sessions.Set(float64(s.liveCount()))
}

// forgetDevice records that the session of l is no longer paired, closes it
// and gives its lease up.
func (s *Service) forgetDevice(ctx context.Context, l *live, reason string) error {
	err := s.setState(ctx, l.channelID, l.fence, connector.SessionState{State: connector.StateLoggedOut, Reason: reason}, new(false),
		"device_ref = NULL, paired_at = NULL")
	if err != nil && fault.KindOf(err) != fault.NotFound {
		return err
	}
	s.drop(l)
	s.release(ctx, l.channelID, l.fence)
	s.log.InfoContext(ctx, "connection logged out", "channel_id", l.channelID, "reason", reason)
	return nil
}

// setState stores a session's state (with extra assignments of the same
// row) under (owner, fence) and publishes chatapp.connection.state_changed
// in one transaction, then sets the connection's logged flag when setLogged
// says (a paired session that dropped or was banned is still paired); Unavailable
// with MsgLeaseLost when the lease is no longer this replica's.
func (s *Service) setState(ctx context.Context, channelID, fence int64, st connector.SessionState, setLogged *bool, extra string, args ...any) error {
	ch, err := s.channels.UnofficialByID(ctx, channelID)
	if err != nil {
		return err
	}
	logged := ch.Logged
	if setLogged != nil {
		logged = *setLogged
	}
	set := "state = ?, state_reason = ?, state_ms = ?"
	if extra != "" {
		set = extra + ", " + set
	}
	now := s.now()
	args = append(args, st.State, st.Reason, now.UnixMilli(), channelID, s.id, fence)
	err = s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		res, err := tx.NewRaw(`UPDATE chatapp_sessions SET `+set+` WHERE company_channel_id = ? AND owner_id = ? AND fence = ?`, args...).Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "store connection state")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.New(fault.Unavailable, MsgLeaseLost)
		}
		if s.events == nil {
			return nil
		}
		return s.events.Publish(ctx, tx, webhooks.Event{Name: events.ChatappConnectionStateChanged, CompanyID: ch.CompanyID,
			CompanyChannelID: &ch.ID, OccurredAt: now, Data: events.ConnectionStatePayload{ID: ch.ID, Key: ch.Key, Name: ch.Name,
				Logged: logged, State: events.ConnectionState(st.State), Reason: st.Reason, ChangedAt: s.times.Offset(now)}})
	})
	if err != nil {
		return err
	}
	if ch.Logged != logged {
		if _, err := s.channels.SetUnofficialLogged(ctx, channelID, logged); err != nil {
			return err
		}
	}
	return nil
}

// Tick is one heartbeat: renew the leases held here (closing sessions whose
// lease was lost), close unpaired sessions nobody used for a while, take
// over paired connections whose holder died, and sweep abandoned calls.
// Run calls it every heartbeat; tests call it to step time by hand.
func (s *Service) Tick(ctx context.Context) {
	held := s.held()
	now := s.now()
	for _, l := range held {
		ok, err := s.renew(ctx, l)
		if err != nil {
			s.log.WarnContext(ctx, "renew lease", "channel_id", l.channelID, "err", err)
			continue
		}
		if !ok {
			s.log.WarnContext(ctx, "connection lease lost; closing the session here", "channel_id", l.channelID)
			s.metrics.leaseLost.Inc()
			s.drop(l)
			continue
		}
		if !l.sess.Logged() && now.Sub(l.idleSince()) > s.pairingIdle {
			s.drop(l)
			s.release(ctx, l.channelID, l.fence)
		}
	}

	var orphans []int64
	err := s.db.Bun.NewRaw(`SELECT company_channel_id FROM chatapp_sessions WHERE device_ref IS NOT NULL AND (owner_id = '' OR lease_expires_ms < ?)
	AND state NOT IN (?) ORDER BY company_channel_id`,
		s.nowMS(), bun.In(stoppedStates)).Scan(ctx, &orphans)
	if err != nil {
		s.log.WarnContext(ctx, "list orphaned connections", "err", err)
	}
	for _, id := range orphans {
		l, _, err := s.acquire(ctx, id)
		if err != nil && !errors.Is(err, errReroute) {
			s.log.WarnContext(ctx, "take over connection", "channel_id", id, "err", err)
			continue
		}
		if l != nil {
			s.metrics.takeovers.Inc()
		}
	}

	if _, err := s.db.Bun.NewRaw(`DELETE FROM chatapp_calls WHERE created_ms < ?`, s.nowMS()-callRetention.Milliseconds()).Exec(ctx); err != nil {
		s.log.WarnContext(ctx, "sweep connection calls", "err", err)
	}
}

// Run holds sessions until ctx ends: a heartbeat (Tick) and the loop that
// serves calls forwarded by other replicas. On the way out it closes every
// session and releases the leases so other replicas take over at once.
func (s *Service) Run(ctx context.Context) {
	s.Tick(ctx)
	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	poll := time.NewTicker(s.callPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			s.Shutdown(context.WithoutCancel(ctx))
			return
		case <-beat.C:
			s.Tick(ctx)
		case <-poll.C:
			s.ServeCalls(ctx)
		}
	}
}

// held is a snapshot of the sessions this replica holds.
func (s *Service) held() []*live {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*live, 0, len(s.live))
	for _, l := range s.live {
		out = append(out, l)
	}
	return out
}

// Shutdown closes every session held here and releases their leases.
func (s *Service) Shutdown(ctx context.Context) {
	held := s.held()
	for _, l := range held {
		s.drop(l)
		s.release(ctx, l.channelID, l.fence)
	}
	s.calls.Wait()
}

// Holds reports whether this replica holds channelID's live session.
func (s *Service) Holds(channelID int64) bool { return s.local(channelID) != nil }

// Owner reports the replica holding channelID's live lease ("" when none).
func (s *Service) Owner(ctx context.Context, channelID int64) (string, error) {
	var holder struct {
		Owner   string `bun:"owner_id"`
		Expires int64  `bun:"lease_expires_ms"`
	}
	err := s.db.Bun.NewRaw(`SELECT owner_id, lease_expires_ms FROM chatapp_sessions WHERE company_channel_id = ?`, channelID).Scan(ctx, &holder)
	if store.IsNoRows(err) {
		return "", nil
	}
	if err != nil {
		return "", fault.Internalf(err, "read connection lease")
	}
	if holder.Expires < s.nowMS() {
		return "", nil
	}
	return holder.Owner, nil
}

// handler receives one session's events; fence ties them to the lease under
// which the session was opened.
type handler struct {
	s         *Service
	channelID int64
	fence     int64

	// last is the state this session last stored: the chat app repeats
	// itself (pairing, then connected), and subscribers want changes.
	mu   sync.Mutex
	last connector.SessionState
}

// changedState records st as the last state; false when it is the same.
func (h *handler) changedState(st connector.SessionState) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	same := h.last.State == st.State && h.last.Reason == st.Reason
	h.last = st
	return !same
}

func (h *handler) current() *live {
	l := h.s.local(h.channelID)
	if l == nil || l.fence != h.fence {
		return nil
	}
	return l
}

// Paired implements connector.Handler.
//
// Pairing proves the number: it is reserved across companies first
// (channels.SetUnofficialLogged), so a number another channel proved
// earlier refuses the pairing, and the device is logged out at the chat app
// rather than kept half-paired.
func (h *handler) Paired(ctx context.Context, deviceRef string) error {
	if _, err := h.s.channels.SetUnofficialLogged(ctx, h.channelID, true); err != nil {
		if fault.KindOf(err) == fault.Rule {
			h.s.log.WarnContext(ctx, "pairing refused: the number is held by a proven channel", "channel_id", h.channelID, "err", err)
			if l := h.current(); l != nil {
				// Not within the driver's callback: a real chat app answers
				// the logout on the connection that is calling us.
				go func() { _ = l.sess.Logout(context.WithoutCancel(ctx)) }()
			}
		}
		return err
	}
	err := h.s.setState(ctx, h.channelID, h.fence, connector.SessionState{State: connector.StateConnected}, new(true),
		"device_ref = ?, paired_at = ?", deviceRef, h.s.now().UTC())
	if err != nil {
		if _, rerr := h.s.channels.SetUnofficialLogged(ctx, h.channelID, false); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	h.changedState(connector.SessionState{State: connector.StateConnected})
	h.s.log.InfoContext(ctx, "connection paired", "channel_id", h.channelID)
	return nil
}

// LoggedOut implements connector.Handler.
func (h *handler) LoggedOut(ctx context.Context, reason string) error {
	l := h.current()
	if l == nil {
		return fault.New(fault.Unavailable, MsgLeaseLost)
	}
	return h.s.forgetDevice(ctx, l, reason)
}

// Inbound implements connector.Handler.
func (h *handler) Inbound(ctx context.Context, m connector.Inbound) error {
	l := h.current()
	if l == nil {
		return fault.New(fault.Unavailable, MsgLeaseLost)
	}
	return h.s.inbound(ctx, l, m)
}

// Changed implements connector.Handler.
func (h *handler) Changed(ctx context.Context, c connector.Change) error {
	if h.current() == nil {
		return fault.New(fault.Unavailable, MsgLeaseLost)
	}
	return h.s.changed(ctx, h.channelID, c)
}

// State implements connector.Handler: the state is stored under the
// session's fence (a replica that lost the lease writes nothing), and a
// terminal state closes the session here and gives the lease up; the
// heartbeat does not take such a connection over (it would only be
// replaced, banned or refused again) until a call asks for it.
func (h *handler) State(ctx context.Context, st connector.SessionState) error {
	l := h.current()
	if l == nil {
		return fault.New(fault.Unavailable, MsgLeaseLost)
	}
	if !h.changedState(st) && !st.Terminal {
		return nil
	}
	if err := h.s.setState(ctx, h.channelID, h.fence, st, nil, ""); err != nil {
		h.changedState(connector.SessionState{}) // not stored: the next report stores it
		return err
	}
	h.s.log.InfoContext(ctx, "connection state", "channel_id", h.channelID, "state", st.State, "reason", st.Reason)
	if st.Terminal {
		h.s.drop(l)
		h.s.release(ctx, h.channelID, h.fence)
	}
	return nil
}

// Holds implements connector.Handler: the session's lease, as written
// under its fence, is still this replica's and not expired.
func (h *handler) Holds(ctx context.Context) error {
	var n int
	err := h.s.db.Bun.NewRaw(`SELECT COUNT(*) FROM chatapp_sessions WHERE company_channel_id = ? AND owner_id = ? AND fence = ? AND lease_expires_ms >= ?`,
		h.channelID, h.s.id, h.fence, h.s.nowMS()).Scan(ctx, &n)
	if err != nil {
		return fault.Internalf(err, "read connection lease")
	}
	if n == 0 || h.current() == nil {
		return fault.New(fault.Unavailable, MsgLeaseLost)
	}
	return nil
}

// Receipt implements connector.Handler.
func (h *handler) Receipt(ctx context.Context, r connector.Receipt) error {
	if h.current() == nil {
		return fault.New(fault.Unavailable, MsgLeaseLost)
	}
	return h.s.receipt(ctx, h.channelID, r)
}
