package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// convWorld is the listing fixture: eight conversations of company A that
// differ in every filtered attribute, and one of company B that looks like
// A's first (same number, similar name, a tag of the same name).
type convWorld struct {
	h         *apitest.Harness
	a, b      apitest.Tenant
	ids       map[string]int64 // conversation name -> id
	names     map[int64]string
	official  int64 // channels of A
	chatapp   int64
	officialB int64
	userAna   int64
	sector    int64
	tags      map[string]int64 // "vip", "lead", "urgent", "billing", "deal", "vipB"
}

var (
	convBase = time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	convNow  = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

func insertConvChannel(t *testing.T, db *store.DB, companyID int64, typ channels.TypeID, key string) int64 {
	t.Helper()
	var id int64
	err := db.Bun.NewRaw(`INSERT INTO company_channels (company_id, key, name, channel_type_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, companyID, key, typ.Name()+" "+key, int(typ), convBase, convBase).
		Scan(context.Background(), &id)
	if err != nil {
		t.Fatalf("insert channel: %v", err)
	}
	return id
}

func newConvWorld(t *testing.T, db *store.DB) *convWorld {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewManual(convBase)
	h := apitest.Start(t, db, apitest.Options{Now: clk.Now})
	w := &convWorld{h: h, a: h.Tenant("Company A"), b: h.Tenant("Company B"), ids: map[string]int64{}, names: map[int64]string{}, tags: map[string]int64{}}
	svc := h.App.Conversations
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	reg := func(companyID int64, key, pn string) int64 {
		ch, err := h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: companyID, Name: "Official " + key, Key: key,
			BusinessAccountID: "waba-" + pn, PhoneNumberID: pn, AccessToken: "tok", AppSecret: "sec", BaseURL: "http://127.0.0.1:1"})
		must(err)
		return ch.ID
	}
	w.official = reg(w.a.CompanyID, "5511900000001", "pn-a")
	w.officialB = reg(w.b.CompanyID, "5511900000009", "pn-b")
	w.chatapp = insertConvChannel(t, db, w.a.CompanyID, channels.UnofficialChatapp, "5511900000002")
	social := insertConvChannel(t, db, w.a.CompanyID, channels.SocialMessenger, "page-1")
	// Same key as the official channel, another type: channel_key finds both.
	embedded := insertConvChannel(t, db, w.a.CompanyID, channels.EmbeddedChat, "5511900000001")

	type spec struct {
		company int64
		channel int64
		typ     channels.TypeID
		key     string
		name    string
		group   bool
		origin  int
	}
	specs := []spec{
		{w.a.CompanyID, w.official, 3, "5511977770001", "Ana Souza", false, 1},
		{w.a.CompanyID, w.official, 3, "5511977770002", "João Silva", false, 1},
		{w.a.CompanyID, w.chatapp, 2, "5511977770003", "JOSÉ ÁLVARES", false, 2},
		{w.a.CompanyID, w.chatapp, 2, "5511977770004-1600000000", "Maria", true, 1},
		{w.a.CompanyID, social, 5, "psid-5", "Spammer", false, 1},
		{w.a.CompanyID, embedded, 1, "visitor-6", "Carla", false, 4},
		{w.a.CompanyID, w.official, 3, "5511977770007", "Bruno", false, 3},
		{w.a.CompanyID, w.official, 3, "5511977770008", "Dora", false, 1},
		{w.b.CompanyID, w.officialB, 3, "5511977770001", "Ana Bê", false, 1},
	}
	contacts := map[string]int64{}
	for i, sp := range specs {
		clk.Advance(time.Duration(min(i, 1)) * time.Hour) // created one hour apart
		err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			ref, err := svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: sp.company, CompanyChannelID: sp.channel,
				ChannelTypeID: sp.typ, ContactKey: sp.key, ContactName: sp.name, IsGroup: sp.group, OriginID: sp.origin})
			w.ids[sp.name], w.names[ref.ID], contacts[sp.name] = ref.ID, sp.name, ref.ContactID
			return err
		})
		must(err)
	}
	st := func(s conversations.StatusID) *conversations.StatusID { return &s }
	// Bruno is banned on the first day: his updated_at stays there.
	_, err := svc.UpdateContactChannel(ctx, w.a.CompanyID, w.ids["Bruno"], conversations.Update{StatusID: st(conversations.StatusBanned)})
	must(err)

	clk.Advance(convNow.Sub(clk.Now()))
	record := func(name string, ago time.Duration, inbound bool) {
		must(db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			return svc.RecordMessage(ctx, tx, w.ids[name], convNow.Add(-ago), inbound)
		}))
	}
	record("Ana Souza", time.Hour, true)
	record("João Silva", 23*time.Hour+30*time.Minute, true)
	record("JOSÉ ÁLVARES", 2*time.Hour, false)
	record("Maria", 3*time.Hour, true)
	record("Spammer", 4*time.Hour, true)
	record("Carla", 5*time.Hour, true)
	record("Dora", 25*time.Hour, true)
	record("Ana Bê", time.Hour, true)

	var uerr error
	w.userAna, uerr = h.App.Auth.CreateUser(ctx, w.a.CompanyID, "Ana Lima", "ana.lima@a.test")
	must(uerr)
	sec, err := svc.CreateSector(ctx, w.a.CompanyID, "Suporte")
	must(err)
	w.sector = sec.ID
	yes := true
	update := func(name string, u conversations.Update) {
		_, err := svc.UpdateContactChannel(ctx, w.a.CompanyID, w.ids[name], u)
		must(err)
	}
	update("Ana Souza", conversations.Update{UserID: &w.userAna, SectorID: &w.sector, Pinned: &yes})
	update("João Silva", conversations.Update{Muted: &yes, MarkRead: true, StatusID: st(conversations.StatusPending)})
	update("JOSÉ ÁLVARES", conversations.Update{Opened: &yes, StatusID: st(conversations.StatusInProgress)})
	update("Maria", conversations.Update{StatusID: st(conversations.StatusResolved)})
	update("Spammer", conversations.Update{StatusID: st(conversations.StatusSpam)})
	update("Carla", conversations.Update{StatusID: st(conversations.StatusCancelled)})
	email := "ana@example.com"
	_, err = svc.UpdateContact(ctx, w.a.CompanyID, contacts["Ana Souza"], "Ana Souza", &email)
	must(err)

	tag := func(company int64, kind conversations.TagKind, name, key string) int64 {
		tg, err := svc.CreateTag(ctx, company, kind, name)
		must(err)
		w.tags[key] = tg.ID
		return tg.ID
	}
	vip := tag(w.a.CompanyID, conversations.ContactTag, "VIP", "vip")
	lead := tag(w.a.CompanyID, conversations.ContactTag, "Lead", "lead")
	urgent := tag(w.a.CompanyID, conversations.TicketTag, "Urgent", "urgent")
	billing := tag(w.a.CompanyID, conversations.TicketTag, "Billing", "billing")
	deal := tag(w.a.CompanyID, conversations.BusinessTag, "Hot deal", "deal")
	vipB := tag(w.b.CompanyID, conversations.ContactTag, "VIP", "vipB")
	must(svc.TagContact(ctx, w.a.CompanyID, contacts["Ana Souza"], vip))
	must(svc.TagConversation(ctx, w.a.CompanyID, w.ids["Ana Souza"], urgent))
	must(svc.TagContact(ctx, w.a.CompanyID, contacts["Dora"], vip, lead))
	must(svc.TagConversation(ctx, w.a.CompanyID, w.ids["Dora"], urgent, billing))
	biz, err := svc.CreateBusiness(ctx, w.a.CompanyID, contacts["Carla"], nil, "Renewal")
	must(err)
	must(svc.TagBusiness(ctx, w.a.CompanyID, biz.ID, deal))
	must(svc.TagContact(ctx, w.b.CompanyID, contacts["Ana Bê"], vipB))
	return w
}

// q builds a listing query; JSON values (arrays, objects) are encoded as
// the document's `content: application/json` parameters.
func convQuery(kv ...any) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		switch x := kv[i+1].(type) {
		case string:
			v.Set(k, x)
		case int, int64, bool:
			v.Set(k, fmt.Sprint(x))
		default:
			b, _ := json.Marshal(x)
			v.Set(k, string(b))
		}
	}
	return "/api/contact-channels?" + v.Encode()
}

type convPage struct {
	CurrentPage int `json:"current_page"`
	PerPage     int `json:"per_page"`
	Total       int `json:"total"`
	LastPage    int `json:"last_page"`
	// TotalIsCapped is the extension: present on every answer.
	TotalIsCapped *bool            `json:"total_is_capped"`
	Data          []map[string]any `json:"data"`
}

func (w *convWorld) list(t *testing.T, token, path string) convPage {
	t.Helper()
	resp := w.h.Do(apitest.Request{Method: "GET", Path: path, Token: token})
	if resp.Status != 200 {
		t.Fatalf("%s: %d %s", path, resp.Status, resp.Body)
	}
	var p convPage
	resp.JSON(t, &p)
	return p
}

func (p convPage) names() []string {
	out := make([]string, len(p.Data))
	for i, d := range p.Data {
		out[i], _ = d["name"].(string)
	}
	return out
}

func sorted(xs []string) []string { s := slices.Clone(xs); slices.Sort(s); return s }

var defaultSet = []string{"Ana Souza", "Dora", "JOSÉ ÁLVARES", "João Silva"}

// TestListContactChannelsFilters runs every parameter of the listing, alone
// and combined, on both databases.
func TestListContactChannelsFilters(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newConvWorld(t, db)
		tags := w.tags
		all := []string{"Ana Souza", "Bruno", "Carla", "Dora", "JOSÉ ÁLVARES", "João Silva", "Maria", "Spammer"}
		cases := []struct {
			name  string
			query string
			want  []string // compared as a set
		}{
			// statuses
			{"default excludes resolved, cancelled, spam and banned", convQuery(), defaultSet},
			{"show_all_statuses", convQuery("show_all_statuses", true), all},
			{"show_all_statuses=false is the default", convQuery("show_all_statuses", false), defaultSet},
			{"include_closed adds resolved and cancelled", convQuery("include_closed", true), []string{"Ana Souza", "Carla", "Dora", "JOSÉ ÁLVARES", "João Silva", "Maria"}},
			{"status_id", convQuery("status_id", 4), []string{"Maria"}},
			{"status_ids", convQuery("status_ids", []int{4, 5}), []string{"Carla", "Maria"}},
			{"status_id and status_ids are a union", convQuery("status_id", 1, "status_ids", []int{7}), []string{"Ana Souza", "Bruno", "Dora"}},
			{"explicit status wins over include_closed", convQuery("status_id", 6, "include_closed", true), []string{"Spammer"}},
			{"explicit status wins over show_all_statuses", convQuery("status_ids", []int{2}, "show_all_statuses", true), []string{"João Silva"}},
			// text
			{"filter by name", convQuery("filter", "ana"), []string{"Ana Souza"}},
			{"filter is case-insensitive", convQuery("filter", "SOUZA"), []string{"Ana Souza"}},
			{"filter ignores accents (query without)", convQuery("filter", "joao"), []string{"João Silva"}},
			{"filter ignores case of accented letters", convQuery("filter", "álvares"), []string{"JOSÉ ÁLVARES"}},
			{"filter with accents finds upper case", convQuery("filter", "josé"), []string{"JOSÉ ÁLVARES"}},
			{"filter by contact email", convQuery("filter", "ana@EXAMPLE"), []string{"Ana Souza"}},
			{"filter by key", convQuery("filter", "77770002"), []string{"João Silva"}},
			{"filter wildcards are literal", convQuery("filter", "%"), nil},
			{"filter underscore is literal", convQuery("filter", "a_a"), nil},
			{"filter with show_all", convQuery("filter", "ar", "show_all_statuses", true), []string{"Carla", "JOSÉ ÁLVARES", "Maria"}},
			// tags
			{"contactTags (AND default)", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vip"]}}), []string{"Ana Souza", "Dora"}},
			{"AND: one of each kind given", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vip"]}, "ticketTags": {tags["billing"]}}), []string{"Dora"}},
			{"AND: any of a kind's ids", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["lead"], tags["vip"]}}, "tags_operation", "AND"), []string{"Ana Souza", "Dora"}},
			{"XAND: every contact tag", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vip"], tags["lead"]}}, "tags_operation", "XAND"), []string{"Dora"}},
			{"XAND: every tag across kinds", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vip"]}, "ticketTags": {tags["urgent"], tags["billing"]}}, "tags_operation", "XAND"), []string{"Dora"}},
			{"XAND: one tag of each of two kinds", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vip"]}, "ticketTags": {tags["urgent"]}}, "tags_operation", "XAND"), []string{"Ana Souza", "Dora"}},
			{"XOR: any tag of any kind", convQuery("tags_ids", map[string][]int64{"ticketTags": {tags["billing"]}, "crmBusinessTags": {tags["deal"]}}, "tags_operation", "XOR", "show_all_statuses", true), []string{"Carla", "Dora"}},
			{"crmBusinessTags", convQuery("tags_ids", map[string][]int64{"crmBusinessTags": {tags["deal"]}}, "include_closed", true), []string{"Carla"}},
			{"a wrong-kind id matches nothing", convQuery("tags_ids", map[string][]int64{"ticketTags": {tags["vip"]}}), nil},
			{"another company's tag matches nothing", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vipB"]}}, "tags_operation", "XOR"), nil},
			{"empty kinds do not filter", convQuery("tags_ids", map[string][]int64{"contactTags": {}}, "tags_operation", "XAND"), defaultSet},
			// sector
			{"sector_id", convQuery("sector_id", w.sector), []string{"Ana Souza"}},
			{"without_sector", convQuery("without_sector", true), []string{"Dora", "JOSÉ ÁLVARES", "João Silva"}},
			{"without_sector=false does not filter", convQuery("without_sector", false), defaultSet},
			{"sector_id with without_sector", convQuery("sector_id", w.sector, "without_sector", true), nil},
			// channels
			{"channel_type_id", convQuery("channel_type_id", 3), []string{"Ana Souza", "Dora", "João Silva"}},
			{"channelable_type", convQuery("channelable_type", "chatapp", "show_all_statuses", true), []string{"JOSÉ ÁLVARES", "Maria"}},
			{"channel_type_id and channelable_type disagree", convQuery("channel_type_id", 3, "channelable_type", "chatapp"), nil},
			{"channel_key finds every channel with the key", convQuery("channel_key", "5511900000001", "show_all_statuses", true), []string{"Ana Souza", "Bruno", "Carla", "Dora", "João Silva"}},
			{"unknown channel_key", convQuery("channel_key", "000"), nil},
			{"another company's channel_key", convQuery("channel_key", "5511900000009"), nil},
			{"company_channel_id", convQuery("company_channel_id", w.chatapp), []string{"JOSÉ ÁLVARES"}},
			{"another company's company_channel_id", convQuery("company_channel_id", w.officialB), nil},
			// official window: Ana 1380 min left, João 30, Dora expired (0), Bruno never opened (0)
			{"window min", convQuery("channel_type_id", 3, "ofc_window_min_minutes", 60), []string{"Ana Souza"}},
			{"window max counts closed as 0", convQuery("channel_type_id", 3, "ofc_window_max_minutes", 60), []string{"Dora", "João Silva"}},
			{"window max includes never opened", convQuery("ofc_window_max_minutes", 0, "show_all_statuses", true), []string{"Bruno", "Dora"}},
			{"window range", convQuery("channel_type_id", 3, "ofc_window_min_minutes", 10, "ofc_window_max_minutes", 100), []string{"João Silva"}},
			{"window bounds are inclusive", convQuery("ofc_window_min_minutes", 30, "ofc_window_max_minutes", 30), []string{"João Silva"}},
			{"window min 0 keeps every official", convQuery("ofc_window_min_minutes", 0), []string{"Ana Souza", "Dora", "João Silva"}},
			{"window alone restricts to official", convQuery("ofc_window_max_minutes", 1440), []string{"Ana Souza", "Dora", "João Silva"}},
			{"window with another channel type", convQuery("channel_type_id", 2, "ofc_window_max_minutes", 60), nil},
			// attendants
			{"user_id", convQuery("user_id", w.userAna), []string{"Ana Souza"}},
			{"without_user", convQuery("without_user", true), []string{"Dora", "JOSÉ ÁLVARES", "João Silva"}},
			{"user_id with without_user", convQuery("user_id", w.userAna, "without_user", true), nil},
			{"never_responded_attendant", convQuery("never_responded_attendant", true), []string{"Ana Souza", "Dora", "João Silva"}},
			{"never_responded_attendant=false does not filter", convQuery("never_responded_attendant", false), defaultSet},
			// origin
			{"contact_channel_origin_id", convQuery("contact_channel_origin_id", 2), []string{"JOSÉ ÁLVARES"}},
			{"contact_channel_origin_id with show_all", convQuery("contact_channel_origin_id", 4, "show_all_statuses", true), []string{"Carla"}},
			// date ranges (created one hour apart from 2026-11-20 08:00 UTC)
			{"created_at whole day", convQuery("created_at", []string{"2026-11-20", "2026-11-20"}), defaultSet},
			{"created_at date-times", convQuery("created_at", []string{"2026-11-20 09:30", "2026-11-20 11:30"}, "show_all_statuses", true), []string{"JOSÉ ÁLVARES", "Maria"}},
			{"created_at with offsets", convQuery("created_at", []string{"2026-11-20T06:30:00-03:00", "2026-11-20T07:30:00-03:00"}), []string{"JOSÉ ÁLVARES"}},
			{"created_at bounds are inclusive", convQuery("created_at", []string{"2026-11-20T08:00:00Z", "2026-11-20T09:00:00Z"}), []string{"Ana Souza", "João Silva"}},
			{"created_at outside", convQuery("created_at", []string{"2026-11-21", "2026-11-22"}), nil},
			{"updated_at today", convQuery("updated_at", []string{"2026-11-22", "2026-11-22"}, "show_all_statuses", true), []string{"Ana Souza", "Carla", "Dora", "JOSÉ ÁLVARES", "João Silva", "Maria", "Spammer"}},
			{"updated_at first day", convQuery("updated_at", []string{"2026-11-20", "2026-11-20"}, "show_all_statuses", true), []string{"Bruno"}},
			{"last_message_at today", convQuery("last_message_at", []string{"2026-11-22", "2026-11-22"}), []string{"Ana Souza", "JOSÉ ÁLVARES"}},
			{"last_message_at yesterday", convQuery("last_message_at", []string{"2026-11-21", "2026-11-21"}), []string{"Dora", "João Silva"}},
			// flags
			{"is_group=true", convQuery("is_group", true, "include_closed", true), []string{"Maria"}},
			{"is_group=false", convQuery("is_group", false), defaultSet},
			{"muted=true", convQuery("muted", true), []string{"João Silva"}},
			{"muted=false", convQuery("muted", false), []string{"Ana Souza", "Dora", "JOSÉ ÁLVARES"}},
			{"pinned=true", convQuery("pinned", true), []string{"Ana Souza"}},
			{"pinned=false", convQuery("pinned", false), []string{"Dora", "JOSÉ ÁLVARES", "João Silva"}},
			{"opened=true", convQuery("opened", true), []string{"JOSÉ ÁLVARES"}},
			{"opened=false", convQuery("opened", false), []string{"Ana Souza", "Dora", "João Silva"}},
			{"only_unread", convQuery("only_unread", true), []string{"Ana Souza", "Dora"}},
			{"only_unread=false does not filter", convQuery("only_unread", false), defaultSet},
			// combinations
			{"type + text + unread", convQuery("channel_type_id", 3, "filter", "a", "only_unread", true), []string{"Ana Souza", "Dora"}},
			{"type + text + unread + pinned", convQuery("channel_type_id", 3, "filter", "a", "only_unread", true, "pinned", true), []string{"Ana Souza"}},
			{"type + text + unread + muted", convQuery("channel_type_id", 3, "filter", "a", "only_unread", true, "muted", true), nil},
			{"user + sector + pinned", convQuery("user_id", w.userAna, "sector_id", w.sector, "pinned", true), []string{"Ana Souza"}},
			{"tag + window", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["vip"]}}, "ofc_window_max_minutes", 60), []string{"Dora"}},
			{"tags XOR + unread + created range", convQuery("tags_ids", map[string][]int64{"contactTags": {tags["lead"]}, "ticketTags": {tags["urgent"]}}, "tags_operation", "XOR",
				"only_unread", true, "created_at", []string{"2026-11-20 07:00", "2026-11-20 12:00"}), []string{"Ana Souza"}},
			{"without_user + never responded + last message", convQuery("without_user", true, "never_responded_attendant", true, "last_message_at", []string{"2026-11-21", "2026-11-21"}), []string{"Dora", "João Silva"}},
			{"status + channel + origin", convQuery("status_ids", []int{1, 4, 7}, "company_channel_id", w.official, "contact_channel_origin_id", 3), []string{"Bruno"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := w.list(t, w.a.Token, tc.query)
				if got := sorted(p.names()); !slices.Equal(got, sorted(tc.want)) {
					t.Fatalf("%s\n got %q\nwant %q", tc.query, got, sorted(tc.want))
				}
				if p.Total != len(tc.want) {
					t.Fatalf("total %d, want %d", p.Total, len(tc.want))
				}
			})
		}
	})
}

func TestListContactChannelsOrderAndPages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newConvWorld(t, db)
		cases := []struct {
			name  string
			query string
			want  []string // in order
		}{
			{"default: id desc", convQuery(), []string{"Dora", "JOSÉ ÁLVARES", "João Silva", "Ana Souza"}},
			{"orderMode asc", convQuery("orderMode", "asc"), []string{"Ana Souza", "João Silva", "JOSÉ ÁLVARES", "Dora"}},
			{"orderBy key ASC", convQuery("orderBy", "key", "orderMode", "ASC"), []string{"Ana Souza", "João Silva", "JOSÉ ÁLVARES", "Dora"}},
			{"orderBy name", convQuery("orderBy", "name", "orderMode", "asc", "channel_type_id", 3), []string{"Ana Souza", "Dora", "João Silva"}},
			{"orderBy last_message_at desc: never written last", convQuery("orderBy", "last_message_at", "show_all_statuses", true),
				[]string{"Ana Souza", "JOSÉ ÁLVARES", "Maria", "Spammer", "Carla", "João Silva", "Dora", "Bruno"}},
			{"orderBy last_message_at asc: never written first", convQuery("orderBy", "last_message_at", "orderMode", "ASC", "show_all_statuses", true),
				[]string{"Bruno", "Dora", "João Silva", "Carla", "Spammer", "Maria", "JOSÉ ÁLVARES", "Ana Souza"}},
			{"orderBy unread_count, ties by id", convQuery("orderBy", "unread_count"), []string{"Dora", "Ana Souza", "JOSÉ ÁLVARES", "João Silva"}},
			{"orderBy status_id asc", convQuery("orderBy", "status_id", "orderMode", "asc", "show_all_statuses", true),
				[]string{"Ana Souza", "Dora", "João Silva", "JOSÉ ÁLVARES", "Maria", "Carla", "Spammer", "Bruno"}},
			{"orderBy created_at asc", convQuery("orderBy", "created_at", "orderMode", "asc"), []string{"Ana Souza", "João Silva", "JOSÉ ÁLVARES", "Dora"}},
			{"orderBy updated_at desc", convQuery("orderBy", "updated_at", "show_all_statuses", true, "channel_type_id", 3), []string{"Dora", "João Silva", "Ana Souza", "Bruno"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if got := w.list(t, w.a.Token, tc.query).names(); !slices.Equal(got, tc.want) {
					t.Errorf("%s\n got %q\nwant %q", tc.query, got, tc.want)
				}
			})
		}

		p := w.list(t, w.a.Token, convQuery())
		if p.PerPage != 20 || p.CurrentPage != 1 || p.Total != 4 || p.LastPage != 1 || p.TotalIsCapped == nil || *p.TotalIsCapped {
			t.Errorf("default page meta %+v", p)
		}
		p = w.list(t, w.a.Token, convQuery("perPage", 3))
		if len(p.Data) != 3 || p.Total != 4 || p.LastPage != 2 || p.PerPage != 3 {
			t.Errorf("perPage=3: %d rows, %+v", len(p.Data), p)
		}
		p = w.list(t, w.a.Token, convQuery("perPage", 3, "page", 2))
		if !slices.Equal(p.names(), []string{"Ana Souza"}) || p.CurrentPage != 2 {
			t.Errorf("page 2: %q", p.names())
		}
		p = w.list(t, w.a.Token, convQuery("perPage", 3, "page", 5))
		if len(p.Data) != 0 || p.Total != 4 {
			t.Errorf("page past the end: %+v", p)
		}
	})
}

// TestListContactChannelsTotalIsCapped: past conversations.CountCap
// matches, a filtered list says its total is capped and keeps last_page
// at or after the page asked for; a list by statuses only stays exact.
func TestListContactChannelsTotalIsCapped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newConvWorld(t, db)
		ctx := context.Background()
		ch := insertConvChannel(t, db, w.a.CompanyID, channels.SocialMessenger, "page-many")
		var contactID int64
		if err := db.Bun.NewRaw(`INSERT INTO contacts (company_id, identity, name, created_at, updated_at) VALUES (?, 'key:many', 'Many', ?, ?) RETURNING id`,
			w.a.CompanyID, convBase, convBase).Scan(ctx, &contactID); err != nil {
			t.Fatal(err)
		}
		const seeded = conversations.CountCap + 30
		if _, err := db.Bun.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
			INSERT INTO contact_channels (company_id, contact_id, company_channel_id, channel_type_id, key, name, status_id, origin_id, created_at, updated_at)
			SELECT ?, ?, ?, ?, 'many-' || i, 'Many ' || i, 1, 1, ?, ? FROM g`,
			seeded, w.a.CompanyID, contactID, ch, int(channels.SocialMessenger), convBase, convBase); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name            string
			query           string
			total, lastPage int
			capped          bool
			rows            int
		}{
			{"statuses only: exact", convQuery(), seeded + 4, 52, false, 20},
			{"filtered: capped", convQuery("channel_type_id", 5), conversations.CountCap, 50, true, 20},
			{"filtered: the page after last_page counts further", convQuery("channel_type_id", 5, "page", 51), 1020, 51, true, 20},
			{"filtered: exact once the end is counted", convQuery("channel_type_id", 5, "page", 52), seeded, 52, false, 10},
			{"filtered: few matches, exact", convQuery("filter", "souza"), 1, 1, false, 1},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := w.list(t, w.a.Token, tc.query)
				if p.Total != tc.total || p.LastPage != tc.lastPage || p.TotalIsCapped == nil || *p.TotalIsCapped != tc.capped || len(p.Data) != tc.rows {
					t.Fatalf("%s: total %d last_page %d capped %v rows %d; want %d %d %v %d",
						tc.query, p.Total, p.LastPage, p.TotalIsCapped, len(p.Data), tc.total, tc.lastPage, tc.capped, tc.rows)
				}
			})
		}
	})
}

