// Package providersim simulates the official provider's HTTP interface for
// local runs and tests, built from the provider's own published OpenAPI
// document (testdata/, Graph API v23.0) and independent of the gateway's
// client (it never imports internal/official; `make lint` checks it): every
// request is validated against the document's operation and refused as the
// provider refuses (HTTP 400 with its error object), with the document's
// own defects relaxed in one list (Relaxations). A control API under
// /_control/ drives it: register accounts, make a contact send a message
// (the simulator then POSTs a signed webhook to the gateway), emit
// receipts, seed templates, make the next sends fail (refusal with a
// reason, or an outage), and count what it received per message.
// cmd/providersim serves it; tests start it in-process on 127.0.0.1.
package providersim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Account is a simulated business phone number.
type Account struct {
	PhoneNumberID      string `json:"phone_number_id"`
	BusinessAccountID  string `json:"business_account_id"`
	AccessToken        string `json:"access_token"`
	AppSecret          string `json:"app_secret"`
	DisplayPhoneNumber string `json:"display_phone_number"`
	// WebhookURL is where inbound messages and receipts are POSTed, e.g.
	// http://127.0.0.1:8080/api/provider-webhooks/<phone_number_id>.
	WebhookURL string `json:"webhook_url"`
}

// SentMessage is a message the business sent through the simulator.
type SentMessage struct {
	ID            string      `json:"id"`
	PhoneNumberID string      `json:"phone_number_id"`
	To            string      `json:"to"`
	Type          string      `json:"type"`
	Status        string      `json:"status"`
	Request       SendRequest `json:"request"`
	// Body is the request exactly as received.
	Body      json.RawMessage `json:"body"`
	CreatedAt time.Time       `json:"created_at"`
}

type media struct {
	id, phoneNumberID, mimeType, fileName string
	data                                  []byte
}

// Refusal reasons the simulator can answer a send with.
const (
	ReasonNoAccount      = "no_account"
	ReasonBlocked        = "blocked"
	ReasonMarketingLimit = "marketing_limit"
)

// refusals are the platform errors behind each reason.
var refusals = map[string]ErrorObject{
	ReasonNoAccount:      apiError(131026, "(#131026) Message undeliverable", "The recipient has no chat-app account"),
	ReasonBlocked:        apiError(131031, "(#131031) Business account has been locked", "The business account is blocked"),
	ReasonMarketingLimit: apiError(131049, "(#131049) This message was not delivered to maintain healthy ecosystem engagement", "The marketing message limit for this recipient was reached"),
}

func apiError(code int, message, details string) ErrorObject {
	e := ErrorObject{Message: message, Type: "OAuthException", Code: code}
	e.ErrorData.MessagingProduct = "whatsapp"
	e.ErrorData.Details = details
	return e
}

// Options configure a simulator.
type Options struct {
	Logger *slog.Logger
	// Webhooks posts inbound webhooks (default: a client with a 10 s timeout).
	Webhooks *http.Client
	// Now is the clock of timestamps (default time.Now).
	Now func() time.Time
	// SentReceipts makes the simulator do what the platform does after
	// accepting a message: POST a `sent` status webhook for it (carrying
	// biz_opaque_callback_data), retried while the gateway does not answer
	// 2xx, for up to ReceiptRetryFor (default 5 minutes). Off by default so
	// tests drive receipts through the control API; the fault suite turns it
	// on, since a send whose answer was lost is settled by that receipt.
	SentReceipts    bool
	ReceiptRetryFor time.Duration
}

// Server is a simulated provider.
type Server struct {
	opts Options

	mu        sync.Mutex
	accounts  map[string]*Account // by phone number id
	templates map[string][]Template
	media     map[string]*media
	sent      map[string]*SentMessage
	order     []string
	refuse    map[string][]string // phone number id → queued refusal reasons
	outages   map[string]int      // phone number id → sends to answer with 500
	// mediaOutages: phone number id → media lookups (GET /{media-id}) to
	// answer with 500, as the platform does when its media store fails.
	mediaOutages map[string]int
	// received counts every send the simulator received for a message
	// (accepted or not), by deliveryKey: what the fault suite reads to
	// prove that nothing was sent twice.
	received map[string]*Delivery
	doc      *Document
}

