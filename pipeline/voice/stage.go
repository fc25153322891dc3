package voice

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/wire"
)

// Config configures a Stage.
type Config struct {
	Recognizer  Recognizer
	Synthesizer Synthesizer
	Endpoint    EndpointConfig
	// MinInterruption is how long the user must speak over the agent to
	// interrupt it, so that a cough or an "mm-hm" does not. Default
	// 500 ms, LiveKit Agents' min_interruption_duration.
	MinInterruption time.Duration
	// InterimEvery is how often an utterance in progress is recognised
	// for interim transcripts. Default 1 s; negative turns them off (a
	// streaming recogniser still sends its partials).
	InterimEvery time.Duration
	// Language is the recogniser's hint; Voice the synthesiser's voice.
	Language, Voice string
	Logger          *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MinInterruption <= 0 {
		c.MinInterruption = 500 * time.Millisecond
	}
	if c.InterimEvery == 0 {
		c.InterimEvery = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Stage is the speech stage of one conversation. Run owns every goroutine
// it starts; the other methods hand work to Run and are safe to call from
// any goroutine.
type Stage struct {
	cfg    Config
	engine Engine
	room   Room
	out    AudioOut
	events chan func(*loop)
	// done is closed when Run returns, so that callers stop waiting on a
	// stage that is gone.
	done chan struct{}
}

// New builds a stage. out may be nil for a conversation without a voice
// track; nothing is then synthesised.
func New(cfg Config, engine Engine, room Room, out AudioOut) *Stage {
	return &Stage{cfg: cfg.withDefaults(), engine: engine, room: room, out: out,
		events: make(chan func(*loop), 64), done: make(chan struct{})}
}

// loop is the state Run's goroutine owns.
type loop struct {
	s     *Stage
	ctx   context.Context
	wg    sync.WaitGroup
	turn  Turn
	play  *playback
	state State
}

// Run serves the stage until ctx ends, then stops what it started.
func (s *Stage) Run(ctx context.Context) {
	defer close(s.done)
	l := &loop{s: s, ctx: ctx}
	l.setState(StateListening)
	defer l.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			if l.play != nil {
				l.play.cancel()
			}
			return
		case ev := <-s.events:
			ev(l)
		}
	}
}

// do runs f on Run's goroutine and waits for it.
func (s *Stage) do(ctx context.Context, f func(*loop)) bool {
	ran := make(chan struct{})
	select {
	case s.events <- func(l *loop) { f(l); close(ran) }:
	case <-s.done:
		return false
	case <-ctx.Done():
		return false
	}
	select {
	case <-ran:
		return true
	case <-s.done:
		return false
	case <-ctx.Done():
		return false
	}
}

func (l *loop) setState(st State) {
	if l.state != st {
		l.state = st
		l.s.room.SetState(l.ctx, st)
	}
}

// State is the agent's state as last published. It is answered by Run's
// goroutine, after everything handed to it before.
func (s *Stage) State(ctx context.Context) State {
	var st State
	s.do(ctx, func(l *loop) { st = l.state })
	return st
}

// Speak speaks the answer of a turn started elsewhere (a typed message),
// replacing any speech in progress.
func (s *Stage) Speak(ctx context.Context, t Turn, segmentID string) {
	s.do(ctx, func(l *loop) { l.startTurn(t, segmentID) })
}

// Stop handles a ControlStop: speech stops the audio at once and keeps
// the generation, generation stops the model and lets what was generated
// be spoken, all does both. It returns once done, so that the caller's
// acknowledgement follows the effect.
func (s *Stage) Stop(ctx context.Context, kind StopKind) bool {
	return s.do(ctx, func(l *loop) { l.stop(kind) })
}

func (l *loop) stop(kind StopKind) {
	if kind != StopGeneration {
		l.hush()
	}
	if l.turn != nil {
		l.turn.Interrupt(kind)
	}
}

// hush stops the answer being spoken, at once, and tells the turn how
// much was heard.
func (l *loop) hush() {
	if l.play == nil {
		return
	}
	h := l.play.interrupt(l.s.out)
	l.play.turn.Heard(h)
	l.play = nil
	l.setState(StateListening)
}