func TestListContactChannelsRelations(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newConvWorld(t, db)
		relKeys := []string{"contact", "tags", "sector", "user", "provider_opened_window"}
		present := func(d map[string]any) []string {
			var out []string
			for _, k := range relKeys {
				if _, ok := d[k]; ok {
					out = append(out, k)
				}
			}
			return out
		}
		// Without `with` only the conversation; with each relation only it.
		p := w.list(t, w.a.Token, convQuery("show_all_statuses", true))
		for _, d := range p.Data {
			if got := present(d); len(got) != 0 {
				t.Fatalf("relations without with: %v", got)
			}
			if d["created_at"] == nil || d["channel_type"] == nil || d["status_id"] == nil {
				t.Fatalf("conversation fields: %v", d)
			}
		}
		rels := map[string]string{"contact": "contact", "tags": "tags", "sector": "sector", "user": "user", "providerOpenedWindow": "provider_opened_window"}
		for rel, key := range rels {
			p := w.list(t, w.a.Token, convQuery("with", []string{rel}, "show_all_statuses", true))
			for _, d := range p.Data {
				if got := present(d); !slices.Equal(got, []string{key}) {
					t.Fatalf("with [%s]: present %v", rel, got)
				}
			}
		}

		all := []string{"contact", "tags", "sector", "user", "providerOpenedWindow"}
		byName := map[string]map[string]any{}
		for _, d := range w.list(t, w.a.Token, convQuery("with", all, "show_all_statuses", true)).Data {
			byName[d["name"].(string)] = d
		}
		j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
		checks := []struct {
			name, key, want string
		}{
			{"Ana Souza", "contact", `{"email":"ana@example.com","id":%d,"name":"Ana Souza","phone":"5511977770001"}`},
			{"Ana Souza", "tags", fmt.Sprintf(`[{"id":%d,"kind":"contact","name":"VIP"},{"id":%d,"kind":"ticket","name":"Urgent"}]`, w.tags["vip"], w.tags["urgent"])},
			{"Ana Souza", "sector", fmt.Sprintf(`{"id":%d,"name":"Suporte"}`, w.sector)},
			{"Ana Souza", "user", fmt.Sprintf(`{"email":"ana.lima@a.test","id":%d,"name":"Ana Lima"}`, w.userAna)},
			{"Ana Souza", "provider_opened_window", `{"expires_at":"2026-11-23T11:00:00+00:00","open":true,"remaining_minutes":1380}`},
			{"João Silva", "provider_opened_window", `{"expires_at":"2026-11-22T12:30:00+00:00","open":true,"remaining_minutes":30}`},
			{"Dora", "provider_opened_window", `{"expires_at":"2026-11-22T11:00:00+00:00","open":false,"remaining_minutes":0}`},
			{"Bruno", "provider_opened_window", `{"expires_at":null,"open":false,"remaining_minutes":0}`},
			{"JOSÉ ÁLVARES", "provider_opened_window", `null`},
			{"JOSÉ ÁLVARES", "sector", `null`},
			{"JOSÉ ÁLVARES", "user", `null`},
			{"JOSÉ ÁLVARES", "tags", `[]`},
			{"Carla", "tags", fmt.Sprintf(`[{"id":%d,"kind":"crm_business","name":"Hot deal"}]`, w.tags["deal"])},
			{"Maria", "contact", `{"email":null,"id":%d,"name":"Maria","phone":null}`},
		}
		for _, c := range checks {
			d := byName[c.name]
			want := c.want
			if c.key == "contact" {
				want = fmt.Sprintf(want, int64(d["contact"].(map[string]any)["id"].(float64)))
			}
			if got := j(d[c.key]); got != want {
				t.Errorf("%s %s: %s, want %s", c.name, c.key, got, want)
			}
		}
		ana := byName["Ana Souza"]
		if ana["last_message_at"] != "2026-11-22T11:00:00+00:00" || ana["created_at"] != "2026-11-20T08:00:00+00:00" || ana["channel_type"] != "Official chat app" ||
			ana["platform"] != "ofc_chatapp" ||
			ana["phone"] != "5511977770001" || ana["unread_count"].(float64) != 1 || ana["pinned"] != true {
			t.Errorf("Ana's record: %v", ana)
		}
		// Never written: last_message_at is the creation time (never null,
		// as in the events); a group has no phone (null, as in the events).
		if bruno := byName["Bruno"]; bruno["last_message_at"] != bruno["created_at"] || bruno["last_message_at"] == nil ||
			byName["Maria"]["phone"] != nil || byName["Maria"]["is_group"] != true {
			t.Errorf("absent values: Bruno %v/%v, Maria %v", byName["Bruno"]["last_message_at"], byName["Bruno"]["created_at"], byName["Maria"]["phone"])
		}
	})
}

