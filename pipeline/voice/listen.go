package voice

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/speech"
)

// Input is one speaker's audio into the stage, 16 kHz mono.
type Input struct {
	mu     sync.Mutex
	chunks *queue.Queue[chunk]
	closed bool
	// ended is closed with the input: nothing more will come.
	ended chan struct{}
	drops int
}

// inputBacklog is how many chunks Write keeps waiting before it drops
// audio: ten seconds and more of a microphone's 10 to 20 ms writes. A
// channel that size held 48 KB for every microphone, all the time.
const inputBacklog = 1000

func newInput() *Input { return &Input{chunks: queue.New[chunk](), ended: make(chan struct{})} }

// chunk is audio as written, with when it came: the end of the user's
// speech is timed by its arrival, not by when the stage got to it.
type chunk struct {
	pcm []int16
	at  time.Time
}

// Write queues samples; it never blocks the media goroutine that calls
// it, and drops audio if the stage has fallen more than ten seconds
// behind.
func (in *Input) Write(samples []int16) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil // the SDK flushes its resampler after closing its writer
	}
	if !in.chunks.Push(chunk{append([]int16(nil), samples...), time.Now()}, inputBacklog) {
		in.drops++
	}
	return nil
}

// Close ends the speaker's input.
func (in *Input) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		close(in.ended)
	}
	return nil
}

// Listen returns the input for a speaker's microphone track. Closing it
// (or Run ending) stops listening. It never waits, so that an SDK
// callback may call it.
func (s *Stage) Listen(speaker, trackID string) *Input {
	in := newInput()
	select {
	case <-s.done:
		in.Close()
		return in
	default:
	}
	s.post(func(l *loop) {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			s.listen(l.ctx, in, speaker, trackID)
		}()
	})
	return in
}

// utterance is one finished utterance on its way to recognition, or
// recognised already (a streaming recogniser's final: text set).
type utterance struct {
	id    string
	audio []int16
	text  *string
	// recognised is when text came.
	recognised time.Time
	// shown: an interim transcript of it went out.
	shown bool
}

// interim is an interim recognition of the utterance id.
type interim struct{ id, text string }

// guess is a recognition of the utterance id as it stood in a pause,
// speech into it: what the speaker asks if the pause ends the turn.
type guess struct {
	id     string
	speech time.Duration
	text   string
}

// preemptPause is how long a speaker must pause before what they said
// is recognised for a preemptive turn: longer than the gaps between
// words, well short of the silence that ends an utterance, so that the
// recognition and the model's first sentence overlap the rest of it.
const preemptPause = 200 * time.Millisecond

// preempter is the Asker's preemptive side, if preemption is on.
func (s *Stage) preempter() Preempter {
	p, ok := s.asker.(Preempter)
	if !ok || !s.cfg.Preemptive {
		return nil
	}
	return p
}

func (s *Stage) recognise(ctx context.Context, audio []int16, partial func(string)) (string, error) {
	for ev := range s.cfg.Recognizer.Stream(ctx, &speech.RecognizeRequest{Audio: audio, SampleRate: InputRate, Language: s.cfg.Language}) {
		switch ev.Kind {
		case speech.RecognizePartial:
			if partial != nil {
				partial(ev.Text)
			}
		case speech.RecognizeFinal:
			return ev.Text, nil
		case speech.RecognizeError:
			return "", ev.Err
		}
	}
	return "", ctx.Err()
}

// realtime is one speaker's streaming recognition, when the recogniser
// streams: the utterance's audio goes to the server as it is spoken, and
// the transcript comes back moments after its end, instead of the
// utterance being uploaded whole (and again for each interim transcript).
// Without a stream, or while none can be opened, every method is a no-op
// and utterances are uploaded.
type realtime struct {
	ctx context.Context
	rec LiveRecognizer
	log *slog.Logger
	st  *speech.RealtimeStream
	// utterances maps the stream's utterance numbers to the stage's ids,
	// with the audio kept for an upload if the stream fails it.
	utterances map[int]utterance
	current    int
	live       bool
}

func (s *Stage) realtime(ctx context.Context, log *slog.Logger) *realtime {
	rec, _ := s.cfg.Recognizer.(LiveRecognizer)
	return &realtime{ctx: ctx, rec: rec, log: log, utterances: map[int]utterance{}}
}

func (r *realtime) on() bool { return r.st != nil && r.live }

// start opens the stream if need be (once per speaker, so that the
// connection is up before the utterance ends) and begins an utterance
// with the audio the endpointer kept from before its onset.
func (r *realtime) start(id string, preRoll []int16) {
	r.live = false
	if r.rec == nil {
		return
	}
	if r.st == nil {
		st, err := r.rec.Open(r.ctx)
		if err != nil {
			r.log.Warn("voice: no streaming recognition; utterances are uploaded", "err", err)
			return
		}
		r.st = st
	}
	r.current = r.st.Utterance()
	r.utterances[r.current] = utterance{id: id}
	r.live = r.st.Append(preRoll) == nil
}

func (r *realtime) append(frame []int16) {
	if r.on() && r.st.Append(frame) != nil {
		r.live = false
	}
}

// commit ends the utterance with its last frame, shown if an interim
// transcript of it went out already; false: it was not streamed, and must
// be uploaded.
func (r *realtime) commit(last, audio []int16, shown bool) bool {
	if !r.on() {
		delete(r.utterances, r.current)
		return false
	}
	r.live = false
	if r.st.Append(last) != nil {
		delete(r.utterances, r.current)
		return false
	}
	if _, err := r.st.Commit(); err != nil {
		delete(r.utterances, r.current)
		return false
	}
	u := r.utterances[r.current]
	u.audio = audio
	u.shown = u.shown || shown
	r.utterances[r.current] = u
	return true
}

func (r *realtime) events() <-chan speech.RealtimeEvent {
	if r.st == nil {
		return nil
	}
	return r.st.Events()
}

// ended: the stream closed, after failing what it still owed; the next
// utterance opens another.
func (r *realtime) ended() {
	if err := r.st.Err(); err != nil {
		r.log.Warn("voice: the streaming recognition session ended", "err", err)
	}
	_ = r.st.Close()
	r.st, r.live = nil, false
}

func (r *realtime) close() {
	if r.st != nil {
		_ = r.st.Close()
	}
}