func (l *loop) startTurn(t Turn, segmentID string) {
	if l.play != nil {
		l.play.interrupt(l.s.out)
		l.play = nil
	}
	l.turn = t
	l.setState(StateThinking)
	if l.s.out == nil || !l.s.room.WantsAudio() {
		// No one can hear it: no synthesis at all. The state goes back to
		// listening when the turn ends.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			select {
			case <-t.Done():
			case <-l.ctx.Done():
				return
			}
			l.s.post(func(l *loop) {
				if l.turn == t && l.play == nil {
					l.setState(StateListening)
				}
			})
		}()
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	p := &playback{cancel: cancel, turn: t}
	l.play = p
	done := t.Speaking()
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		defer done()
		defer cancel() // ends the watch below once the answer is spoken
		l.s.speak(ctx, p, segmentID)
	}()
	go func() {
		// A stop of speech the engine received (a client's ControlStop).
		defer l.wg.Done()
		select {
		case <-t.Hushed():
			l.s.post(func(l *loop) {
				if l.play == p {
					l.hush()
				}
			})
		case <-ctx.Done():
		}
	}()
}

// post hands f to Run without waiting; it is dropped once Run is gone.
func (s *Stage) post(f func(*loop)) {
	select {
	case s.events <- f:
	case <-s.done:
	}
}

// playback is one answer being spoken.
type playback struct {
	cancel context.CancelFunc
	turn   Turn

	mu      sync.Mutex
	written time.Duration
	spoken  []spokenSentence
}

type spokenSentence struct {
	text string
	// start and end place its audio from the answer's start; done says
	// its synthesis is complete.
	start, end time.Duration
	done       bool
}

// interrupt clears the queued audio and says how much was heard.
func (p *playback) interrupt(out AudioOut) Heard {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	queued := out.Queued()
	out.Clear()
	played := max(0, p.written-queued)
	h := Heard{Played: played, Total: p.written}
	var full []string
	for _, s := range p.spoken {
		if s.done && s.end <= played {
			full = append(full, s.text)
			continue
		}
		if s.start < played {
			h.Partial = s.text
		}
		break
	}
	h.Text = strings.Join(full, " ")
	return h
}

