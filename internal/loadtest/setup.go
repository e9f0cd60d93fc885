package loadtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chatmsg/gateway/internal/providersim"
)

// Company is a tenant the load generator set up through the admin CLI:
// an access token with every permission and an official channel on the
// provider simulator whose 24-hour window is open with each of Contacts.
type Company struct {
	ID         int64
	UserID     int64
	Token      string
	ChannelKey string // the official channel's number (sender_key)
	ChannelID  int64  // the official channel's company channel id
	// ProviderAccountID is the channel's provider account (uploads of
	// header media name it).
	ProviderAccountID int64
	PhoneNumberID     string
	// BusinessAccountID and AppSecret are the provider account's, for
	// posting the provider's signed webhooks straight to the gateway.
	BusinessAccountID string
	AppSecret         string
	AccessToken       string
	Contacts          []string
	// Tokens are more tokens of the company's user (MoreTokens): the
	// management endpoints limit requests per token.
	Tokens []string
}

// SendRatePerCompany is the API document's send limit (600 per minute per
// company). The load generator keeps each company a little under it over
// any 60 seconds (Budget), so what it measures is never the limiter.
const SendRatePerCompany = 600

// Setup creates companies on a stack.
type Setup struct {
	Stack    *Stack
	API      *Client
	Provider providersim.Control
}

// NewSetup returns a Setup for s.
func NewSetup(s *Stack) *Setup {
	return &Setup{Stack: s, API: NewClient(s.GatewayURL), Provider: providersim.Control{URL: s.ProviderURL}}
}

// Companies creates n companies named prefix-1…n, each with an official
// channel and contacts conversations whose window is open (each contact
// wrote once through the provider simulator's signed webhook). Contact
// names carry an accent so the filtered listing has something to fold.
func (st *Setup) Companies(ctx context.Context, prefix string, first, n, contacts int) ([]*Company, error) {
	return st.CompaniesAt(ctx, prefix, first, n, contacts, st.Stack.ProviderURL)
}

// CompaniesAt is Companies with the official channels' provider API at
// baseURL (a provider that stalls, say); their contacts still write
// through the provider simulator, which signs the inbound webhooks.
func (st *Setup) CompaniesAt(ctx context.Context, prefix string, first, n, contacts int, baseURL string) ([]*Company, error) {
	out := make([]*Company, n)
	err := parallel(ctx, n, 4, func(ctx context.Context, i int) error {
		c, err := st.company(ctx, prefix, first+i, contacts, baseURL)
		out[i] = c
		return err
	})
	return out, err
}

// parallel runs fn for 0…n-1, at most limit at a time, and returns the
// first error (the others are cancelled through ctx).
func parallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if ctx.Err() != nil {
				return
			}
			if err := fn(ctx, i); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

func (st *Setup) company(ctx context.Context, prefix string, num, contacts int, baseURL string) (*Company, error) {
	var boot struct {
		CompanyID int64  `json:"company_id"`
		UserID    int64  `json:"user_id"`
		Token     string `json:"token"`
	}
	if err := st.Stack.Admin(ctx, &boot, "bootstrap", "--company", fmt.Sprintf("%s-%d", prefix, num),
		"--email", fmt.Sprintf("%s-%d@load.test", prefix, num), "--permissions", "all"); err != nil {
		return nil, err
	}
	c := &Company{ID: boot.CompanyID, UserID: boot.UserID, Token: boot.Token, ChannelKey: fmt.Sprintf("5521%09d", num),
		PhoneNumberID: fmt.Sprintf("7%014d", num), BusinessAccountID: fmt.Sprintf("6%014d", num),
		AppSecret: fmt.Sprintf("sim-secret-%d", num), AccessToken: fmt.Sprintf("sim-token-%d", num)}
	acc := providersim.Account{PhoneNumberID: c.PhoneNumberID, BusinessAccountID: fmt.Sprintf("6%014d", num),
		AccessToken: fmt.Sprintf("sim-token-%d", num), AppSecret: fmt.Sprintf("sim-secret-%d", num),
		DisplayPhoneNumber: c.ChannelKey, WebhookURL: st.Stack.GatewayURL + "/provider-webhooks/" + c.PhoneNumberID}
	if err := st.Provider.AddAccount(ctx, acc); err != nil {
		return nil, err
	}
	var reg struct {
		CompanyChannelID  int64 `json:"company_channel_id"`
		ProviderAccountID int64 `json:"provider_account_id"`
	}
	if err := st.Stack.Admin(ctx, &reg, "channel", "register-official", "--company-id", fmt.Sprint(c.ID),
		"--name", "load", "--key", c.ChannelKey, "--business-account-id", acc.BusinessAccountID,
		"--phone-number-id", acc.PhoneNumberID, "--access-token", acc.AccessToken, "--app-secret", acc.AppSecret,
		"--base-url", baseURL); err != nil {
		return nil, err
	}
	c.ChannelID, c.ProviderAccountID = reg.CompanyChannelID, reg.ProviderAccountID
	for j := range contacts {
		contact := fmt.Sprintf("5531%04d%05d", num%10000, j)
		res, err := st.Provider.Inbound(ctx, providersim.InboundRequest{PhoneNumberID: c.PhoneNumberID,
			From: contact, Name: fmt.Sprintf("Cliente João %d-%d", num, j), Text: "Olá"})
		if err != nil {
			return nil, err
		}
		if res.WebhookStatus != 200 {
			return nil, fmt.Errorf("inbound from %s: the gateway answered %d %s", contact, res.WebhookStatus, res.WebhookBody)
		}
		c.Contacts = append(c.Contacts, contact)
	}
	return c, nil
}

