package messaging

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/ratelimit"
	"github.com/chatmsg/gateway/internal/store"
)

// The send lifecycle, in the order a send lives it, one file per stage:
//
//	accept.go   the request: checked, then stored as a Pending message
//	            with its place in the send queue (this file)
//	attempt.go  the hand-off and the transport call
//	outcome.go  leaving Pending: Sent, Failed, Unauthorized, or outcome
//	            unknown
//	queue.go    the send queue: claims, leases, retries, the fair share
//	            of each sender
//
// A synchronous send goes from here to attempt.go at once; a queued one
// waits for the queue to claim it.

// WindowClosedMessage is the 409 answer (Portuguese, as the document asks)
// to free text or a file on an official channel whose window is closed.
const WindowClosedMessage = "A janela de atendimento de 24 horas está fechada. Envie um template para iniciar a conversa."

// SendInput is one send (operation sendMessage).
type SendInput struct {
	CompanyID int64
	// Platform is channels.UnofficialChatapp (chatapp) or
	// channels.OfficialChatapp (ofc_chatapp).
	Platform   channels.TypeID
	SenderKey  string
	ContactKey string
	IsGroup    bool
	// Enqueue overrides the platform default: queued on chatapp,
	// synchronous on ofc_chatapp.
	Enqueue  *bool
	Text     string
	File     *Media
	Template *TemplateRequest
	// SourceID is who sends (default SourceAPI); UserID the attendant, if any.
	SourceID int
	UserID   *int64
}

// SendOutput is the outcome of an accepted send.
type SendOutput struct {
	MessageID int64
	// Queued is true when the send was queued (the {message} answer).
	Queued bool
	// ExternalID and Raw are the far side's answer to a synchronous send.
	ExternalID string
	Raw        map[string]any
	// OutcomeUnknown is true for a synchronous send the far side may have
	// taken without saying so (ErrOutcomeUnknown): the message stays
	// Pending until a receipt settles it, and must not be sent again.
	OutcomeUnknown bool
}

// content is what a send carries, resolved and checked: a template, a file
// or text.
type content struct {
	typeID   int
	text     string
	media    *Media
	template *TemplateSend
	// mediaURL is the header media URL the client gave (marked used when
	// it is a gateway upload).
	mediaURL string
}

// storedOutbound is the part of an Outbound that is not in the message's
// columns; queued sends rebuild the Outbound from the row and this.
type storedOutbound struct {
	Template *TemplateSend `json:"template,omitempty"`
}

