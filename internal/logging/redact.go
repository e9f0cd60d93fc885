// Package logging holds the log handlers every line of the gateway passes
// through, whatever its source: today the one that keeps media tokens out
// of the log.
package logging

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// mediaToken matches the token segment of a media URL or stored-file path:
// /media/{token}/…, /message-media/{token}/… and a media directory's
// {token}/ folder. A token is the bearer credential of a file (only its
// hash is stored), so a line that quotes one would undo that.
var mediaToken = regexp.MustCompile(`(media/)[A-Za-z0-9_-]{16,}`)

// Redacted replaces the token of a media URL or path.
const Redacted = "[redacted]"

// RedactMediaTokens wraps next so that no media token reaches it: in the
// message, in string attributes, and in errors and other values printed as
// text (an error's text can quote a URL or a path). Lines without "media/"
// cost one substring search per string attribute.
func RedactMediaTokens(next slog.Handler) slog.Handler { return redactor{next: next} }

type redactor struct{ next slog.Handler }

func (h redactor) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h redactor) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactor) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = redactAttr(a)
	}
	return redactor{next: h.next.WithAttrs(clean)}
}

func (h redactor) WithGroup(name string) slog.Handler {
	return redactor{next: h.next.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); strings.Contains(s, "media/") {
			return slog.String(a.Key, redact(s))
		}
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = redactAttr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		default:
			return slog.Attr{Key: a.Key, Value: v}
		}
		if strings.Contains(s, "media/") {
			return slog.String(a.Key, redact(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func redact(s string) string {
	if !strings.Contains(s, "media/") {
		return s
	}
	return mediaToken.ReplaceAllString(s, "${1}"+Redacted)
}