// MoreTokens gives c n more tokens with every permission (gateway admin
// token create), for set-ups that make more management requests than one
// token may in a minute.
func (st *Setup) MoreTokens(ctx context.Context, c *Company, n int) error {
	toks := make([]string, n)
	err := parallel(ctx, n, 4, func(ctx context.Context, i int) error {
		var out struct {
			Token string `json:"token"`
		}
		err := st.Stack.Admin(ctx, &out, "token", "create", "--user-id", fmt.Sprint(c.UserID), "--name", fmt.Sprintf("load-%d", i),
			"--permissions", "all")
		toks[i] = out.Token
		return err
	})
	c.Tokens = append(c.Tokens, toks...)
	return err
}

// token is the company's i-th token, over its first and its extra ones.
func (c *Company) token(i int) string {
	if i%(len(c.Tokens)+1) == 0 {
		return c.Token
	}
	return c.Tokens[i%(len(c.Tokens)+1)-1]
}

// Connection is an unofficial chat-app connection of a company on the
// in-process simulator driver, paired, with contacts on the chat app.
type Connection struct {
	ID       int64
	Key      string
	Contacts []string
}

// Connect creates a chat-app connection for c and pairs it through the
// simulator's control endpoints, as the connections README shows.
func (st *Setup) Connect(ctx context.Context, c *Company, key string, contacts []string) (*Connection, error) {
	var created struct {
		Data struct {
			ID int64 `json:"id"`
		} `json:"data"`
	}
	if err := st.API.JSON(ctx, "POST", "/api/chatapp-create", c.Token, map[string]any{"name": "chaos", "key": key}, &created); err != nil {
		return nil, err
	}
	conn := &Connection{ID: created.Data.ID, Key: key, Contacts: contacts}
	if err := st.API.JSON(ctx, "POST", "/api/chatapp-qrcode", c.Token, map[string]any{"id": conn.ID, "os": "Linux", "browser": "loadgen"}, nil); err != nil {
		return nil, err
	}
	if err := st.API.JSON(ctx, "POST", fmt.Sprintf("/api/chatapp-simulator/%d/pair", conn.ID), c.Token, map[string]any{}, nil); err != nil {
		return nil, err
	}
	var list []map[string]any
	for _, k := range contacts {
		list = append(list, map[string]any{"key": k, "name": "Contato " + k})
	}
	if err := st.API.JSON(ctx, "POST", fmt.Sprintf("/api/chatapp-simulator/%d/contacts", conn.ID), c.Token, map[string]any{"contacts": list}, nil); err != nil {
		return nil, err
	}
	return conn, nil
}

