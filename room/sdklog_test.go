package room

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livekit/protocol/logger/pionlogger"
	"go.uber.org/zap"
)

// records keeps what reaches the handler, at a given level.
type records struct {
	level slog.Level
	mu    sync.Mutex
	got   []slog.Record
}

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	return nil
}
func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordsWith{r, as}
}
func (r *records) WithGroup(string) slog.Handler { return r }

type recordsWith struct {
	*records
	as []slog.Attr
}

func (r *recordsWith) Handle(ctx context.Context, rec slog.Record) error {
	rec.AddAttrs(r.as...)
	return r.records.Handle(ctx, rec)
}

func (r *recordsWith) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordsWith{r.records, append(slices.Clip(r.as), as...)}
}

func (r *records) lines() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.got...)
}

func attrsOf(rec slog.Record) map[string]string {
	m := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// formatted counts how often a log argument is turned into text.
type formatted struct{ n atomic.Int32 }

func (f *formatted) String() string { f.n.Add(1); return "packet" }

func TestPionTraceIsNeitherFormattedNorWrittenAboveDebug(t *testing.T) {
	h := &records{level: slog.LevelInfo}
	pion := pionlogger.NewLoggerFactory(newSDKLogger(sdkHandler{h})).NewLogger("sctp")
	arg := &formatted{}
	pion.Tracef("sent %v", arg)
	pion.Debugf("sent %v", arg)
	pion.Infof("sent %v", arg) // demoted to debug, as the SDK's info lines are
	if n := arg.n.Load(); n != 0 {
		t.Fatalf("an argument of a dropped line was formatted %d times", n)
	}
	pion.Warnf("association %v failed", arg)
	got := h.lines()
	if len(got) != 1 || got[0].Level != slog.LevelWarn || got[0].Message != "association packet failed" {
		t.Fatalf("want the one warning, got %v", got)
	}

	h = &records{level: slog.LevelDebug}
	pion = pionlogger.NewLoggerFactory(newSDKLogger(sdkHandler{h})).NewLogger("sctp")
	pion.Tracef("sent %v", arg)
	if got := h.lines(); len(got) != 1 || got[0].Level != slog.LevelDebug || got[0].Message != "sent packet" {
		t.Fatalf("at debug level the trace line is written: got %v", got)
	}
}

func TestSDKLoggerKeepsValuesNamesAndErrors(t *testing.T) {
	h := &records{level: slog.LevelDebug}
	l := newSDKLogger(sdkHandler{h}).WithName("engine").WithComponent("transport").WithValues("room", "r1")
	withID, resolve := l.WithDeferredValues()
	resolve.Resolve("participantID", "PA_1")
	withID.Warnw("publish failed", errors.New("closed"), "label", "_reliable")
	l.Infow("joined")
	got := h.lines()
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2", len(got))
	}
	a := attrsOf(got[0])
	want := map[string]string{"logger": "engine.transport", "room": "r1", "participantID": "PA_1", "label": "_reliable", "error": "closed"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, a[k], v, a)
		}
	}
	if got[1].Level != slog.LevelDebug {
		t.Errorf("the SDK's info line is at %v, want debug", got[1].Level)
	}
	if _, ok := attrsOf(got[1])["participantID"]; ok {
		t.Error("a deferred value reached a logger it was not deferred on")
	}
}

func TestSDKLoggerAsZapAndWithMinLevel(t *testing.T) {
	h := &records{level: slog.LevelWarn}
	l := newSDKLogger(h)
	z := l.ToZap()
	z.Infow("quiet", "k", 1)
	z.With(zap.String("track", "TR_1")).Errorw("loud", "k", 2)
	got := h.lines()
	if len(got) != 1 || got[0].Message != "loud" || attrsOf(got[0])["track"] != "TR_1" || attrsOf(got[0])["k"] != "2" {
		t.Fatalf("want the error line with its fields, got %v", got)
	}
	l.WithMinLevel(zap.InfoLevel).Infow("forced")
	if got := h.lines(); len(got) != 2 || got[1].Message != "forced" {
		t.Fatalf("WithMinLevel(info) did not log an info line: %v", got)
	}
}

// pion's warnings of what happens in every connection are debug lines;
// its other warnings keep their level.
func TestRoutinePionWarningsAreDebugLines(t *testing.T) {
	h := &records{level: slog.LevelInfo}
	factory := pionlogger.NewLoggerFactory(newSDKLogger(sdkHandler{h}))
	factory.NewLogger("ice").Warnf("Failed to ping without candidate pairs. Connection is not possible yet.")
	factory.NewLogger("mux").Warnf("Warning: mux: no endpoint for packet starting with %d, adding to queue size(%d)", 22, 0)
	factory.NewLogger("sctp").Warnf("[%s] failed to write packets on netConn: %v", "0x1", errors.New("dtls fatal: conn is closed"))
	factory.NewLogger("sctp").Warnf("association %s failed", "0x1")
	factory.NewLogger("mux").Warnf("Warning: mux: no endpoint for packet starting with %d, not adding to queue size(%d)", 22, 1)
	got := h.lines()
	if len(got) != 2 || got[0].Message != "association 0x1 failed" || got[0].Level != slog.LevelWarn ||
		got[1].Level != slog.LevelWarn {
		t.Fatalf("want the association's warning and the dropped packet's, got %v", got)
	}

	h = &records{level: slog.LevelDebug}
	pionlogger.NewLoggerFactory(newSDKLogger(sdkHandler{h})).NewLogger("ice").Warnf("Failed to ping without candidate pairs. Connection is not possible yet.")
	if got := h.lines(); len(got) != 1 || got[0].Level != slog.LevelDebug {
		t.Fatalf("at debug level the routine warning is a debug line: got %v", got)
	}
}