// New returns an empty simulator.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Webhooks == nil {
		opts.Webhooks = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{opts: opts, accounts: map[string]*Account{}, templates: map[string][]Template{},
		media: map[string]*media{}, sent: map[string]*SentMessage{}, refuse: map[string][]string{},
		outages: map[string]int{}, mediaOutages: map[string]int{}, received: map[string]*Delivery{}, doc: MustLoadDocument()}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newMessageID returns a platform-looking message id. Ids are random (96
// bits), never a counter: a restarted simulator cannot hand out an id it
// gave before, which would make two messages share an id at the gateway.
func newMessageID() string {
	return "wamid." + base64.RawURLEncoding.EncodeToString([]byte("SIM"+randomHex(12)))
}

// newObjectID returns a numeric Graph object id (media, templates), random
// for the same reason.
func newObjectID() string {
	b := make([]byte, 7)
	_, _ = rand.Read(b)
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return strconv.FormatUint(1e15+n%9e15, 10)
}

// Handler serves the provider API and the control API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_control/accounts", s.controlAccounts)
	mux.HandleFunc("POST /_control/inbound", s.controlInbound)
	mux.HandleFunc("POST /_control/receipts", s.controlReceipts)
	mux.HandleFunc("POST /_control/templates", s.controlTemplates)
	mux.HandleFunc("POST /_control/refusals", s.controlRefusals)
	mux.HandleFunc("POST /_control/outages", s.controlOutages)
	mux.HandleFunc("POST /_control/media-outages", s.controlMediaOutages)
	mux.HandleFunc("GET /_control/messages", s.controlMessages)
	mux.HandleFunc("GET /_control/stats", s.controlStats)
	mux.HandleFunc("GET /_control/deliveries", s.controlDeliveries)
	mux.HandleFunc("GET /media-download/{id}/file", s.mediaDownload)
	// The document's paths start with the Graph API version; the simulator
	// serves them with it (any version) and without it.
	for _, prefix := range []string{"", "/{version}"} {
		mux.HandleFunc("POST "+prefix+"/{pnid}/messages", s.sendMessage)
		mux.HandleFunc("POST "+prefix+"/{pnid}/media", s.uploadMedia)
		mux.HandleFunc("GET "+prefix+"/{waba}/message_templates", s.listTemplates)
		mux.HandleFunc("GET "+prefix+"/{id}", s.mediaInfo)
	}
	return versionChecked(mux)
}

var graphVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+$`)

// versionChecked refuses a versioned provider path whose version is not
// one, as the platform answers an unknown version.
func versionChecked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := next.(*http.ServeMux).Handler(r); strings.Contains(pattern, "{version}") {
			first := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]
			if !graphVersion.MatchString(first) {
				writeAPIError(w, http.StatusBadRequest, apiError(2500, "Unknown path components: /"+first, "The API version is not valid"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// controlError answers a control API call the simulator cannot do.
func controlError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeAPIError(w http.ResponseWriter, status int, e ErrorObject) {
	if e.FBTraceID == "" {
		e.FBTraceID = "SIM" + randomHex(6)
	}
	writeJSON(w, status, ErrorBody{Error: e})
}

// outage is the platform's answer while the simulator plays an outage.
var outage = apiError(131000, "(#131000) Something went wrong", "Simulated outage")

func invalidParam(details string) ErrorObject {
	return apiError(100, "(#100) Invalid parameter", details)
}

// authorize finds the account of a phone number id and checks the bearer
// token; it answers the error itself and returns nil when it fails.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, pnid string) *Account {
	s.mu.Lock()
	acc := s.accounts[pnid]
	s.mu.Unlock()
	if acc == nil {
		writeAPIError(w, http.StatusBadRequest, apiError(100, "(#100) Unsupported post request", fmt.Sprintf("Object with ID '%s' does not exist", pnid)))
		return nil
	}
	if !s.tokenOK(w, r, acc) {
		return nil
	}
	return acc
}

// tokenOK checks the Authorization header: its form against the
// document's Authorization parameter, its token against the account's.
func (s *Server) tokenOK(w http.ResponseWriter, r *http.Request, acc *Account) bool {
	h := r.Header.Get("Authorization")
	if err := s.doc.ValidateAuthorization(h); err != nil {
		writeAPIError(w, http.StatusUnauthorized, apiError(190, "Invalid OAuth access token - Cannot parse access token", "Authorization: "+err.Error()))
		return false
	}
	if h != "Bearer "+acc.AccessToken {
		writeAPIError(w, http.StatusUnauthorized, apiError(190, "Invalid OAuth access token - Cannot parse access token", "The access token is not valid for this number"))
		return false
	}
	return true
}

// takeOutage consumes a queued outage of the number (uploads and sends
// share them).
func (s *Server) takeOutage(pnid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outages[pnid] > 0 {
		s.outages[pnid]--
		return true
	}
	return false
}

// takeRefusal pops the next queued refusal reason of the number ("" when
// none is queued).
func (s *Server) takeRefusal(pnid string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.refuse[pnid]
	if len(q) == 0 {
		return ""
	}
	s.refuse[pnid] = q[1:]
	return q[0]
}

var phoneNumber = regexp.MustCompile(`^[0-9]{8,15}$`)

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) {
	pnid := r.PathValue("pnid")
	acc := s.authorize(w, r, pnid)
	if acc == nil {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, invalidParam("The request body could not be read"))
		return
	}
	var req SendRequest
	verr := s.doc.ValidateRequest(OpSendMessage, body)
	if verr == nil {
		verr = json.Unmarshal(body, &req)
	}
	s.count(pnid, req, body)
	if verr != nil {
		writeAPIError(w, http.StatusBadRequest, invalidParam(verr.Error()))
		return
	}
	if req.MessagingProduct != "whatsapp" {
		writeAPIError(w, http.StatusBadRequest, invalidParam("messaging_product must be whatsapp"))
		return
	}
	if req.Status == "read" {
		s.writeResponse(w, OpSendMessage, map[string]any{"success": true})
		return
	}
	if req.Type == "" {
		req.Type = "text" // the platform's default
	}
	if s.takeOutage(pnid) {
		writeAPIError(w, http.StatusInternalServerError, outage)
		return
	}
	if reason := s.takeRefusal(pnid); reason != "" {
		writeAPIError(w, http.StatusBadRequest, refusals[reason])
		return
	}
	if req.RecipientType == "group" {
		writeAPIError(w, http.StatusBadRequest, invalidParam("Groups are not supported on this number"))
		return
	}
	if !phoneNumber.MatchString(req.To) {
		writeAPIError(w, http.StatusBadRequest, invalidParam("to must be a phone number with country code, digits only"))
		return
	}
	if e, ok := s.checkContent(acc, req); !ok {
		writeAPIError(w, http.StatusBadRequest, e)
		return
	}
	id := newMessageID()
	s.mu.Lock()
	s.sent[id] = &SentMessage{ID: id, PhoneNumberID: pnid, To: req.To, Type: req.Type, Status: "accepted", Request: req,
		Body: json.RawMessage(body), CreatedAt: s.opts.Now().UTC()}
	s.order = append(s.order, id)
	if d := s.received[deliveryKey(pnid, req, body)]; d != nil {
		d.Accepted++
		d.MessageIDs = append(d.MessageIDs, id)
	}
	s.mu.Unlock()
	s.writeResponse(w, OpSendMessage, SendResponse{MessagingProduct: "whatsapp",
		Contacts: []SentTo{{Input: req.To, WaID: req.To}}, Messages: []SentStatus{{ID: id, MessageStatus: "accepted"}}})
	if s.opts.SentReceipts {
		go s.sendSentReceipt(acc, id)
	}
}

// sendSentReceipt posts the `sent` status of an accepted message the way
// the platform does: after the answer, and again with backoff while the
// gateway does not take it (the platform retries webhooks for days).
func (s *Server) sendSentReceipt(acc *Account, id string) {
	retryFor := s.opts.ReceiptRetryFor
	if retryFor <= 0 {
		retryFor = 5 * time.Minute
	}
	deadline := time.Now().Add(retryFor)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s.mu.Lock()
	msg := s.sent[id]
	s.mu.Unlock()
	v := webhookValueOf(acc)
	v.Statuses = []statusUpdate{{ID: id, Status: "sent", Timestamp: strconv.FormatInt(s.opts.Now().Unix(), 10),
		RecipientID: msg.To, BizOpaqueCallbackData: msg.Request.BizOpaqueCallbackData}}
	r := (&http.Request{}).WithContext(ctx)
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 10*time.Second) {
		res, err := s.post(r, acc, v)
		if err == nil && res.WebhookStatus >= 200 && res.WebhookStatus < 300 {
			return
		}
		if errors.Is(err, errOutsideDocument) || time.Now().Add(wait).After(deadline) {
			s.opts.Logger.Warn("sent receipt not delivered", "message_id", id, "status", res.WebhookStatus, "err", err)
			return
		}
		time.Sleep(wait)
	}
}

// writeResponse answers 200 with v, which must fit the document's answer
// of op: a simulator that answers outside the document fails loudly
// rather than teaching the client a shape the platform never sends.
func (s *Server) writeResponse(w http.ResponseWriter, op string, v any) {
	b, err := json.Marshal(v)
	if err == nil {
		err = s.doc.ValidateResponse(op, b)
	}
	if err != nil {
		s.opts.Logger.Error("simulator answer outside the provider's document", "op", op, "err", err)
		writeAPIError(w, http.StatusInternalServerError, apiError(1, "(#1) An unknown error occurred", "simulator answer outside the document"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// checkContent validates a send the way the platform does: the content of
// its type, known media, and for templates an approved template whose
// parameters match its variables.
func (s *Server) checkContent(acc *Account, req SendRequest) (ErrorObject, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mediaOK := func(m *MediaObject) bool {
		if m == nil {
			return false
		}
		if m.Link != "" {
			return true
		}
		md := s.media[m.ID]
		return md != nil && md.phoneNumberID == acc.PhoneNumberID
	}
	switch req.Type {
	case "text":
		if req.Text == nil || strings.TrimSpace(req.Text.Body) == "" {
			return invalidParam("Param text['body'] is required"), false
		}
	case "image", "video", "audio", "document", "sticker":
		m := map[string]*MediaObject{"image": req.Image, "video": req.Video, "audio": req.Audio, "document": req.Document, "sticker": req.Sticker}[req.Type]
		if !mediaOK(m) {
			return invalidParam("The media id or link is missing or unknown"), false
		}
	case "template":
		return s.checkTemplate(acc, req.Template, mediaOK)
	default:
		return invalidParam(fmt.Sprintf("Unsupported message type %q", req.Type)), false
	}
	return ErrorObject{}, true
}

var variable = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

func distinctVars(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range variable.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

func (s *Server) checkTemplate(acc *Account, t *TemplateObj, mediaOK func(*MediaObject) bool) (ErrorObject, bool) {
	if t == nil || t.Name == "" {
		return invalidParam("Param template['name'] is required"), false
	}
	var def *Template
	for i, d := range s.templates[acc.BusinessAccountID] {
		if d.Name == t.Name && d.Language == t.Language.Code {
			def = &s.templates[acc.BusinessAccountID][i]
		}
	}
	if def == nil {
		return apiError(132001, "(#132001) Template name does not exist in the translation", fmt.Sprintf("template name (%s) does not exist in %s", t.Name, t.Language.Code)), false
	}
	if def.Status != "APPROVED" {
		return apiError(132015, "(#132015) Template is paused or not approved", "The template is not approved for sending"), false
	}
	sent := map[string]TemplateComponent{}
	for _, c := range t.Components {
		key := c.Type
		if c.Type == "button" {
			key += strings.Trim(string(c.Index), `"`)
		}
		sent[key] = c
	}
	buttonIndex := 0
	for _, c := range def.Components {
		switch c.Type {
		case "HEADER":
			switch c.Format {
			case "IMAGE", "VIDEO", "DOCUMENT":
				h, ok := sent["header"]
				has := ok && len(h.Parameters) == 1 && mediaOK(map[string]*MediaObject{
					"IMAGE": h.Parameters[0].Image, "VIDEO": h.Parameters[0].Video, "DOCUMENT": h.Parameters[0].Document}[c.Format])
				if !has && (c.Example == nil || len(c.Example.HeaderHandle) == 0) {
					return apiError(132012, "(#132012) Parameter format does not match format in the created template", "header: the "+strings.ToLower(c.Format)+" is missing"), false
				}
			case "TEXT":
				if e, ok := countParams("header", c.Text, sent["header"]); !ok {
					return e, false
				}
			}
		case "BODY":
			if e, ok := countParams("body", c.Text, sent["body"]); !ok {
				return e, false
			}
		case "BUTTONS":
			for _, b := range c.Buttons {
				if b.Type == "URL" {
					if e, ok := countParams("button "+strconv.Itoa(buttonIndex), b.URL, sent["button"+strconv.Itoa(buttonIndex)]); !ok {
						return e, false
					}
				}
				buttonIndex++
			}
		}
	}
	return ErrorObject{}, true
}