// SimulatorMessages is what a connection handed to the simulated chat app
// (GET /api/chatapp-simulator/{id}/messages). The simulator lives in the
// gateway's process: it forgets everything when the process ends.
func (st *Setup) SimulatorMessages(ctx context.Context, c *Company, conn *Connection) ([]HandedOver, error) {
	var res struct {
		Data []struct {
			ExternalID string `json:"external_id"`
			Text       string `json:"text"`
		} `json:"data"`
	}
	if err := st.API.JSON(ctx, "GET", fmt.Sprintf("/api/chatapp-simulator/%d/messages", conn.ID), c.Token, nil, &res); err != nil {
		return nil, err
	}
	out := make([]HandedOver, len(res.Data))
	for i, m := range res.Data {
		out[i] = HandedOver{ProviderID: m.ExternalID, Text: m.Text}
	}
	return out, nil
}

// Subscription is a webhook subscription and the secret that signs its
// deliveries.
type Subscription struct {
	ID     int64
	Secret string
	URL    string
}

// Subscribe creates a subscription of company c to events at url.
func (st *Setup) Subscribe(ctx context.Context, c *Company, name, url string, events []string) (Subscription, error) {
	return st.subscribeWith(ctx, c.Token, name, url, events)
}

func (st *Setup) subscribeWith(ctx context.Context, token, name, url string, events []string) (Subscription, error) {
	var out struct {
		Data struct {
			ID int64 `json:"id"`
		} `json:"data"`
		Secret string `json:"secret"`
	}
	err := st.managed(ctx, "POST", "/api/channel-webhooks", token, map[string]any{"name": name, "url": url, "events": events}, &out)
	return Subscription{ID: out.Data.ID, Secret: out.Secret, URL: url}, err
}

// SubscribeMany creates one subscription of c per url (named prefix-i),
// several at a time over c's tokens.
func (st *Setup) SubscribeMany(ctx context.Context, c *Company, prefix string, urls []string, events []string) ([]Subscription, error) {
	out := make([]Subscription, len(urls))
	err := parallel(ctx, len(urls), 8, func(ctx context.Context, i int) error {
		var err error
		out[i], err = st.subscribeWith(ctx, c.token(i), fmt.Sprintf("%s-%d", prefix, i), urls[i], events)
		return err
	})
	return out, err
}

// Unsubscribe deletes subscriptions of c, several at a time over its
// tokens; a failure does not stop the others, and each is tried three
// times. It returns how many are left and the last error.
func (st *Setup) Unsubscribe(ctx context.Context, c *Company, subs []Subscription) (int, error) {
	var mu sync.Mutex
	left, last := 0, error(nil)
	_ = parallel(ctx, len(subs), 8, func(ctx context.Context, i int) error {
		var err error
		for range 3 {
			if err = st.managed(ctx, "DELETE", fmt.Sprintf("/api/channel-webhooks/%d", subs[i].ID), c.token(i), nil, nil); err == nil {
				return nil
			}
			time.Sleep(time.Second)
		}
		mu.Lock()
		left, last = left+1, err
		mu.Unlock()
		return nil
	})
	return left, last
}

// managed is a request to the webhook management endpoints, which limit
// requests per token: a 429 is waited out (its Retry-After) and retried,
// for at most two minutes.
func (st *Setup) managed(ctx context.Context, method, path, token string, in, out any) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := st.API.JSON(ctx, method, path, token, in, out)
		var limited *limitedError
		if !errors.As(err, &limited) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(limited.wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Budget spreads sends over companies so that none of them sends more
// than its share of the rate limit in any 60 seconds. Pick never blocks:
// when every company has used its budget it says so, and the caller
// counts the request as a client-side error (a run needing more
// companies), rather than waiting and hiding the stall.
type Budget struct {
	mu   sync.Mutex
	per  int
	next int
	sent [][]time.Time // per company, send times within the window
	now  func() time.Time
	win  time.Duration
}

// NewBudget allows each of n companies per sends in any window.
func NewBudget(n, per int, window time.Duration) *Budget {
	return &Budget{per: per, sent: make([][]time.Time, n), now: time.Now, win: window}
}

// Pick returns the index of a company that may send now, or -1.
func (b *Budget) Pick() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for range len(b.sent) {
		i := b.next
		b.next = (b.next + 1) % len(b.sent)
		log := b.sent[i]
		for len(log) > 0 && now.Sub(log[0]) >= b.win {
			log = log[1:]
		}
		if len(log) < b.per {
			b.sent[i] = append(log, now)
			return i
		}
		b.sent[i] = log
	}
	return -1
}
