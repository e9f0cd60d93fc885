package filestore

import (
	"context"
	"log/slog"
	"sync"
)

// missingRemembered bounds the keys a MissingLog remembers; past it, it
// starts over (a key may then be logged once more).
const missingRemembered = 10000

const missingMessage = "stored file missing: a row points to a file the media store does not have"

// MissingLog reports a file that a row points to but the store lacks: an
// error worth an operator's look, logged once per key per process however
// often clients ask for it.
type MissingLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	seen   map[string]struct{}
}

// NewMissingLog returns a MissingLog writing to logger.
func NewMissingLog(logger *slog.Logger) *MissingLog {
	if logger == nil {
		logger = slog.Default()
	}
	return &MissingLog{logger: logger, seen: map[string]struct{}{}}
}

// Report logs key the first time it is reported and says whether it did.
// A nil MissingLog logs every report to slog's default logger.
func (m *MissingLog) Report(ctx context.Context, key string, attrs ...any) bool {
	if m == nil {
		slog.Default().ErrorContext(ctx, missingMessage, append([]any{"key", key}, attrs...)...)
		return true
	}
	m.mu.Lock()
	if _, ok := m.seen[key]; ok {
		m.mu.Unlock()
		return false
	}
	if len(m.seen) >= missingRemembered {
		m.seen = map[string]struct{}{}
	}
	m.seen[key] = struct{}{}
	m.mu.Unlock()
	m.logger.ErrorContext(ctx, missingMessage, append([]any{"key", key}, attrs...)...)
	return true
}