// countParams checks the number of text parameters against the variables
// of a component's text (a variable without a value is an empty text).
func countParams(where, text string, c TemplateComponent) (ErrorObject, bool) {
	want := len(distinctVars(text))
	got := 0
	for _, p := range c.Parameters {
		if p.Type == "text" && p.Text != nil {
			got++
		}
	}
	if got != want {
		return apiError(132000, "(#132000) Number of parameters does not match the expected number of params",
			fmt.Sprintf("%s: expected number of params (%d) does not match received number of params (%d)", where, want, got)), false
	}
	return ErrorObject{}, true
}

func (s *Server) uploadMedia(w http.ResponseWriter, r *http.Request) {
	pnid := r.PathValue("pnid")
	acc := s.authorize(w, r, pnid)
	if acc == nil {
		return
	}
	if s.takeOutage(pnid) {
		writeAPIError(w, http.StatusInternalServerError, outage)
		return
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		writeAPIError(w, http.StatusBadRequest, invalidParam("The upload is not a valid multipart form"))
		return
	}
	if err := s.doc.ValidateUploadForm(r.MultipartForm); err != nil {
		writeAPIError(w, http.StatusBadRequest, invalidParam(err.Error()))
		return
	}
	if r.FormValue("messaging_product") != "whatsapp" {
		writeAPIError(w, http.StatusBadRequest, invalidParam("messaging_product must be whatsapp"))
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, invalidParam("Param file is required"))
		return
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, invalidParam("The file could not be read"))
		return
	}
	ct := r.FormValue("type")
	if ct == "" {
		ct = hdr.Header.Get("Content-Type")
	}
	s.writeResponse(w, OpUploadMedia, MediaUploadResponse{ID: s.storeMedia(pnid, ct, hdr.Filename, data)})
}

// storeMedia keeps a file of a number and returns its media id.
func (s *Server) storeMedia(pnid, mimeType, fileName string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newObjectID()
	s.media[id] = &media{id: id, phoneNumberID: pnid, mimeType: mimeType, fileName: fileName, data: data}
	return id
}

// authorizedMedia finds the media of the {id} path value and checks the
// bearer token of its number; it answers the error itself (notFound when
// there is no such media) and returns nil when it fails.
func (s *Server) authorizedMedia(w http.ResponseWriter, r *http.Request, notFound ErrorObject) *media {
	s.mu.Lock()
	m := s.media[r.PathValue("id")]
	var acc *Account
	if m != nil {
		acc = s.accounts[m.phoneNumberID]
	}
	s.mu.Unlock()
	if m == nil || acc == nil {
		writeAPIError(w, http.StatusNotFound, notFound)
		return nil
	}
	if !s.tokenOK(w, r, acc) {
		return nil
	}
	return m
}

func (s *Server) mediaInfo(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m := s.authorizedMedia(w, r, apiError(100, "(#100) Unsupported get request", fmt.Sprintf("Object with ID '%s' does not exist", id)))
	if m == nil {
		return
	}
	s.mu.Lock()
	down := s.mediaOutages[m.phoneNumberID] > 0
	if down {
		s.mediaOutages[m.phoneNumberID]--
	}
	s.mu.Unlock()
	if down {
		writeAPIError(w, http.StatusInternalServerError, outage)
		return
	}
	// The document's optional phone_number_id: the media must belong to it.
	if pn := r.URL.Query().Get("phone_number_id"); pn != "" && pn != m.phoneNumberID {
		writeAPIError(w, http.StatusBadRequest, invalidParam("The media does not belong to phone number "+pn))
		return
	}
	sum := sha256.Sum256(m.data)
	s.writeResponse(w, OpRetrieveMedia, MediaInfo{MessagingProduct: "whatsapp", URL: "http://" + r.Host + "/media-download/" + id + "/file",
		MimeType: m.mimeType, SHA256: base64.StdEncoding.EncodeToString(sum[:]), FileSize: strconv.Itoa(len(m.data)), ID: id})
}

