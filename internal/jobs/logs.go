package jobs

import (
	"context"
	"log/slog"
	"strings"
)

// routineMessages end River's log lines that report nothing an operator acts
// on: a producer's job counts (every few seconds while jobs run), a
// maintenance service's successful pass, and SQLite's poll-only mode. At
// INFO they made up most of an idle replica's log.
var routineMessages = []string{
	": Producer job counts",
	": Ran successfully",
	"entering poll only mode",
}

// routine reports whether msg is one of River's routine lines.
func routine(msg string) bool {
	for _, m := range routineMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// demoteRoutine wraps River's handler so its routine INFO lines are logged
// at DEBUG (shown with LOG_LEVEL=debug); everything else, warnings and job
// failures included, keeps its level.
type demoteRoutine struct{ next slog.Handler }

// newRiverLogger is the logger River is given.
func newRiverLogger(base *slog.Logger) *slog.Logger {
	return slog.New(demoteRoutine{next: base.Handler()}).With("component", "river")
}

func (h demoteRoutine) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h demoteRoutine) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && routine(r.Message) {
		if !h.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.next.Handle(ctx, r)
}

func (h demoteRoutine) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteRoutine{next: h.next.WithAttrs(attrs)}
}

func (h demoteRoutine) WithGroup(name string) slog.Handler {
	return demoteRoutine{next: h.next.WithGroup(name)}
}