func TestListContactChannelsIsolationAndValidation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newConvWorld(t, db)
		p := w.list(t, w.b.Token, convQuery("show_all_statuses", true, "with", []string{"contact", "tags"}))
		if !slices.Equal(p.names(), []string{"Ana Bê"}) || p.Total != 1 {
			t.Fatalf("company B sees %q", p.names())
		}
		if tags, _ := json.Marshal(p.Data[0]["tags"]); string(tags) != fmt.Sprintf(`[{"id":%d,"kind":"contact","name":"VIP"}]`, w.tags["vipB"]) {
			t.Fatalf("company B's tags: %s", tags)
		}
		for _, q := range []string{
			convQuery("tags_ids", map[string][]int64{"contactTags": {w.tags["vip"]}}),
			convQuery("company_channel_id", w.official),
			convQuery("filter", "souza"),
			convQuery("user_id", w.userAna),
			convQuery("sector_id", w.sector),
		} {
			if p := w.list(t, w.b.Token, q); p.Total != 0 {
				t.Errorf("company B with A's ids %s: %q", q, p.names())
			}
		}

		cases := []struct {
			name, query, field, message string
		}{
			{"orderBy unknown column", convQuery("orderBy", "password"), "orderBy", "OrderBy must be one of id, name, key, last_message_at, created_at, updated_at, unread_count, status_id"},
			{"orderMode sideways", convQuery("orderMode", "sideways"), "orderMode", "OrderMode must be ASC or DESC"},
			{"with an unknown relation", convQuery("with", []string{"contact", "messages"}), "with", "With must be a JSON array of contact, tags, sector, user, providerOpenedWindow"},
			{"with not a JSON array", "/api/contact-channels?with=contact", "with", "With must be a JSON array of contact, tags, sector, user, providerOpenedWindow"},
			{"tags_ids an array", convQuery("tags_ids", []int{1}), "tags_ids", ""},
			{"tags_ids of names", convQuery("tags_ids", map[string][]string{"contactTags": {"vip"}}), "tags_ids", ""},
			{"tags_ids over 50", convQuery("tags_ids", map[string][]int{"ticketTags": make([]int, 51)}), "tags_ids", "Tags ids must be a JSON object with contactTags, ticketTags and crmBusinessTags arrays of at most 50 integers"},
			{"tags_operation NAND", convQuery("tags_operation", "NAND"), "tags_operation", "Tags operation must be XAND, XOR or AND"},
			{"status_id out of range", convQuery("status_id", 9), "status_id", "Status id must be an integer from 1 to 7"},
			{"status_ids with one out of range", convQuery("status_ids", []int{1, 8}), "status_ids", ""},
			{"channel_type_id out of range", convQuery("channel_type_id", 7), "channel_type_id", "Channel type id must be an integer from 1 to 6"},
			{"channelable_type unknown", convQuery("channelable_type", "fax"), "channelable_type", ""},
			{"perPage over 500", convQuery("perPage", 501), "perPage", "Per page must be an integer from 1 to 500"},
			{"page 0", convQuery("page", 0), "page", ""},
			{"window minutes over a day", convQuery("ofc_window_min_minutes", 2000), "ofc_window_min_minutes", ""},
			{"is_group not a boolean", convQuery("is_group", "maybe"), "is_group", "Is group must be true or false"},
			{"created_at one date", convQuery("created_at", []string{"2026-11-20"}), "created_at", ""},
			{"created_at impossible date", convQuery("created_at", []string{"2026-02-30", "2026-03-01"}), "created_at", "Created at must be a JSON array [start, end] of dates"},
			{"last_message_at bad hour", convQuery("last_message_at", []string{"2026-11-20 25:00", "2026-11-21"}), "last_message_at", "Last message at must be a JSON array [start, end] of dates"},
			{"filter over 255 characters", convQuery("filter", strings.Repeat("x", 256)), "filter", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := w.h.Do(apitest.Request{Method: "GET", Path: tc.query, Token: w.a.Token})
				if resp.Status != 422 {
					t.Errorf("%d %s", resp.Status, resp.Body)
					return
				}
				var body validationAnswer
				resp.JSON(t, &body)
				if len(body.Errors[tc.field]) == 0 || (tc.message != "" && body.Message != tc.message) {
					t.Errorf("%s", resp.Body)
				}
			})
		}
		if resp := w.h.Do(apitest.Request{Method: "GET", Path: convQuery()}); resp.Status != 401 {
			t.Errorf("no token: %d", resp.Status)
		}
	})
}