func (s *Server) mediaDownload(w http.ResponseWriter, r *http.Request) {
	m := s.authorizedMedia(w, r, apiError(100, "(#100) Media not found", "The media does not exist"))
	if m == nil {
		return
	}
	w.Header().Set("Content-Type", m.mimeType)
	_, _ = w.Write(m.data)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	waba := r.PathValue("waba")
	if err := s.doc.ValidateAuthorization(r.Header.Get("Authorization")); err != nil {
		writeAPIError(w, http.StatusUnauthorized, apiError(190, "Invalid OAuth access token - Cannot parse access token", "Authorization: "+err.Error()))
		return
	}
	s.mu.Lock()
	var token string
	for _, a := range s.accounts {
		if a.BusinessAccountID == waba && r.Header.Get("Authorization") == "Bearer "+a.AccessToken {
			token = a.AccessToken
		}
	}
	all := append([]Template(nil), s.templates[waba]...)
	s.mu.Unlock()
	// The document's name filter.
	if name := r.URL.Query().Get("name"); name != "" {
		kept := all[:0]
		for _, t := range all {
			if t.Name == name {
				kept = append(kept, t)
			}
		}
		all = kept
	}
	if token == "" {
		writeAPIError(w, http.StatusUnauthorized, apiError(190, "Invalid OAuth access token", "The access token is not valid for this business account"))
		return
	}
	limit := 25
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && n <= 100 {
		limit = n
	}
	start := 0
	if a := r.URL.Query().Get("after"); a != "" {
		b, err := base64.RawURLEncoding.DecodeString(a)
		n, err2 := strconv.Atoi(string(b))
		if err != nil || err2 != nil || n < 0 || n > len(all) {
			writeAPIError(w, http.StatusBadRequest, invalidParam("The after cursor is not valid"))
			return
		}
		start = n
	}
	end := min(start+limit, len(all))
	var page TemplatePage
	page.Data = all[start:end]
	if page.Data == nil {
		page.Data = []Template{}
	}
	page.Paging.Cursors.Before = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(start)))
	page.Paging.Cursors.After = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	if end < len(all) {
		page.Paging.Next = "http://" + r.Host + "/" + waba + "/message_templates?limit=" + strconv.Itoa(limit) + "&after=" + page.Paging.Cursors.After
	}
	s.writeResponse(w, OpListTemplates, page)
}

// ---------------------------------------------------------------- control API

func decodeControl(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 200<<20)).Decode(v); err != nil {
		controlError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	return true
}

func (s *Server) account(w http.ResponseWriter, pnid string) *Account {
	s.mu.Lock()
	defer s.mu.Unlock()
	acc := s.accounts[pnid]
	if acc == nil {
		controlError(w, http.StatusNotFound, "unknown phone_number_id "+pnid)
	}
	return acc
}

// AddAccount registers (or replaces) a simulated number.
func (s *Server) AddAccount(a Account) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := a
	s.accounts[a.PhoneNumberID] = &cp
}

func (s *Server) controlAccounts(w http.ResponseWriter, r *http.Request) {
	var a Account
	if !decodeControl(w, r, &a) {
		return
	}
	if a.PhoneNumberID == "" || a.BusinessAccountID == "" || a.AccessToken == "" || a.AppSecret == "" {
		controlError(w, http.StatusBadRequest, "phone_number_id, business_account_id, access_token and app_secret are required")
		return
	}
	s.AddAccount(a)
	writeJSON(w, http.StatusCreated, a)
}

// InboundRequest makes a contact send a message to a business number.
type InboundRequest struct {
	PhoneNumberID string `json:"phone_number_id"`
	From          string `json:"from"`
	Name          string `json:"name,omitempty"`
	// Type is text (default), image, video, audio, document or sticker;
	// any other kind is given as Message.
	Type string `json:"type,omitempty"`
	// Message is a message object in the provider's webhook format, of any
	// kind (location, contacts, reaction, button, interactive, order,
	// system, unsupported); from, id and timestamp are filled in. It must
	// fit the document's WebhookPayload.
	Message json.RawMessage `json:"message,omitempty"`
	Text    string          `json:"text,omitempty"`
	// Media is the file of a media message (base64), with its caption.
	Media *InboundMedia `json:"media,omitempty"`
	// ID is the message id to use (default: a new one); reuse it to
	// simulate a repeated delivery.
	ID string `json:"id,omitempty"`
	// Timestamp is the Unix time the contact sent it (default: now).
	Timestamp int64 `json:"timestamp,omitempty"`
	// ReplyTo is the id of a message this one answers.
	ReplyTo string `json:"reply_to,omitempty"`
}

