package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

// River's routine lines go to DEBUG; its other lines keep their level.
func TestRiverRoutineLinesAreDemoted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		level     slog.Level // the handler's level
		record    slog.Level
		msg       string
		wantLevel string // "" = not written
	}{
		{"job counts at info", slog.LevelInfo, slog.LevelInfo, "producer: Producer job counts", ""},
		{"job counts at debug", slog.LevelDebug, slog.LevelInfo, "producer: Producer job counts", "DEBUG"},
		{"maintenance pass", slog.LevelInfo, slog.LevelInfo, "JobCleaner: Ran successfully", ""},
		{"poll only", slog.LevelInfo, slog.LevelInfo, "Driver does not support listener; entering poll only mode", ""},
		{"client started", slog.LevelInfo, slog.LevelInfo, "River client started", "INFO"},
		{"job errored", slog.LevelInfo, slog.LevelInfo, "jobexecutor.JobExecutor: Job errored; retrying", "INFO"},
		{"warning", slog.LevelInfo, slog.LevelWarn, "producer: Producer job counts", "WARN"},
		{"error", slog.LevelInfo, slog.LevelError, "elector: Error attempting to elect", "ERROR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := newRiverLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
			logger.Log(context.Background(), tc.record, tc.msg, "queue", "default")
			if tc.wantLevel == "" {
				if buf.Len() > 0 {
					t.Fatalf("written: %s", buf.String())
				}
				return
			}
			var line struct {
				Level     string `json:"level"`
				Msg       string `json:"msg"`
				Component string `json:"component"`
				Queue     string `json:"queue"`
			}
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if line.Level != tc.wantLevel || line.Msg != tc.msg || line.Component != "river" || line.Queue != "default" {
				t.Fatalf("got %+v, want level %s", line, tc.wantLevel)
			}
		})
	}
}
