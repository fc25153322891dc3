package voice

import (
	"log/slog"
	"time"

	"github.com/alicia-voice/alicia/pipeline/voice/echo"
)

// ear is what a listener hears of one microphone before it judges it:
// the agent's echo taken out by the suppressor, then the utterances the
// endpointer finds in what is left. The two are coupled both ways: the
// suppressor says whether the frames may still carry echo (the stricter
// pitch) and when the echo moved (what the old delay let through is
// forgotten), and the endpointer says when the user's speech holds the
// echo path (Hold). The listener and the tests hear through the same
// ear.
type ear struct {
	s    *echo.Suppressor
	e    *Endpointer
	f    Framer
	path echo.PathState
	// before is the path until it last changed, at changed.
	before  echo.PathState
	changed time.Time
}

func newEar(s *echo.Suppressor, e *Endpointer) *ear {
	return &ear{s: s, e: e, path: s.Path()}
}

// hear takes a chunk of the microphone's audio that came at at, and
// hands each frame it completes to frame, with the events the frame
// completed and when its audio came (at, less what the suppressor
// delayed it by), before the next frame is heard: what the endpointer
// holds (the utterance so far, its speech) is then that frame's.
// rejected: a stretch of the agent's echo was taken out; pathChanged:
// the echo path was found, moved or ruled out.
func (a *ear) hear(pcm []int16, at time.Time, frame func(pcm []int16, evs []EndpointEvent, at time.Time)) (rejected, pathChanged bool, err error) {
	rejected = a.s.Process(pcm, at)
	if p := a.s.Path(); p != a.path {
		if p.Moved(a.path) {
			// What the old delay left of the echo until it was followed
			// is no start of speech.
			a.e.Forget()
		}
		a.before, a.changed = a.path, at
		a.path, pathChanged = p, true
	}
	at = at.Add(-a.s.Delay())
	// Sound the echo leaves unexplained is the user's: its pitch is
	// measured as over no echo (pitch.go).
	a.e.SetEchoed(a.s.Echoing() && !a.s.DoubleTalk())
	for _, fr := range a.f.Write(pcm) {
		evs, err := a.e.Push(fr)
		if err != nil {
			return rejected, pathChanged, err
		}
		for _, ev := range evs {
			switch ev.Kind {
			case SpeechConfirmed:
				a.s.Hold(true)
			case SpeechEnded:
				a.s.Hold(false)
			}
		}
		frame(fr, evs, at)
	}
	return rejected, pathChanged, nil
}

// LogValue is what the ear knows of the echo path, for a log line about
// speech it let through: the suppressor's state, and the path before its
// last change and how long ago that was, since echo let through is most
// often what a change has not caught up with.
func (a *ear) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Any("now", a.s)}
	if !a.changed.IsZero() {
		attrs = append(attrs, slog.String("before", a.before.Mode), slog.Duration("changed", time.Since(a.changed).Round(time.Millisecond)))
		if a.before.Mode == "locked" {
			attrs = append(attrs, slog.Duration("before_delay", a.before.Delay))
		}
	}
	return slog.GroupValue(attrs...)
}