// InboundMedia is the file of a simulated media message.
type InboundMedia struct {
	MimeType   string `json:"mime_type"`
	Filename   string `json:"filename,omitempty"`
	Caption    string `json:"caption,omitempty"`
	DataBase64 string `json:"data_base64"`
}

// WebhookResult is what the gateway answered a webhook POST.
type WebhookResult struct {
	MessageID     string `json:"message_id,omitempty"`
	WebhookStatus int    `json:"webhook_status"`
	WebhookBody   string `json:"webhook_body,omitempty"`
}

func (s *Server) controlInbound(w http.ResponseWriter, r *http.Request) {
	var in InboundRequest
	if !decodeControl(w, r, &in) {
		return
	}
	acc := s.account(w, in.PhoneNumberID)
	if acc == nil {
		return
	}
	if in.From == "" {
		controlError(w, http.StatusBadRequest, "from is required")
		return
	}
	if in.ID == "" {
		in.ID = newMessageID()
	}
	ts := in.Timestamp
	if ts == 0 {
		ts = s.opts.Now().Unix()
	}
	msg := inboundMessage{From: in.From, ID: in.ID, Timestamp: strconv.FormatInt(ts, 10), Type: in.Type}
	if msg.Type == "" {
		msg.Type = "text"
	}
	if in.ReplyTo != "" {
		msg.Context = &inboundCtx{From: acc.DisplayPhoneNumber, ID: in.ReplyTo}
	}
	switch {
	case in.Message != nil:
	case msg.Type == "text":
		msg.Text = &TextBody{Body: in.Text}
	case msg.Type == "image" || msg.Type == "video" || msg.Type == "audio" || msg.Type == "document" || msg.Type == "sticker":
		if in.Media == nil {
			controlError(w, http.StatusBadRequest, "media is required for a "+msg.Type+" message")
			return
		}
		data, err := base64.StdEncoding.DecodeString(in.Media.DataBase64)
		if err != nil {
			controlError(w, http.StatusBadRequest, "media.data_base64 is not base64")
			return
		}
		id := s.storeMedia(acc.PhoneNumberID, in.Media.MimeType, in.Media.Filename, data)
		sum := sha256.Sum256(data)
		im := &inboundMedia{ID: id, MimeType: in.Media.MimeType, SHA256: base64.StdEncoding.EncodeToString(sum[:]),
			Caption: in.Media.Caption, Filename: in.Media.Filename}
		switch msg.Type {
		case "image":
			msg.Image = im
		case "video":
			msg.Video = im
		case "audio":
			msg.Audio = im
		case "document":
			msg.Document = im
		case "sticker":
			msg.Sticker = im
		}
	default:
		controlError(w, http.StatusBadRequest, "unsupported type "+msg.Type+" (give other kinds as message)")
		return
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		controlError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if in.Message != nil {
		if raw, err = withEnvelope(in.Message, msg); err != nil {
			controlError(w, http.StatusBadRequest, "message: "+err.Error())
			return
		}
	}
	v := webhookValueOf(acc)
	v.Messages = []json.RawMessage{raw}
	c := webhookContact{WaID: in.From}
	c.Profile.Name = in.Name
	v.Contacts = []webhookContact{c}
	res, err := s.post(r, acc, v)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, errOutsideDocument) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, map[string]string{"error": err.Error(), "message_id": in.ID})
		return
	}
	res.MessageID = in.ID
	writeJSON(w, http.StatusOK, res)
}

// withEnvelope completes a message object given in the provider's format
// with the sender, id, timestamp (and reply context) of env.
func withEnvelope(message json.RawMessage, env inboundMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(message, &m); err != nil {
		return nil, err
	}
	if t, _ := m["type"].(string); t == "" {
		return nil, errors.New("type is required")
	}
	m["from"], m["id"], m["timestamp"] = env.From, env.ID, env.Timestamp
	if env.Context != nil {
		if _, ok := m["context"]; !ok {
			m["context"] = env.Context
		}
	}
	return json.Marshal(m)
}

// ReceiptRequest makes the platform report a status of a sent message.
type ReceiptRequest struct {
	PhoneNumberID string `json:"phone_number_id,omitempty"`
	MessageID     string `json:"message_id"`
	// Status is sent, delivered, read or failed.
	Status string `json:"status"`
	// Reason is the failure reason: no_account, blocked, marketing_limit,
	// or any text.
	Reason string `json:"reason,omitempty"`
}

