package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// OldCommit is the commit before the newest migration: the parent of the
// newest commit whose diff adds or removes a migration id (git's -G).
// repo is the module's work tree.
func OldCommit(ctx context.Context, repo string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "log", "-1", "--format=%H", "-G", `ID: *"[0-9]{4}_`, "--", "internal/").Output()
	if err != nil {
		return "", fmt.Errorf("git log (the suite needs the repository's history): %w", err)
	}
	newest := strings.TrimSpace(string(out))
	if newest == "" {
		return "", fmt.Errorf("no commit adds a migration")
	}
	out, err = exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--short", newest+"^").Output()
	if err != nil {
		return "", fmt.Errorf("parent of %s: %w", newest, err)
	}
	return strings.TrimSpace(string(out)), nil
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