// SendMessage sends (or queues) a message through one of the company's
// channels, applying in order: the company send rate (600 per minute),
// the sender channel, the content, the official 24-hour window (free
// content only), group authorization, and the monthly quota. The message
// is stored and omnichat.message.sent published in one transaction; a
// queued send is a place in the send queue in that same row (queue.go).
//
// Errors: RateLimited (with RetryAfterSeconds); Rule when sender_key is not
// a channel of the company of that platform; Invalid when the channel's
// transport cannot address contact_key (see KeyNormalizer); for template problems (see
// TemplatePreparer), for media over its limit, and for a synchronous send
// the far side refused (Refused, with Details) or could not take
// (Unavailable) — the message is then stored as Failed; a synchronous send
// whose outcome is unknown is no error but SendOutput.OutcomeUnknown;
// WindowClosed;
// GroupNotAuthorized (the message is stored as Unauthorized); Quota;
// Unavailable when no transport serves the platform.
func (s *Service) SendMessage(ctx context.Context, in SendInput) (out SendOutput, err error) {
	defer func() {
		if err != nil && out.MessageID == 0 {
			s.metrics.refused.WithLabelValues(in.Platform.Name(), fault.KindOf(err).String()).Inc()
		}
	}()
	if in.SourceID == 0 {
		in.SourceID = SourceAPI
	}
	in.ContactKey = NormalizeContactKey(in.ContactKey)
	if err := s.allowSend(ctx, in.CompanyID); err != nil {
		return SendOutput{}, err
	}
	ch, err := s.deps.Channels.FindByKey(ctx, in.CompanyID, in.Platform, strings.TrimSpace(in.SenderKey))
	if fault.KindOf(err) == fault.NotFound {
		return SendOutput{}, senderNotFound(in.Platform)
	}
	if err != nil {
		return SendOutput{}, err
	}
	tr := s.transport(ch.TypeID)
	if tr == nil {
		return SendOutput{}, noTransport(ch.TypeID)
	}
	if in.ContactKey, err = canonicalKey(tr, in.ContactKey, in.IsGroup); err != nil {
		return SendOutput{}, err
	}
	a := acceptance{ch: ch, tr: tr, in: in, enqueue: ch.TypeID != channels.OfficialChatapp}
	if in.Enqueue != nil {
		a.enqueue = *in.Enqueue
	}
	if a.content, err = s.resolveContent(ctx, ch, in); err != nil {
		return SendOutput{}, err
	}
	// Free content on the official channel needs the contact's 24-hour
	// window. A one-to-one send reads it in its transaction, from the
	// conversation row it updates anyway (one statement less, and no
	// connection taken from the pool on the side); a group send, which
	// the official channel does not model, reads it first.
	a.checkWindow = ch.TypeID == channels.OfficialChatapp && a.content.template == nil
	if a.checkWindow && in.IsGroup {
		w, err := s.deps.Conversations.WindowFor(ctx, ch.ID, in.ContactKey, s.deps.Now())
		if err != nil {
			return SendOutput{}, err
		}
		if !w.Open {
			return SendOutput{}, fault.New(fault.WindowClosed, WindowClosedMessage)
		}
		a.checkWindow = false
	}
	if in.IsGroup {
		if ga := s.authorizer(ch.TypeID); ga != nil {
			if err := ga.AuthorizeGroupSend(ctx, ch, in.ContactKey); err != nil {
				if fault.KindOf(err) != fault.GroupNotAuthorized {
					return SendOutput{}, err
				}
				a.refusal = err
			}
		}
	}

	row, err := s.store(ctx, a)
	if err != nil {
		return SendOutput{}, err
	}
	if a.refusal != nil {
		return SendOutput{}, a.refusal
	}
	if a.enqueue {
		s.queue.poke()
		s.metrics.accepted.WithLabelValues(ch.TypeID.Name(), "queued").Inc()
		return SendOutput{MessageID: row.ID, Queued: true}, nil
	}
	s.metrics.accepted.WithLabelValues(ch.TypeID.Name(), "sync").Inc()
	return s.sendNow(ctx, ch, tr, row)
}

// noTransport is the answer for a channel type no Transport serves.
func noTransport(t channels.TypeID) error {
	return fault.New(fault.Unavailable, fmt.Sprintf("Sending on %s channels is not available in this deployment", t.Name()))
}

// senderNotFound is the answer to a sender_key that names no channel of
// the company on the requested platform.
func senderNotFound(platform channels.TypeID) error {
	what := "a connection"
	if platform == channels.OfficialChatapp {
		what = "an official channel"
	}
	return fault.New(fault.Rule, fmt.Sprintf("sender_key is not %s of the company", what))
}

// NormalizeContactKey trims what clients commonly put around a number (a
// leading +, blanks); group keys (number-digits) pass unchanged.
func NormalizeContactKey(key string) string {
	return strings.TrimPrefix(strings.TrimSpace(key), "+")
}

// canonicalKey is the key the conversation and the message are stored
// under: the transport's canonical form when it has one (KeyNormalizer),
// else key as trimmed.
func canonicalKey(tr Transport, key string, isGroup bool) (string, error) {
	if kn, ok := tr.(KeyNormalizer); ok {
		return kn.NormalizeContactKey(key, isGroup)
	}
	return key, nil
}

func (s *Service) allowSend(ctx context.Context, companyID int64) error {
	if s.deps.Limiter == nil {
		return nil
	}
	ok, wait, err := s.deps.Limiter.Allow(ctx, ratelimit.Key("send:company", companyID), s.opts.SendRate, s.opts.SendWindow)
	if err != nil {
		// A limiter outage must not stop sending: fail open, loudly.
		s.deps.Logger.WarnContext(ctx, "send rate limiter unavailable; allowing", "err", err)
		return nil
	}
	if !ok {
		return &fault.Error{Kind: fault.RateLimited, Message: "Too many requests: the company's limit of 600 sends per minute was reached.",
			RetryAfterSeconds: ratelimit.RetryAfterSeconds(wait)}
	}
	return nil
}