// TestListContactChannelsTimeZone: with a service time zone, answers carry
// its offset and a date range's bare dates are days of that zone.
func TestListContactChannelsTimeZone(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		sp, err := time.LoadLocation("America/Sao_Paulo")
		if err != nil {
			t.Skip("no tz data")
		}
		// 2026-11-21 02:00 UTC is still 2026-11-20 (23:00) in São Paulo.
		clk := clock.NewManual(time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC))
		h := apitest.Start(t, db, apitest.Options{Now: clk.Now, Configure: func(c *config.Config) { c.TimeZone = sp }})
		ten := h.Tenant("Acme")
		ch := insertConvChannel(t, db, ten.CompanyID, channels.UnofficialChatapp, "5511900000002")
		convEnsure(t, h, conversations.EnsureInput{CompanyID: ten.CompanyID, CompanyChannelID: ch, ChannelTypeID: channels.UnofficialChatapp,
			ContactKey: "5511977770001", ContactName: "Late", OriginID: 1})
		w := &convWorld{h: h}
		p := w.list(t, ten.Token, convQuery("created_at", []string{"2026-11-20", "2026-11-20"}))
		if !slices.Equal(p.names(), []string{"Late"}) || p.Data[0]["created_at"] != "2026-11-20T23:00:00-03:00" {
			t.Fatalf("local day: %v", p.Data)
		}
		if p := w.list(t, ten.Token, convQuery("created_at", []string{"2026-11-21", "2026-11-21"})); p.Total != 0 {
			t.Fatalf("next local day: %q", p.names())
		}
		if p := w.list(t, ten.Token, convQuery("created_at", []string{"2026-11-21T01:59:59Z", "2026-11-21T02:00:00Z"})); p.Total != 1 {
			t.Fatalf("explicit UTC bounds: %q", p.names())
		}
	})
}
