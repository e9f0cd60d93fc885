package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// output is the demo's stdout, read while the demo writes it: run's own serialising writer over a
// buffer.
type output struct{ syncWriter }

func newOutput() *output { return &output{syncWriter{w: &bytes.Buffer{}}} }

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.(*bytes.Buffer).String()
}

// waitFor polls the output until it holds n lines announcing event, or fails the test after a
// bounded wait (a hung demo must not hang the suite).
func waitFor(t *testing.T, out *output, event string, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for strings.Count(out.String(), " "+event+" ") < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %s after 90 s; output:\n%s", n, event, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDemoHeadless runs `make demo`'s program as a user would: the first event arrives by itself,
// each of the printed curl lines works when pasted into a shell and makes its event arrive, and
// cancelling (Ctrl-C) stops everything cleanly.
func TestDemoHeadless(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the demo prints curl lines; this test runs them and needs curl")
	}
	out, stop := startDemo(t)
	ctx := t.Context()
	for _, want := range []string{"token                gw_", "company_id 1, user_id 1", "company_channel_id 1", "chat-app connection  id "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q", want)
		}
	}

	var curls []string
	for _, line := range strings.Split(out.String(), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "curl ") {
			curls = append(curls, l)
		}
	}
	if len(curls) != 3 {
		t.Fatalf("want three curl lines, got %d:\n%s", len(curls), out.String())
	}
	steps := []struct {
		event string
		n     int
	}{
		{"omnichat.message.sent", 1},     // the answer on the official channel
		{"omnichat.message.received", 2}, // the contact writes on the chat-app connection
		{"omnichat.message.sent", 2},     // the answer on the chat-app connection
	}
	for i, step := range steps {
		// The lines carry --fail-with-body: an HTTP error answer is a non-zero exit.
		got, err := exec.CommandContext(ctx, "bash", "-c", curls[i]).CombinedOutput()
		if err != nil {
			t.Fatalf("curl line %d: %v\n%s\n%s", i+1, err, curls[i], got)
		}
		waitFor(t, out, step.event, step.n)
	}

	stop()
	if !strings.Contains(out.String(), "Stopping…") {
		t.Errorf("no stop notice:\n%s", out.String())
	}
}

// startDemo runs the demo on free ports until the first event has arrived. stop plays Ctrl-C and
// fails the test unless the demo then stops cleanly; it also runs at cleanup.
func startDemo(t *testing.T) (out *output, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = newOutput()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-data-dir", t.TempDir()}, out) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("demo stopped with %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Error("the demo did not stop within 60 s of Ctrl-C")
			}
		})
	}
	t.Cleanup(stop)
	waitFor(t, out, "omnichat.message.received", 1)
	return out, stop
}
