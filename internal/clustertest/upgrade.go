package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// OldCommit is the commit before the newest migration: the parent of the
// newest commit after which the set of migration ids is the current one.
// A commit that only moves a migration between files changes no id and is
// passed over, so the old binary really lacks a migration the new one
// applies. repo is the module's work tree.
func OldCommit(ctx context.Context, repo string) (string, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	ids := func(commit string) (string, error) {
		// git grep exits 1 when nothing matches: an empty set.
		out, _ := exec.CommandContext(ctx, "git", "-C", repo, "grep", "-h", "-o", "-E", `ID: *"[0-9]{4}_[a-z0-9_]+"`, commit, "--", "internal/").Output()
		lines := strings.Fields(strings.ReplaceAll(string(out), "ID:", ""))
		slices.Sort(lines)
		return strings.Join(lines, " "), nil
	}
	current, err := ids("HEAD")
	if err != nil || current == "" {
		return "", fmt.Errorf("no migration ids at HEAD (the suite needs the repository's history)")
	}
	// The main line only: a branch's commits before its merge may carry
	// ids that were renumbered at the merge and never released.
	log, err := git("log", "--first-parent", "-m", "--format=%H", "-G", `ID: *"[0-9]{4}_`, "--", "internal/")
	if err != nil {
		return "", fmt.Errorf("git log (the suite needs the repository's history): %w", err)
	}
	for _, c := range strings.Fields(log) {
		before, err := ids(c + "^")
		if err != nil {
			return "", err
		}
		if before != current {
			return git("rev-parse", "--short", c+"^")
		}
	}
	return "", fmt.Errorf("no commit adds a migration")
}

// BuildOld builds the gateway of OldCommit to bin, from a git archive of
// that commit in a temporary directory it removes, and returns the commit.
func BuildOld(ctx context.Context, repo, bin string) (commit string, err error) {
	if commit, err = OldCommit(ctx, repo); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gwcluster-old-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "old-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", repo, commit, src))
	if b, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w: %s", commit, err, b)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return "", err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/gateway")
	// -trimpath: the build cache then serves every package the commits
	// share, whatever the temporary directory is called.
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the gateway of %s: %w: %s", commit, err, b)
	}
	return commit, nil
}