// resolveContent resolves what a send carries: a template, a file or text.
func (s *Service) resolveContent(ctx context.Context, ch channels.Channel, in SendInput) (content, error) {
	switch {
	case in.Template != nil:
		if ch.TypeID != channels.OfficialChatapp {
			return content{}, fault.New(fault.Rule, "provider_template_id is only accepted with platform ofc_chatapp")
		}
		if s.deps.Templates == nil {
			return content{}, fault.New(fault.Unavailable, "Templates are not available in this deployment")
		}
		p, err := s.deps.Templates.PrepareTemplate(ctx, ch, *in.Template)
		if err != nil {
			return content{}, err
		}
		t := p.Send
		return content{typeID: msgtype.Template, text: p.Text, media: t.HeaderMedia, template: &t, mediaURL: in.Template.HeaderMediaURL}, nil
	case in.File != nil:
		m := *in.File
		ct, err := m.Sniff(ctx)
		if err != nil {
			return content{}, err
		}
		m.ContentType = ct
		typeID := msgtype.ForContentType(m.ContentType)
		if ch.TypeID == channels.OfficialChatapp {
			if limit, msg := LimitFor(typeID); m.Size > int64(limit) {
				return content{}, fault.New(fault.Rule, msg)
			}
		}
		return content{typeID: typeID, text: in.Text, media: &m}, nil
	}
	return content{typeID: msgtype.Text, text: in.Text}, nil
}

// acceptance is a send checked and ready to store.
type acceptance struct {
	ch      channels.Channel
	tr      Transport
	in      SendInput
	content content
	enqueue bool
	// checkWindow: free content on the official channel, whose window is
	// checked on the conversation the store reads.
	checkWindow bool
	// refusal is the group authorization's refusal: the message is stored
	// Unauthorized, and the send answered with it.
	refusal error
}

func (a acceptance) conversation() conversations.EnsureInput {
	return conversations.EnsureInput{CompanyID: a.ch.CompanyID, CompanyChannelID: a.ch.ID, ChannelTypeID: a.ch.TypeID,
		ContactKey: a.in.ContactKey, IsGroup: a.in.IsGroup, OriginID: originAPI}
}

// store is the one door a send is stored through. It chooses the way:
//
//   - a group send refused for lack of authorization is stored
//     Unauthorized, with its event, not counted against the quota (it was
//     never sent): the API document says such a message "is marked failed
//     for lack of authorization", and subscribers see it;
//   - the common send on PostgreSQL, when nobody listens for its event, is
//     one statement (storeOne);
//   - anything else, and a send the one statement finds is not the common
//     case, is one transaction (storeInTx).
//
// The message is Pending, with its place in the send queue.
func (s *Service) store(ctx context.Context, a acceptance) (*messageRow, error) {
	if a.refusal != nil {
		return s.storeRefused(ctx, a)
	}
	var mediaPath string
	if a.content.media != nil {
		p, err := s.saveMedia(ctx, a.ch.CompanyID, a.content.media)
		if err != nil {
			return nil, err
		}
		mediaPath = p
	}
	outbound, err := encodeOutbound(a.content)
	if err != nil {
		return nil, err
	}
	pending := func(ref conversations.Ref, now time.Time) messageRow {
		row := outboundRow(a, ref, StatusPending, now)
		row.Outbound = outbound
		if m := a.content.media; m != nil {
			row.MediaPath, row.MediaName, row.MediaContentType = nullable(mediaPath), nullable(m.FileName), nullable(m.ContentType)
			row.MediaSize = new(m.Size)
		}
		// Its place in the send queue. A synchronous send's place is its
		// safety net, for should it be cut off before its outcome is
		// recorded (recoverSync).
		due := now
		if !a.enqueue {
			due = due.Add(recoverAfter)
			row.SendRecover = true
		}
		row.SendDueAt = new(due.UnixMilli())
		return row
	}
	var row *messageRow
	if s.deps.DB.Dialect == store.Postgres && a.content.mediaURL == "" && !s.eventWanted(ctx, a.ch, a.ch.CompanyID, a.in.SourceID) {
		now := s.deps.Now()
		r := pending(conversations.Ref{}, now)
		done, err := s.storeOne(ctx, a, &r, now)
		if err != nil {
			s.removeMedia(mediaPath)
			return nil, err
		}
		if done {
			row = &r
		}
	}
	if row == nil {
		if row, err = s.storeInTx(ctx, a, pending); err != nil {
			s.removeMedia(mediaPath)
			return nil, err
		}
	}
	return row, nil
}

// encodeOutbound is what of a template send the columns do not hold.
func encodeOutbound(c content) (*string, error) {
	if c.template == nil {
		return nil, nil
	}
	t := *c.template
	t.HeaderMedia = nil // the bytes are the message's media file
	b, err := json.Marshal(storedOutbound{Template: &t})
	if err != nil {
		return nil, fault.Internalf(err, "encode outbound")
	}
	return nullable(string(b)), nil
}

