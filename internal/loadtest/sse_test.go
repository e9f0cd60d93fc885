package loadtest

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      []sseEvent
		wantRetry int
		wantLast  string
	}{
		{"the gateway's stream: retry, keep-alive, events, a cut",
			"retry: 1000\n\n: keep-alive\n\nid: 7\nevent: contact.import.completed\ndata: {\"a\":1}\n\n" +
				"event: stream.cut\ndata: {\"reason\":\"slow_reader\",\"last_event_id\":\"7\"}\n\n",
			[]sseEvent{{ID: "7", Event: "contact.import.completed", Data: `{"a":1}`},
				{ID: "7", Event: "stream.cut", Data: `{"reason":"slow_reader","last_event_id":"7"}`}}, 1000, "7"},
		{"data lines join with LF; no event type is message",
			"data: one\ndata:two\ndata\n\n", []sseEvent{{Event: "message", Data: "one\ntwo\n"}}, 0, ""},
		{"CRLF and lone CR end lines too",
			"id: 1\r\nevent: e\r\ndata: x\r\n\r\nid: 2\revent: f\rdata: y\r\r", []sseEvent{{ID: "1", Event: "e", Data: "x"},
				{ID: "2", Event: "f", Data: "y"}}, 0, "2"},
		{"an event without data is not dispatched and forgets its type",
			"event: lonely\n\ndata: z\n\n", []sseEvent{{Event: "message", Data: "z"}}, 0, ""},
		{"a partial event at the end is dropped",
			"id: 3\ndata: whole\n\nid: 4\ndata: half", []sseEvent{{ID: "3", Event: "message", Data: "whole"}}, 0, "4"},
		{"invalid retry is ignored, unknown fields too",
			"retry: 2000\nretry: -5\nretry: 1e3\nfoo: bar\ndata: d\n\n", []sseEvent{{Event: "message", Data: "d"}}, 2000, ""},
		{"only the first space of a value is dropped",
			"data:  two spaces\n\n", []sseEvent{{Event: "message", Data: " two spaces"}}, 0, ""},
		{"a line longer than the buffer",
			"data: " + strings.Repeat("x", 100<<10) + "\n\n", []sseEvent{{Event: "message", Data: strings.Repeat("x", 100<<10)}}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tt.in))
			var got []sseEvent
			for {
				ev, err := r.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("Next: %v", err)
					}
					break
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
			if r.Retry != tt.wantRetry || r.LastID != tt.wantLast {
				t.Errorf("retry %d last id %q, want %d %q", r.Retry, r.LastID, tt.wantRetry, tt.wantLast)
			}
		})
	}
}
