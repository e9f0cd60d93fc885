package whatsmeow

import (
	"fmt"
	"log/slog"

	waLog "go.mau.fi/whatsmeow/util/log"
)

// slogLogger lets the library log through the service's structured logger.
type slogLogger struct{ l *slog.Logger }

var _ waLog.Logger = slogLogger{}

func waLogger(l *slog.Logger, channelID int64) waLog.Logger {
	return slogLogger{l: l.With("component", "whatsmeow", "channel_id", channelID)}
}

func (s slogLogger) Warnf(msg string, args ...any)  { s.l.Warn(fmt.Sprintf(msg, args...)) }
func (s slogLogger) Errorf(msg string, args ...any) { s.l.Error(fmt.Sprintf(msg, args...)) }
func (s slogLogger) Infof(msg string, args ...any)  { s.l.Info(fmt.Sprintf(msg, args...)) }

// Debugf is dropped unless the service logs at debug level: the library is
// very chatty there.
func (s slogLogger) Debugf(msg string, args ...any) { s.l.Debug(fmt.Sprintf(msg, args...)) }
func (s slogLogger) Sub(module string) waLog.Logger { return slogLogger{l: s.l.With("module", module)} }
