package room

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	protologger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

// RouteSDKLogs sends what the LiveKit SDK and pion log through log, at the
// level log is configured for. The SDK writes routine connection details
// (join plans with every connection parameter, published tracks) at info
// level: here they are debug lines, and only its warnings and errors keep
// their level. Without this the SDK prints to the standard logger, at any
// configured level. Call it once, before the first connection.
func RouteSDKLogs(log *slog.Logger) {
	h := sdkHandler{log.With("component", "livekit-sdk").Handler()}
	lksdk.SetLogger(protologger.LogRLogger(logr.FromSlogHandler(h)))
}

// sdkHandler demotes the SDK's info lines to debug.
type sdkHandler struct{ next slog.Handler }

func (h sdkHandler) level(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (h sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, h.level(l))
}

func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = h.level(r.Level)
	return h.next.Handle(ctx, r)
}

func (h sdkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkHandler{h.next.WithAttrs(attrs)}
}

func (h sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{h.next.WithGroup(name)} }
