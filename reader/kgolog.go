package reader

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger routes franz-go's own logs into the reader's slog.Logger, one
// level lower than franz-go rates them: its info lines (every join, sync and
// heartbeat decision) are debug detail for an operator of kafka2pg, and its
// errors are what the client retries, or what the reader reports itself
// (a fatal error is one ERROR line, the bridge's own).
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case l.log.Enabled(ctx, slog.LevelDebug-4):
		return kgo.LogLevelDebug
	case l.log.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	case l.log.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	switch level {
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug - 4
	case kgo.LogLevelInfo:
		lvl = slog.LevelDebug
	case kgo.LogLevelWarn:
		lvl = slog.LevelInfo
	}
	l.log.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}
