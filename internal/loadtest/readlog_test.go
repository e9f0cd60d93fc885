package loadtest

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

func TestReadLogTally(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type read struct {
		key, id       string
		at, stored    time.Time
		rejectInstead bool
	}
	due := map[string]time.Time{"a": ms(0), "b": ms(10), "c": ms(20)}
	tests := []struct {
		name     string
		reads    []read
		accepted []string
		want     readTally
	}{
		{"nothing read: all missing", nil, []string{"a", "b"},
			readTally{Expected: 2, Missing: 2, FirstDue: ms(0)}},
		{"latency from due to the first read; the broker's stored time when given",
			[]read{{key: "d1", id: "a", at: ms(30), stored: ms(5)}, {key: "d2", id: "b", at: ms(50)}}, []string{"a", "b"},
			readTally{Expected: 2, Read: 2, ToRead: []time.Duration{30 * time.Millisecond, 40 * time.Millisecond},
				ToStored: []time.Duration{5 * time.Millisecond}, FirstDue: ms(0), LastRead: ms(50)}},
		{"the same key again is a duplicate; its later read does not move the latency",
			[]read{{key: "d1", id: "a", at: ms(30)}, {key: "d1", id: "a", at: ms(90)}, {key: "d1", id: "a", at: ms(95)}},
			[]string{"a", "b"},
			readTally{Expected: 2, Read: 1, Missing: 1, Duplicates: 2, ToRead: []time.Duration{30 * time.Millisecond},
				FirstDue: ms(0), LastRead: ms(30)}},
		{"an event under two keys is read once and no duplicate by key",
			[]read{{key: "d1", id: "a", at: ms(30)}, {key: "d9", id: "a", at: ms(40)}}, []string{"a"},
			readTally{Expected: 1, Read: 1, ToRead: []time.Duration{30 * time.Millisecond}, FirstDue: ms(0), LastRead: ms(30)}},
		{"reads of events not accepted here (an earlier phase) count for nothing but rejections",
			[]read{{key: "x", id: "old", at: ms(1)}, {key: "x", id: "old", at: ms(2)}, {rejectInstead: true},
				{key: "d3", id: "c", at: ms(45)}},
			[]string{"c"},
			readTally{Expected: 1, Read: 1, Rejected: 1, RejectReason: "bad signature", ToRead: []time.Duration{25 * time.Millisecond},
				FirstDue: ms(20), LastRead: ms(45)}},
		{"an accepted event without a due time is counted but not timed",
			[]read{{key: "k", id: "z", at: ms(7)}}, []string{"z"},
			readTally{Expected: 1, Read: 1, LastRead: ms(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newReadLog()
			for _, r := range tt.reads {
				if r.rejectInstead {
					l.reject(errors.New("bad signature"))
					continue
				}
				l.add(r.key, r.id, r.at, r.stored)
			}
			got := l.tally(tt.accepted, due)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tally\n got %+v\nwant %+v", got, tt.want)
			}
			if m := l.missing(tt.accepted); m != tt.want.Missing {
				t.Errorf("missing %d, want %d", m, tt.want.Missing)
			}
		})
	}
}

func TestReadTallyPerSecond(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   readTally
		want float64
	}{
		{"1,000 read over 2 s", readTally{Read: 1000, FirstDue: t0, LastRead: t0.Add(2 * time.Second)}, 500},
		{"nothing read", readTally{FirstDue: t0}, 0},
		{"no span", readTally{Read: 3, FirstDue: t0, LastRead: t0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.perSecond(); got != tt.want {
				t.Errorf("perSecond = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBrokerEvent: a message is verified, then decoded by the subscriber
// library to its delivery id and import id; anything else is refused.
func TestBrokerEvent(t *testing.T) {
	const secret = "whsec_load"
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"event":"contact.import.completed","delivery_id":"dlv_1","company_id":1,"occurred_at":"2026-11-28T07:00:00Z",` +
		`"description":"d","data":{"import_id":"load-1","total_contacts":3,"imported_contacts":2,"skipped_contacts":1,` +
		`"failed_contacts":0,"started_by_user_id":1,"completed_at":"2026-11-28T07:00:00Z"}}`)
	signed := func(b []byte, mutate func(http.Header)) http.Header {
		h := http.Header{}
		h.Set(subscriber.HeaderEvent, "contact.import.completed")
		h.Set(subscriber.HeaderDelivery, "dlv_1")
		h.Set(subscriber.HeaderTimestamp, ts)
		h.Set(subscriber.HeaderSignature, subscriber.Sign(secret, ts, b))
		h.Set("Nats-Msg-Id", "dlv_1")
		if mutate != nil {
			mutate(h)
		}
		return h
	}
	noImport := []byte(`{"event":"crm.business.won","delivery_id":"dlv_2","company_id":1,"occurred_at":"2026-11-28T07:00:00Z","description":"d","data":{}}`)
	tests := []struct {
		name         string
		header       http.Header
		body         []byte
		secret       string
		wantDelivery string
		wantImport   string
		wantErr      error
	}{
		{"signed as the gateway signs", signed(body, nil), body, secret, "dlv_1", "load-1", nil},
		{"wrong secret", signed(body, nil), body, "whsec_other", "", "", subscriber.ErrSignatureMismatch},
		{"body altered after signing", signed(body, nil), append([]byte(" "), body...), secret, "", "", subscriber.ErrSignatureMismatch},
		{"message id is not the delivery id", signed(body, func(h http.Header) { h.Set("Nats-Msg-Id", "dlv_9") }), body, secret, "", "",
			subscriber.ErrMessageID},
		{"header event disagrees with the envelope", signed(body, func(h http.Header) { h.Set(subscriber.HeaderEvent, "crm.business.won") }),
			body, secret, "", "", subscriber.ErrMalformedDelivery},
		{"another event than the load's", signed(noImport, func(h http.Header) {
			h.Set(subscriber.HeaderEvent, "crm.business.won")
			h.Set(subscriber.HeaderDelivery, "dlv_2")
			h.Set("Nats-Msg-Id", "dlv_2")
		}), noImport, secret, "", "", subscriber.ErrMalformedDelivery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, id, err := brokerEvent(tt.header, tt.body, func() error {
				return subscriber.VerifyNATS(tt.secret, tt.header, tt.body, now, signatureTolerance)
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr != nil) != (err != nil) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if d != tt.wantDelivery || id != tt.wantImport {
				t.Errorf("delivery %q import %q, want %q %q", d, id, tt.wantDelivery, tt.wantImport)
			}
		})
	}
}

func TestStreamImportID(t *testing.T) {
	tests := []struct {
		name, data, want string
		wantErr          bool
	}{
		{"the stream's envelope", `{"event":"contact.import.completed","company_id":1,"data":{"import_id":"stream-1-5"}}`, "stream-1-5", false},
		{"another event", `{"event":"crm.business.won","data":{"import_id":"x"}}`, "", true},
		{"no import id", `{"event":"contact.import.completed","data":{}}`, "", true},
		{"not JSON", `{"event":`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := streamImportID([]byte(tt.data))
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