// speak synthesises the turn's sentences one after another while the
// audio of the earlier ones plays: AudioOut queues and paces, so the
// next sentence is ready before the previous one has played out.
func (s *Stage) speak(ctx context.Context, p *playback, segmentID string) {
	started := false
	for sent := range p.turn.Sentences(ctx) {
		text := Speakable(sent)
		if text == "" {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.spoken = append(p.spoken, spokenSentence{text: text, start: p.written, end: p.written})
		p.mu.Unlock()
		for ev := range s.cfg.Synthesizer.Stream(ctx, &SynthesizeRequest{Text: text, Voice: s.cfg.Voice}) {
			switch ev.Kind {
			case SynthesizeAudio:
				if !started {
					started = true
					s.post(func(l *loop) {
						if l.play == p {
							l.setState(StateSpeaking)
						}
					})
				}
				// Checked under the lock interrupt takes before clearing, so
				// that no audio is queued after a barge-in cleared the queue.
				p.mu.Lock()
				if ctx.Err() != nil {
					p.mu.Unlock()
					return
				}
				err := s.out.Write(ev.Samples, ev.SampleRate)
				p.written += time.Duration(len(ev.Samples)) * time.Second / time.Duration(ev.SampleRate)
				p.spoken[len(p.spoken)-1].end = p.written
				p.mu.Unlock()
				if err != nil {
					s.cfg.Logger.Warn("voice: writing audio failed", "err", err)
					return
				}
			case SynthesizeError:
				if ctx.Err() == nil {
					s.cfg.Logger.Warn("voice: synthesis failed; the sentence is not spoken", "err", ev.Err, "sentence", sent.Seq)
				}
			}
		}
		p.mu.Lock()
		p.spoken[len(p.spoken)-1].done = ctx.Err() == nil
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		s.room.AgentSpeech(ctx, AgentSpeech{SegmentID: segmentID, TrackID: s.out.TrackID(), Text: text})
	}
	if ctx.Err() != nil {
		return
	}
	s.room.AgentSpeech(ctx, AgentSpeech{SegmentID: segmentID, TrackID: s.out.TrackID(), Final: true})
	// Wait for the queue to play out before saying the agent listens.
	for ctx.Err() == nil {
		q := s.out.Queued()
		if q <= 0 {
			break
		}
		select {
		case <-time.After(q):
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		return
	}
	s.post(func(l *loop) {
		if l.play == p {
			l.play = nil
			l.setState(StateListening)
		}
	})
}

// Input is one speaker's audio into the stage, 16 kHz mono.
type Input struct {
	mu     sync.Mutex
	ch     chan []int16
	closed bool
	drops  int
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
	select {
	case in.ch <- append([]int16(nil), samples...):
	default:
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
		close(in.ch)
	}
	return nil
}

// Listen returns the input for a speaker's microphone track. Closing it
// (or Run ending) stops listening.
func (s *Stage) Listen(ctx context.Context, speaker, trackID string) *Input {
	in := &Input{ch: make(chan []int16, 1000)}
	if !s.do(ctx, func(l *loop) {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			s.listen(l.ctx, in, speaker, trackID)
		}()
	}) {
		in.Close()
	}
	return in
}

// listen runs one speaker's endpointer and recognition.
func (s *Stage) listen(ctx context.Context, in *Input, speaker, trackID string) {
	log := s.cfg.Logger.With("speaker", speaker)
	defer func() {
		in.mu.Lock()
		drops := in.drops
		in.mu.Unlock()
		if drops > 0 {
			log.Warn("voice: the stage fell behind a microphone and dropped audio", "chunks", drops)
		}
	}()
	e, err := NewEndpointer(s.cfg.Endpoint)
	if err != nil {
		log.Error("voice: no VAD", "err", err)
		return
	}
	var (
		f          Framer
		id         string
		interrupts bool // this utterance has interrupted already
		sinceInter time.Duration
		interim    = make(chan string, 1)
		inFlight   bool
		wg         sync.WaitGroup
	)
	defer wg.Wait()
	ictx, stopInterims := context.WithCancel(ctx)
	defer stopInterims()
	for {
		select {
		case <-ctx.Done():
			return
		case text := <-interim:
			inFlight = false
			if e.InSpeech() && text != "" {
				e.SetText(text)
				s.room.Transcript(ctx, Transcript{ID: id, Speaker: speaker, TrackID: trackID, Text: text})
			}
		case pcm, ok := <-in.ch:
			if !ok {
				return
			}
			for _, fr := range f.Write(pcm) {
				evs, err := e.Push(fr)
				if err != nil {
					log.Error("voice: VAD failed", "err", err)
					return
				}
				for _, ev := range evs {
					switch ev.Kind {
					case SpeechStarted:
						id, interrupts, sinceInter = wire.NewID("msg"), false, 0
					case SpeechEnded:
						s.finish(ctx, log, ev.Audio, speaker, trackID, id)
						id = ""
					}
				}
				if !e.InSpeech() {
					continue
				}
				if !interrupts && e.Speech() >= s.cfg.MinInterruption {
					interrupts = true
					s.post(func(l *loop) { l.bargeIn() })
				}
				sinceInter += FrameDuration
				if s.cfg.InterimEvery > 0 && sinceInter >= s.cfg.InterimEvery && !inFlight {
					sinceInter, inFlight = 0, true
					audio := e.Utterance()
					wg.Add(1)
					go func() {
						defer wg.Done()
						text, _ := s.recognise(ictx, audio, nil)
						select {
						case interim <- text:
						case <-ictx.Done():
						}
					}()
				}
			}
		}
	}
}

// bargeIn: the user has spoken over the agent long enough.
func (l *loop) bargeIn() {
	if l.play == nil {
		return
	}
	l.s.cfg.Logger.Info("voice: barge-in; the agent stops speaking")
	l.stop(StopAll)
}

// finish recognises a whole utterance; its final transcript starts a turn.
func (s *Stage) finish(ctx context.Context, log *slog.Logger, audio []int16, speaker, trackID, id string) {
	text, err := s.recognise(ctx, audio, func(partial string) {
		s.room.Transcript(ctx, Transcript{ID: id, Speaker: speaker, TrackID: trackID, Text: partial})
	})
	if err != nil {
		log.Warn("voice: recognition failed; the utterance is lost", "err", err)
		return
	}
	if text == "" {
		log.Debug("voice: nothing recognised in an utterance", "seconds", float64(len(audio))/InputRate)
		return
	}
	s.room.Transcript(ctx, Transcript{ID: id, Speaker: speaker, TrackID: trackID, Text: text, Final: true})
	t, err := s.engine.StartTurn(ctx, speaker, id, text)
	if err != nil {
		log.Warn("voice: the engine refused the turn", "err", err)
		return
	}
	s.Speak(ctx, t, AnswerSegment(id))
}

func (s *Stage) recognise(ctx context.Context, audio []int16, partial func(string)) (string, error) {
	for ev := range s.cfg.Recognizer.Stream(ctx, &RecognizeRequest{Audio: audio, SampleRate: InputRate, Language: s.cfg.Language}) {
		switch ev.Kind {
		case RecognizePartial:
			if partial != nil {
				partial(ev.Text)
			}
		case RecognizeFinal:
			return ev.Text, nil
		case RecognizeError:
			return "", ev.Err
		}
	}
	return "", ctx.Err()
}
