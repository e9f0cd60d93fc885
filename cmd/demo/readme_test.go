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

// readmes are the walk-throughs that build on the demo: the repository's README (its quick
// start), the walk-throughs page, then the packages' (paths from the repository root).
var readmes = []string{"README.md", "docs/walkthroughs.md", "internal/official/README.md", "internal/connections/README.md"}

// readmeBlocks returns the fenced blocks that follow readmeMarker in one README (a path from the
// repository root).
func readmeBlocks(t *testing.T, readme string) []string {
	t.Helper()
	f, err := os.Open("../../" + readme)
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

// TestREADMEWalkthroughs runs the marked shell blocks of every README in readmes in bash (-e, -u,
// pipefail), from the repository root, with the variables the demo exports: a walk-through that
// stops working fails here.
func TestREADMEWalkthroughs(t *testing.T) {
	all := map[string][]string{}
	for _, readme := range readmes {
		if all[readme] = readmeBlocks(t, readme); len(all[readme]) == 0 {
			t.Fatalf("%s has no block after %q", readme, readmeMarker)
		}
	}
	out, _ := startDemo(t)
	env := append(os.Environ(), exports(t, out.String())...)
	for _, readme := range readmes {
		for i, block := range all[readme] {
			cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", block)
			cmd.Dir = "../.."
			cmd.Env = env
			got, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s block %d failed: %v\n--- block\n%s--- output\n%s", readme, i+1, err, block, got)
			}
			t.Logf("%s block %d:\n%s", readme, i+1, got)
		}
	}
	// What the walk-throughs say the printer shows: the template send, the answer and its two
	// receipts, and the chat-app send (omnichat.message.sent); the demo's first message and Ana's
	// answer (omnichat.message.received).
	waitFor(t, out, "omnichat.message.sent", 5)
	waitFor(t, out, "omnichat.message.received", 2)
}