func (s *Server) controlReceipts(w http.ResponseWriter, r *http.Request) {
	var in ReceiptRequest
	if !decodeControl(w, r, &in) {
		return
	}
	s.mu.Lock()
	msg := s.sent[in.MessageID]
	var acc *Account
	if msg != nil {
		acc = s.accounts[msg.PhoneNumberID]
	}
	s.mu.Unlock()
	if msg == nil || acc == nil {
		controlError(w, http.StatusNotFound, "unknown message_id "+in.MessageID)
		return
	}
	switch in.Status {
	case "sent", "delivered", "read", "failed":
	default:
		controlError(w, http.StatusBadRequest, "status must be sent, delivered, read or failed")
		return
	}
	now := s.opts.Now()
	st := statusUpdate{ID: msg.ID, Status: in.Status, Timestamp: strconv.FormatInt(now.Unix(), 10),
		RecipientID: msg.To, BizOpaqueCallbackData: msg.Request.BizOpaqueCallbackData}
	if in.Status == "failed" {
		e, ok := refusals[in.Reason]
		if !ok {
			reason := in.Reason
			if reason == "" {
				reason = "Message failed to send"
			}
			e = apiError(131000, "(#131000) Something went wrong", reason)
		}
		st.Errors = []statusError{{Code: e.Code, Title: e.Message, Message: e.Message, ErrorData: ErrorData{Details: e.ErrorData.Details}}}
	} else {
		// As the platform does: the conversation the message opened or
		// used, and how it is priced.
		category := "service"
		if msg.Type == "template" {
			category = "utility"
		}
		st.Conversation = &conversation{ID: "CONV" + randomHex(8), ExpirationTimestamp: strconv.FormatInt(now.Add(24*time.Hour).Unix(), 10)}
		st.Conversation.Origin.Type = category
		st.Pricing = &pricing{Billable: category != "service", PricingModel: "PMP", Category: category}
	}
	s.mu.Lock()
	msg.Status = in.Status
	s.mu.Unlock()
	v := webhookValueOf(acc)
	v.Statuses = []statusUpdate{st}
	res, err := s.post(r, acc, v)
	if err != nil {
		controlError(w, http.StatusBadGateway, err.Error())
		return
	}
	res.MessageID = msg.ID
	writeJSON(w, http.StatusOK, res)
}

// webhookValueOf is the change value of a webhook about the account's
// number.
func webhookValueOf(acc *Account) webhookValue {
	return webhookValue{MessagingProduct: "whatsapp",
		Metadata: webhookMetadata{DisplayPhoneNumber: acc.DisplayPhoneNumber, PhoneNumberID: acc.PhoneNumberID}}
}

