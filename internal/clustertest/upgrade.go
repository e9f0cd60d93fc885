package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildOld builds the gateway of the commit before the newest migration
// (the newest commit whose diff adds or removes a migration id, found by
// git's -G) into dir, from a git archive of that commit, and returns the
// binary and the commit. repo is the module's work tree.
func BuildOld(ctx context.Context, repo, dir string) (bin, commit string, err error) {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "log", "-1", "--format=%H", "-G", `ID: *"[0-9]{4}_`, "--", "internal/").Output()
	if err != nil {
		return "", "", fmt.Errorf("git log (the suite needs the repository's history): %w", err)
	}
	newest := strings.TrimSpace(string(out))
	if newest == "" {
		return "", "", fmt.Errorf("no commit adds a migration")
	}
	out, err = exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--short", newest+"^").Output()
	if err != nil {
		return "", "", fmt.Errorf("parent of %s: %w", newest, err)
	}
	commit = strings.TrimSpace(string(out))
	src := filepath.Join(dir, "old-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", repo, commit, src))
	if b, err := archive.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("git archive %s: %w: %s", commit, err, b)
	}
	bin = filepath.Join(dir, "gateway-old")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build the gateway of %s: %w: %s", commit, err, b)
	}
	_ = os.RemoveAll(src)
	return bin, commit, nil
}