// outboundRow is the row of a message the company sends.
func outboundRow(a acceptance, ref conversations.Ref, status int, now time.Time) messageRow {
	return newMessageRow(a.ch, ref, "", messageFields{ContactKey: a.in.ContactKey, IsGroup: a.in.IsGroup, Text: a.content.text,
		TypeID: a.content.typeID, SourceID: a.in.SourceID, StatusID: status, UserID: a.in.UserID, PlatformAt: now}, now)
}

// storeInTx stores a send in one transaction, one statement per piece of
// work: the conversation (one UPDATE … RETURNING when it exists,
// RecordOutbound), the window checked on what it returned (a closed one
// answers 409 before an exhausted quota's 402, and rolls everything
// back), the quota's upsert, the message's INSERT … RETURNING, and
// omnichat.message.sent.
func (s *Service) storeInTx(ctx context.Context, a acceptance, pending func(conversations.Ref, time.Time) messageRow) (*messageRow, error) {
	var row messageRow
	err := s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		ref, err := s.deps.Conversations.RecordOutbound(ctx, tx, a.conversation(), now)
		if err != nil {
			return err
		}
		if a.checkWindow && !conversations.WindowAt(ref.LastInboundAt, now).Open {
			return fault.New(fault.WindowClosed, WindowClosedMessage)
		}
		if err := consumeQuota(ctx, tx, a.ch.CompanyID, now); err != nil {
			return err
		}
		row = pending(ref, now)
		if err := insertOutbound(ctx, tx, a.ch, a.tr, &row); err != nil {
			return err
		}
		if a.content.mediaURL != "" && s.deps.Templates != nil {
			if err := s.deps.Templates.MarkMediaUsed(ctx, tx, a.ch.CompanyID, a.content.mediaURL); err != nil {
				return err
			}
		}
		return s.publish(ctx, tx, a.ch, row.toDomain())
	})
	if err != nil {
		if store.IsForeignKeyViolation(err) {
			// The channel was deleted (by another replica, whose change this
			// one's channel cache sees only within its bound) between the
			// lookup and the insert: the sender is no channel any more.
			return nil, senderNotFound(a.in.Platform)
		}
		return nil, err
	}
	s.metrics.stored.WithLabelValues("transaction").Inc()
	return &row, nil
}

// storeRefused records a group send refused for lack of group
// authorization (status Unauthorized, the refusal as its reason) and
// publishes it, in one transaction.
func (s *Service) storeRefused(ctx context.Context, a acceptance) (*messageRow, error) {
	var row messageRow
	err := s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		ref, err := s.deps.Conversations.Ensure(ctx, tx, a.conversation())
		if err != nil {
			return err
		}
		row = outboundRow(a, ref, StatusUnauthorized, now)
		row.FailureReason = nullable(fault.As(a.refusal).Message)
		if _, err := tx.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
			return fault.Internalf(err, "insert message")
		}
		return s.publish(ctx, tx, a.ch, row.toDomain())
	})
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// insertOutbound inserts a new outbound message. For a transport that is
// an IDAssigner the external id is chosen first and stored with the
// message, so every attempt hands the far side the same id; an id some
// message of the channel already holds is drawn again.
func insertOutbound(ctx context.Context, tx *store.Tx, ch channels.Channel, tr Transport, row *messageRow) error {
	ida, ok := tr.(IDAssigner)
	if !ok {
		if _, err := tx.NewInsert().Model(row).Returning("id").Exec(ctx); err != nil {
			return fault.Internalf(err, "insert message")
		}
		return nil
	}
	const draws = 3
	for range draws {
		id := ida.NewExternalID(ch)
		row.ExternalID = &id
		_, err := tx.NewInsert().Model(row).On("CONFLICT DO NOTHING").Returning("id").Exec(ctx)
		if err != nil && !store.IsNoRows(err) {
			return fault.Internalf(err, "insert message")
		}
		if row.ID != 0 {
			return nil
		}
	}
	return fault.Internalf(fmt.Errorf("%d external ids in a row already taken on channel %d", draws, ch.ID), "insert message")
}

