package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// readmeMarker precedes each README shell block that runs against the demo.
const readmeMarker = "<!-- readme-test: runs against make demo -->"

// readmeBlocks returns the fenced blocks that follow readmeMarker in the repository's README.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var cur *strings.Builder
	armed := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		case strings.TrimSpace(line) == readmeMarker:
			armed = true
		case armed && strings.HasPrefix(line, "```"):
			cur, armed = &strings.Builder{}, false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// exports reads the variables of the demo's "export …" line.
func exports(t *testing.T, out string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "export ") {
			return strings.Fields(strings.TrimPrefix(l, "export "))
		}
	}
	t.Fatalf("the demo printed no export line:\n%s", out)
	return nil
}

// TestREADMEWalkthroughs runs the README's marked shell blocks in bash (-e, -u, pipefail), from
// the repository root, with the variables the demo exports: a walk-through that stops working
// fails here.
func TestREADMEWalkthroughs(t *testing.T) {
	blocks := readmeBlocks(t)
	if len(blocks) == 0 {
		t.Fatalf("README.md has no block after %q", readmeMarker)
	}
	out, _ := startDemo(t)
	env := append(os.Environ(), exports(t, out.String())...)
	for i, block := range blocks {
		cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", block)
		cmd.Dir = "../.."
		cmd.Env = env
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README block %d failed: %v\n--- block\n%s--- output\n%s", i+1, err, block, got)
		}
		t.Logf("README block %d:\n%s", i+1, got)
	}
	// What the walk-throughs say the printer shows: the template send, the answer and its two
	// receipts, and the chat-app send (omnichat.message.sent); the demo's first message and Ana's
	// answer (omnichat.message.received).
	waitFor(t, out, "omnichat.message.sent", 5)
	waitFor(t, out, "omnichat.message.received", 2)
}
