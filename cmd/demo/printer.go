package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// maxShown bounds the part of an event's data printed on its line.
const maxShown = 220

func (p *printer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	secret := p.secret
	p.mu.Unlock()
	if secret == "" {
		// The subscription exists a moment before its secret reaches the printer: ask for a retry.
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := subscriber.Verify(secret, r.Header, body, time.Now(), 0); err != nil {
		fmt.Fprintf(p.out, "  rejected a delivery: %v\n", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var env struct {
		Event      string          `json:"event"`
		DeliveryID string          `json:"delivery_id"`
		Data       json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		http.Error(w, "not an event envelope", http.StatusBadRequest)
		return
	}
	var data bytes.Buffer
	if err := json.Compact(&data, env.Data); err != nil {
		data.Reset()
		data.Write(env.Data)
	}
	fmt.Fprintf(p.out, "  %s  %-32s delivery %s, signature verified\n      %s\n",
		time.Now().Format("15:04:05"), env.Event, env.DeliveryID, shorten(data.String(), maxShown))
	w.WriteHeader(http.StatusNoContent)
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