// storeOne is storeInTx's work as one statement on PostgreSQL, for the
// common send: its conversation exists and needs nothing but the update of
// a message (RecordOutbound's common case), its window is open when it
// must be, the quota has a unit left, and nobody listens for the event, so
// no event is written. Its data-modifying WITH queries depend on one
// another so that it writes all or nothing:
//
//	found    the conversation, when it is the common case (else no row)
//	counted  the quota's upsert, only for a found conversation
//	touched  the conversation's update, only once counted
//	stored   the message, for a found conversation once counted
//
// The message does not wait for touched: a conversation that disappears
// under the statement goes with its channel (a conversation is deleted by
// no other way), and the message's foreign key to that channel then fails
// the whole statement, the quota's unit with it.
//
// It reports false having written nothing when the send is not the common
// case, or when the identifier the transport drew is taken: storeInTx then
// does everything, and answers a closed window or an exhausted quota as it
// always has.
func (s *Service) storeOne(ctx context.Context, a acceptance, row *messageRow, now time.Time) (bool, error) {
	conv := s.deps.Conversations.OutboundParts(a.conversation(), now, a.checkWindow)
	if ida, ok := a.tr.(IDAssigner); ok {
		row.ExternalID = new(ida.NewExternalID(a.ch))
	}
	counted := quotaPart(a.ch.CompanyID, now, conv.Find)
	q := store.With(conv.Find, counted, conv.Touch(counted), s.insert.part(s.deps.DB, row, conv.Find, counted)).
		Then("SELECT id, contact_channel_id, conversation_name FROM stored")
	err := store.ScanBound(ctx, s.deps.DB.Bun, q.SQL, q.Args, &row.ID, &row.ContactChannelID, &row.ConversationName)
	switch {
	case err == nil:
		s.metrics.stored.WithLabelValues("one_statement").Inc()
		return true, nil
	case store.IsNoRows(err), store.IsUniqueViolation(err):
		row.ID, row.ExternalID = 0, nil
		return false, nil
	case store.IsForeignKeyViolation(err):
		return false, senderNotFound(a.in.Platform)
	}
	return false, fault.Internalf(err, "store message")
}

// messageInsert is the message's query of storeOne's statement, which
// messageRow's columns fix: the INSERT of the message from found once
// counted. Each column is a bind argument but the two taken from the
// conversation. The casts are computed once.
type messageInsert struct {
	cols  []string
	casts []string // per column: CAST(? AS type), "" for the conversation's
}

func newMessageInsert(db *store.DB) messageInsert {
	cols, vals := store.InsertColumns(db.Bun, &messageRow{})
	m := messageInsert{cols: cols, casts: make([]string, len(cols))}
	for i, c := range cols {
		if c == "contact_channel_id" || c == "conversation_name" {
			continue
		}
		// In a SELECT list PostgreSQL cannot infer a parameter's type
		// from the column it goes to.
		t, err := sqlType(vals[i])
		if err != nil {
			panic(fmt.Sprintf("messaging: column %s of messages: %v", c, err))
		}
		m.casts[i] = "CAST(? AS " + t + ")"
	}
	return m
}

// part is the INSERT of row as the query "stored".
func (m messageInsert) part(db *store.DB, row *messageRow, found, counted store.Part) store.Part {
	_, vals := store.InsertColumns(db.Bun, row)
	exprs := make([]string, len(m.cols))
	args := make([]any, 0, len(m.cols))
	for i, c := range m.cols {
		switch c {
		case "contact_channel_id":
			exprs[i] = found.Name + ".id"
		case "conversation_name":
			// conversationName, in SQL: the conversation's name, else the key.
			exprs[i] = "COALESCE(NULLIF(" + found.Name + ".name, ''), CAST(? AS TEXT))"
			args = append(args, conversationName("", "", row.ContactKey))
		default:
			exprs[i] = m.casts[i]
			args = append(args, vals[i])
		}
	}
	return store.NewPart("stored", "INSERT INTO messages ("+strings.Join(m.cols, ", ")+") SELECT "+strings.Join(exprs, ", ")+
		" FROM "+found.Name+", "+counted.Name+" RETURNING id, contact_channel_id, conversation_name", args...)
}

// sqlType is the PostgreSQL type a bind argument of a messages column is
// cast to (an INTEGER column takes a BIGINT by assignment).
func sqlType(v any) (string, error) {
	switch v.(type) {
	case int, int64, *int64:
		return "BIGINT", nil
	case string, *string:
		return "TEXT", nil
	case bool:
		return "BOOLEAN", nil
	case time.Time, *time.Time:
		return "TIMESTAMPTZ", nil
	}
	return "", fmt.Errorf("no SQL type for %T", v)
}
