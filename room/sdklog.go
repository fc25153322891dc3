package room

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	protologger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RouteSDKLogs sends what the LiveKit SDK and pion log through log, at the
// level log is configured for. The SDK writes routine connection details
// (join plans with every connection parameter, published tracks) at info
// level: here they are debug lines, and only its warnings and errors keep
// their level. Without this the SDK prints to the standard logger, at any
// configured level. Call it once, before the first connection.
func RouteSDKLogs(log *slog.Logger) {
	lksdk.SetLogger(newSDKLogger(sdkHandler{log.With("component", "livekit-sdk").Handler()}))
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
	if r.Level == slog.LevelWarn && routine(r.Message) {
		r.Level = slog.LevelDebug
		if !h.next.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.next.Handle(ctx, r)
}

// routineWarnings are what pion warns of in every connection's life
// though nothing went wrong: a connectivity check before the other side's
// candidates came (it checks again), a DTLS packet that came before its
// endpoint (queued for it; one not queued stays a warning), and a write
// of a connection closing. About two of them a join, at warning level,
// hid the warnings that matter.
var routineWarnings = []string{
	"Failed to ping without candidate pairs",
	", adding to queue",
	"dtls fatal: conn is closed",
}

// routine tells a warning in routineWarnings.
func routine(msg string) bool {
	return slices.ContainsFunc(routineWarnings, func(w string) bool { return strings.Contains(msg, w) })
}

func (h sdkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkHandler{h.next.WithAttrs(attrs)}
}

func (h sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{h.next.WithGroup(name)} }

// sdkLogger is the SDK's logger, written straight to a slog.Handler. It is
// a protologger.ZapLogger because that is the one kind of logger whose pion
// adapter asks for the level before it formats a message: given any other,
// it formats every per-packet trace line of every connection and then
// drops it, 3–5% of the bot's CPU at 500 conversations.
type sdkLogger struct {
	h        slog.Handler
	name     string
	min      zapcore.LevelEnabler // WithMinLevel's levels, logged whatever h says
	deferred []*deferredValues
}

func newSDKLogger(h slog.Handler) *sdkLogger { return &sdkLogger{h: h} }

var _ protologger.ZapLogger = (*sdkLogger)(nil)

func (l *sdkLogger) enabled(lv slog.Level) bool {
	return l.h.Enabled(context.Background(), lv) || (l.min != nil && l.min.Enabled(zapLevel(lv)))
}

func (l *sdkLogger) log(lv slog.Level, msg string, err error, kv []any) {
	if !l.enabled(lv) {
		return
	}
	r := slog.NewRecord(time.Now(), lv, msg, 0)
	if l.name != "" {
		r.AddAttrs(slog.String("logger", l.name))
	}
	for _, d := range l.deferred {
		r.Add(d.values()...)
	}
	r.Add(kv...)
	if err != nil {
		r.AddAttrs(slog.Any("error", err))
	}
	_ = l.h.Handle(context.Background(), r)
}

func (l *sdkLogger) with(f func(*sdkLogger)) *sdkLogger {
	c := *l
	c.deferred = slices.Clip(c.deferred)
	f(&c)
	return &c
}

func (l *sdkLogger) Debugw(msg string, kv ...any) { l.log(slog.LevelDebug, msg, nil, kv) }
func (l *sdkLogger) Infow(msg string, kv ...any)  { l.log(slog.LevelInfo, msg, nil, kv) }
func (l *sdkLogger) Warnw(msg string, err error, kv ...any) {
	l.log(slog.LevelWarn, msg, err, kv)
}
func (l *sdkLogger) Errorw(msg string, err error, kv ...any) {
	l.log(slog.LevelError, msg, err, kv)
}

func (l *sdkLogger) WithValues(kv ...any) protologger.Logger {
	return l.with(func(c *sdkLogger) { c.h = slog.New(c.h).With(kv...).Handler() })
}

func (l *sdkLogger) WithUnlikelyValues(kv ...any) protologger.UnlikelyLogger {
	return protologger.NewUnlikelyLogger(l, kv...)
}

func (l *sdkLogger) WithName(name string) protologger.Logger {
	return l.with(func(c *sdkLogger) {
		if c.name != "" {
			name = c.name + "." + name
		}
		c.name = name
	})
}

func (l *sdkLogger) WithComponent(component string) protologger.Logger { return l.WithName(component) }

// The record carries no source position, so there is no depth to adjust;
// and nothing here samples.
func (l *sdkLogger) WithCallDepth(int) protologger.Logger { return l }
func (l *sdkLogger) WithItemSampler() protologger.Logger  { return l }
func (l *sdkLogger) WithoutSampler() protologger.Logger   { return l }

func (l *sdkLogger) WithDeferredValues() (protologger.Logger, protologger.DeferredFieldResolver) {
	d := &deferredValues{}
	return l.with(func(c *sdkLogger) { c.deferred = append(c.deferred, d) }), d
}

func (l *sdkLogger) WithMinLevel(lvl zapcore.LevelEnabler) protologger.Logger {
	return l.with(func(c *sdkLogger) { c.min = lvl })
}

func (l *sdkLogger) ComponentLeveler() protologger.ZapComponentLeveler { return sdkLeveler{l} }

func (l *sdkLogger) ToZap() *zap.SugaredLogger { return zap.New(zapCore{l}).Sugar() }

type sdkLeveler struct{ l *sdkLogger }

func (s sdkLeveler) ComponentLevel(string) zapcore.LevelEnabler {
	return zap.LevelEnablerFunc(func(z zapcore.Level) bool { return s.l.enabled(slogLevel(z)) })
}

// deferredValues are fields known after the logger was made (a
// participant's id once it has joined), added to every line from then on.
type deferredValues struct {
	mu sync.Mutex
	kv []any
}

func (d *deferredValues) Resolve(kv ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kv = append(d.kv, kv...)
}

func (d *deferredValues) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kv = nil
}

func (d *deferredValues) values() []any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.kv)
}

// zapCore is ToZap's core: zap entries written as the logger's records.
type zapCore struct{ l *sdkLogger }

func (c zapCore) Enabled(z zapcore.Level) bool { return c.l.enabled(slogLevel(z)) }

func (c zapCore) With(fields []zapcore.Field) zapcore.Core {
	return zapCore{c.l.WithValues(fieldValues(fields)...).(*sdkLogger)}
}

func (c zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c zapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	c.l.log(slogLevel(e.Level), e.Message, nil, fieldValues(fields))
	return nil
}

func (zapCore) Sync() error { return nil }

func fieldValues(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	kv := make([]any, 0, 2*len(fields))
	for _, f := range fields {
		if v, ok := enc.Fields[f.Key]; ok {
			kv = append(kv, f.Key, v)
		}
	}
	return kv
}

func slogLevel(z zapcore.Level) slog.Level {
	switch {
	case z < zapcore.InfoLevel:
		return slog.LevelDebug
	case z == zapcore.InfoLevel:
		return slog.LevelInfo
	case z == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l < slog.LevelInfo:
		return zapcore.DebugLevel
	case l < slog.LevelWarn:
		return zapcore.InfoLevel
	case l < slog.LevelError:
		return zapcore.WarnLevel
	}
	return zapcore.ErrorLevel
}