// Sign returns the X-Hub-Signature-256 value of body for appSecret:
// sha256= and the hex HMAC-SHA256 of the raw body with the app secret.
func Sign(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// errOutsideDocument is a webhook the simulator would post that does not
// fit the provider's document: never posted.
var errOutsideDocument = errors.New("webhook outside the provider's document")

// post delivers a signed webhook to the account's webhook URL; the body
// must fit the document's WebhookPayload first.
func (s *Server) post(r *http.Request, acc *Account, v webhookValue) (WebhookResult, error) {
	if acc.WebhookURL == "" {
		return WebhookResult{}, fmt.Errorf("account %s has no webhook_url", acc.PhoneNumberID)
	}
	payload := webhookPayload{Object: "whatsapp_business_account", Entry: []webhookEntry{{
		ID: acc.BusinessAccountID, Changes: []webhookChange{{Field: "messages", Value: v}},
	}}}
	body, err := json.Marshal(payload)
	if err != nil {
		return WebhookResult{}, err
	}
	if err := s.doc.ValidateRequest(OpWebhook, body); err != nil {
		return WebhookResult{}, fmt.Errorf("%w: %w", errOutsideDocument, err)
	}
	return s.deliver(r.Context(), acc, body)
}

// deliver POSTs a signed webhook body.
func (s *Server) deliver(ctx context.Context, acc *Account, body []byte) (WebhookResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, acc.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return WebhookResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", Sign(acc.AppSecret, body))
	resp, err := s.opts.Webhooks.Do(req)
	if err != nil {
		return WebhookResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	s.opts.Logger.Info("webhook delivered", "url", acc.WebhookURL, "status", resp.StatusCode)
	return WebhookResult{WebhookStatus: resp.StatusCode, WebhookBody: string(b)}, nil
}

// Delivery counts the sends the simulator received for one message of the
// business: the same biz_opaque_callback_data (the gateway's message id),
// or without it the same recipient and body.
type Delivery struct {
	Key                   string   `json:"key"`
	PhoneNumberID         string   `json:"phone_number_id"`
	BizOpaqueCallbackData string   `json:"biz_opaque_callback_data,omitempty"`
	To                    string   `json:"to"`
	Received              int      `json:"received"`
	Accepted              int      `json:"accepted"`
	MessageIDs            []string `json:"message_ids"`
}

// deliveryKey identifies the message a send carries.
func deliveryKey(pnid string, req SendRequest, body []byte) string {
	if req.BizOpaqueCallbackData != "" {
		return pnid + "/cb/" + req.BizOpaqueCallbackData
	}
	sum := sha256.Sum256(body)
	return pnid + "/to/" + req.To + "/" + hex.EncodeToString(sum[:8])
}

// count records one received send (before validation and faults, so a
// refused or failed attempt counts too).
func (s *Server) count(pnid string, req SendRequest, body []byte) {
	if req.Status == "read" {
		return
	}
	key := deliveryKey(pnid, req, body)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.received[key]
	if d == nil {
		d = &Delivery{Key: key, PhoneNumberID: pnid, BizOpaqueCallbackData: req.BizOpaqueCallbackData, To: req.To, MessageIDs: []string{}}
		s.received[key] = d
	}
	d.Received++
}

// Deliveries lists the received sends per message (all numbers when pnid
// is empty), most received first.
func (s *Server) Deliveries(pnid string) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Delivery{}
	for _, d := range s.received {
		if pnid == "" || d.PhoneNumberID == pnid {
			cp := *d
			cp.MessageIDs = append([]string{}, d.MessageIDs...)
			out = append(out, cp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Accepted != out[j].Accepted {
			return out[i].Accepted > out[j].Accepted
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func (s *Server) controlDeliveries(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": s.Deliveries(r.URL.Query().Get("phone_number_id"))})
}

// TemplatesRequest seeds templates of a business account; a template with
// the name and language of an existing one replaces it.
type TemplatesRequest struct {
	BusinessAccountID string     `json:"business_account_id"`
	Templates         []Template `json:"templates"`
	// Replace drops the account's other templates (as if deleted at the
	// provider).
	Replace bool `json:"replace,omitempty"`
}

// SeedTemplates adds or replaces templates and returns them with their ids.
func (s *Server) SeedTemplates(waba string, list []Template) []Template {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Template, 0, len(list))
	for _, t := range list {
		if t.Status == "" {
			t.Status = "APPROVED"
		}
		if t.ParameterFormat == "" {
			t.ParameterFormat = "POSITIONAL"
		}
		replaced := false
		for i, old := range s.templates[waba] {
			if old.Name == t.Name && old.Language == t.Language {
				t.ID = old.ID
				s.templates[waba][i] = t
				replaced = true
			}
		}
		if !replaced {
			t.ID = newObjectID()
			s.templates[waba] = append(s.templates[waba], t)
		}
		out = append(out, t)
	}
	return out
}

func (s *Server) controlTemplates(w http.ResponseWriter, r *http.Request) {
	var in TemplatesRequest
	if !decodeControl(w, r, &in) {
		return
	}
	if in.BusinessAccountID == "" {
		controlError(w, http.StatusBadRequest, "business_account_id is required")
		return
	}
	for _, t := range in.Templates {
		if t.Name == "" || t.Language == "" {
			controlError(w, http.StatusBadRequest, "every template needs a name and a language")
			return
		}
	}
	if in.Replace {
		s.mu.Lock()
		keep := s.templates[in.BusinessAccountID][:0]
		for _, old := range s.templates[in.BusinessAccountID] {
			for _, t := range in.Templates {
				if t.Name == old.Name && t.Language == old.Language {
					keep = append(keep, old)
					break
				}
			}
		}
		s.templates[in.BusinessAccountID] = keep
		s.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": s.SeedTemplates(in.BusinessAccountID, in.Templates)})
}

// FaultRequest queues failures of the next sends of a number.
type FaultRequest struct {
	PhoneNumberID string `json:"phone_number_id"`
	// Reason (refusals): no_account, blocked or marketing_limit.
	Reason string `json:"reason,omitempty"`
	// Count is how many of the next sends fail (default 1).
	Count int `json:"count,omitempty"`
}

func (s *Server) controlRefusals(w http.ResponseWriter, r *http.Request) {
	var in FaultRequest
	if !decodeControl(w, r, &in) || s.account(w, in.PhoneNumberID) == nil {
		return
	}
	if _, ok := refusals[in.Reason]; !ok {
		controlError(w, http.StatusBadRequest, "reason must be no_account, blocked or marketing_limit")
		return
	}
	s.mu.Lock()
	for range max(in.Count, 1) {
		s.refuse[in.PhoneNumberID] = append(s.refuse[in.PhoneNumberID], in.Reason)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"queued": max(in.Count, 1)})
}

func (s *Server) controlOutages(w http.ResponseWriter, r *http.Request) {
	var in FaultRequest
	if !decodeControl(w, r, &in) || s.account(w, in.PhoneNumberID) == nil {
		return
	}
	s.mu.Lock()
	s.outages[in.PhoneNumberID] += max(in.Count, 1)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"queued": max(in.Count, 1)})
}

// controlMediaOutages makes the next media lookups of a number's media
// answer 500 (Count of them, default 1).
func (s *Server) controlMediaOutages(w http.ResponseWriter, r *http.Request) {
	var in FaultRequest
	if !decodeControl(w, r, &in) || s.account(w, in.PhoneNumberID) == nil {
		return
	}
	s.mu.Lock()
	s.mediaOutages[in.PhoneNumberID] += max(in.Count, 1)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"queued": max(in.Count, 1)})
}

// Sent lists what the business sent, oldest first (all numbers when pnid
// is empty).
func (s *Server) Sent(pnid string) []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SentMessage
	for _, id := range s.order {
		if m := s.sent[id]; pnid == "" || m.PhoneNumberID == pnid {
			out = append(out, *m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

func (s *Server) controlMessages(w http.ResponseWriter, r *http.Request) {
	list := s.Sent(r.URL.Query().Get("phone_number_id"))
	if list == nil {
		list = []SentMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": list})
}

// controlStats counts what the simulator holds, cheap enough to poll
// under load (the message list is not).
func (s *Server) controlStats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := len(s.order)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, Stats{Messages: n})
}

// AddMedia stores a file under a given media id of a number, as if a
// contact had sent it (for payloads written elsewhere, such as the
// document's webhook examples).
func (s *Server) AddMedia(pnid, id, mimeType string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.media[id] = &media{id: id, phoneNumberID: pnid, mimeType: mimeType, data: data}
}
