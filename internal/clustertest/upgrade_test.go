package clustertest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestOldCommitLacksTheNewestMigration: the rolling upgrade's old binary
// must miss a migration id the current tree has, or the upgrade step tests
// nothing.
func TestOldCommitLacksTheNewestMigration(t *testing.T) {
	if err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Run(); err != nil {
		t.Skip("no git history here:", err)
	}
	ctx := context.Background()
	old, err := OldCommit(ctx, "../..")
	if err != nil {
		t.Fatal(err)
	}
	grep := func(commit string) string {
		out, _ := exec.Command("git", "-C", "../..", "grep", "-h", "-o", "-E", `ID: *"[0-9]{4}_[a-z0-9_]+"`, commit, "--", "internal/").Output()
		return string(out)
	}
	head, before := grep("HEAD"), grep(old)
	missing := 0
	for _, id := range strings.Split(strings.TrimSpace(head), "\n") {
		if !strings.Contains(before, id) {
			missing++
		}
	}
	if missing == 0 {
		t.Fatalf("the old commit %s has every migration id of HEAD", old)
	}
}
