package voice

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/wire"
)

// Input is one speaker's audio into the stage, 16 kHz mono.
type Input struct {
	mu     sync.Mutex
	ch     chan chunk
	closed bool
	drops  int
}

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
	select {
	case in.ch <- chunk{append([]int16(nil), samples...), time.Now()}:
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
// (or Run ending) stops listening. It never waits, so that an SDK
// callback may call it.
func (s *Stage) Listen(speaker, trackID string) *Input {
	in := &Input{ch: make(chan chunk, 1000)}
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

// listen runs one speaker's endpointer. It hands each finished
// utterance to the speaker's recognition and goes on listening at once:
// a recogniser's round trip must not delay the detection of the next
// utterance, nor of a barge-in.
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
		shown      bool // an interim transcript of it went out
		sinceInter time.Duration
		interims   = make(chan interim, 1)
		inFlight   bool
		wg         sync.WaitGroup
		finished   = queue.New[utterance]()
		ended      = make(chan struct{})
		pre        = s.preempter()
		guesses    = make(chan guess, 1)
		guessing   bool
		// guessedAt is the utterance's speech when it was last guessed
		// at; preempted the utterance whose guess started a held turn.
		guessedAt time.Duration
		preempted string
	)
	ictx, stopInterims := context.WithCancel(ctx)
	rt := s.realtime(ctx, log)
	defer rt.close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.recognition(ctx, log, finished, ended, speaker, trackID)
	}()
	defer wg.Wait()
	defer close(ended) // what was finished is still recognised
	defer stopInterims()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-rt.events():
			if !ok {
				rt.ended()
				continue
			}
			u, known := rt.utterances[ev.Utterance]
			if !known {
				continue
			}
			switch ev.Kind {
			case speech.RecognizePartial:
				s.room.Transcript(ctx, Transcript{ID: u.id, Speaker: speaker, TrackID: trackID, Text: ev.Text})
				u.shown = true
				rt.utterances[ev.Utterance] = u
				if u.id == id {
					e.SetText(ev.Text)
				}
				if hasWords(ev.Text) {
					s.post(func(l *loop) { l.words(u.id) })
				}
			case speech.RecognizeFinal:
				delete(rt.utterances, ev.Utterance)
				text := ev.Text
				finished.Push(utterance{id: u.id, text: &text, recognised: time.Now(), shown: u.shown}, 0)
			case speech.RecognizeError:
				// Recognised over HTTP instead, from the audio kept for it.
				delete(rt.utterances, ev.Utterance)
				log.Warn("voice: streaming recognition failed; the utterance is uploaded instead", "err", ev.Err)
				finished.Push(u, 0)
			}
		case g := <-guesses:
			guessing = false
			if e.InSpeech() && g.id == id && e.Speech() == g.speech && hasWords(g.text) {
				// Still the same pause: the turn may start, held. Not
				// waited for here, so that the conversation's queue never
				// holds up the VAD; a held turn that comes after its final
				// transcript was asked is refused.
				preempted = id
				log.Debug("voice: a turn starts, held, in the speaker's pause", "message", id, "guess", g.text)
				wg.Add(1)
				go func() {
					defer wg.Done()
					pre.Preempt(ctx, speaker, g.id, g.text)
				}()
			}
		case r := <-interims:
			inFlight = false
			if e.InSpeech() && r.id == id && r.text != "" {
				e.SetText(r.text)
				s.room.Transcript(ctx, Transcript{ID: id, Speaker: speaker, TrackID: trackID, Text: r.text})
				shown = true
				if hasWords(r.text) {
					s.post(func(l *loop) { l.words(r.id) })
				}
			}
		case c, ok := <-in.ch:
			if !ok {
				return
			}
			for _, fr := range f.Write(c.pcm) {
				evs, err := e.Push(fr)
				if err != nil {
					log.Error("voice: VAD failed", "err", err)
					return
				}
				for _, ev := range evs {
					switch ev.Kind {
					case SpeechStarted:
						id, interrupts, shown, sinceInter = wire.NewID("msg"), false, false, 0
						guessedAt, preempted = 0, ""
						uid, at := id, c.at.Add(-ev.Speech)
						log.Debug("voice: speech began", "message", uid)
						s.post(func(l *loop) { l.onset(speaker, uid, at) })
						rt.start(uid, e.Utterance())
					case SpeechEnded:
						uid, heard := id, heardAt{speechEnd: c.at.Add(-ev.Trailing), silent: c.at, endpointed: time.Now()}
						log.Debug("voice: speech ended", "message", uid, "seconds", float64(len(ev.Audio))/InputRate)
						// Posted first, so that the loop knows of the end
						// before the transcript.
						s.post(func(l *loop) { l.speechEnded(uid, heard) })
						if !rt.commit(fr, ev.Audio, shown) {
							finished.Push(utterance{id: uid, audio: ev.Audio, shown: shown}, 0)
						}
						id = ""
					}
				}
				if !e.InSpeech() {
					continue
				}
				if len(evs) == 0 {
					rt.append(fr)
				}
				if !interrupts && e.Speech() >= s.cfg.MinInterruption {
					interrupts = true
					uid := id
					s.post(func(l *loop) { l.longSpeech(uid) })
				}
				if pre != nil {
					if preempted != "" && e.Speech() != guessedAt {
						// The speaker went on after the pause: the held turn
						// answers words that are no longer the question.
						log.Debug("voice: the speaker went on; the held turn goes", "message", preempted)
						pre.Withdraw(preempted)
						preempted = ""
					}
					if !guessing && e.Trailing() >= preemptPause && e.Speech() != guessedAt {
						guessing, guessedAt = true, e.Speech()
						audio, uid, at := e.Utterance(), id, e.Speech()
						wg.Add(1)
						go func() {
							defer wg.Done()
							text, err := s.recognise(ictx, audio, nil)
							if err != nil {
								text = ""
							}
							select {
							case guesses <- guess{uid, at, text}:
							case <-ictx.Done():
							}
						}()
					}
				}
				sinceInter += FrameDuration
				if rt.on() {
					continue // the server sends its own interim transcripts
				}
				if s.cfg.InterimEvery > 0 && sinceInter >= s.cfg.InterimEvery && !inFlight {
					sinceInter, inFlight = 0, true
					audio, uid := e.Utterance(), id
					wg.Add(1)
					go func() {
						defer wg.Done()
						text, _ := s.recognise(ictx, audio, nil)
						select {
						case interims <- interim{uid, text}:
						case <-ictx.Done():
						}
					}()
				}
			}
		}
	}
}

// recognition recognises one speaker's finished utterances in the order
// they were spoken, until ended, then what is left.
func (s *Stage) recognition(ctx context.Context, log *slog.Logger, finished *queue.Queue[utterance], ended <-chan struct{}, speaker, trackID string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-finished.Ready():
		case <-ended:
			for _, u := range finished.Take() {
				s.finish(ctx, log, u, speaker, trackID)
			}
			return
		}
		for _, u := range finished.Take() {
			s.finish(ctx, log, u, speaker, trackID)
		}
	}
}

// finish recognises a whole utterance, unless a streaming recogniser did;
// its final transcript starts a turn.
func (s *Stage) finish(ctx context.Context, log *slog.Logger, u utterance, speaker, trackID string) {
	var text string
	var err error
	at := u.recognised
	if u.text != nil {
		text = *u.text
	} else {
		text, err = s.recognise(ctx, u.audio, func(partial string) {
			s.room.Transcript(ctx, Transcript{ID: u.id, Speaker: speaker, TrackID: trackID, Text: partial})
			u.shown = true
		})
		at = time.Now()
	}
	if err != nil {
		// Treated as silence, so that a paused agent resumes.
		log.Warn("voice: recognition failed; the utterance is lost", "err", err)
		s.speechFailed(ctx, "stt", err)
		text = ""
	}
	var q question
	if pre := s.preempter(); pre != nil {
		defer func() {
			if q.id != u.id {
				// No turn asks this utterance as it is: a held turn
				// guessed from it goes.
				pre.Withdraw(u.id)
			}
		}()
	}
	log.Debug("voice: final transcript", "message", u.id, "text", text)
	judged := s.do(ctx, func(l *loop) { q = l.recognised(u.id, speaker, text, at) })
	if !judged || q.id == "" {
		if judged && u.shown {
			// What a client shows of it goes, and is not made final: a
			// final transcript is the user's turn.
			s.room.Transcript(ctx, Transcript{ID: u.id, Speaker: speaker, TrackID: trackID})
		}
		if text == "" && err == nil {
			log.Info("voice: speech with no transcript; no turn", "seconds", float64(len(u.audio))/InputRate)
		}
		return
	}
	if q.id != u.id && u.shown {
		// The utterance added to the question asked before it: what a
		// client shows of it goes, not made final (a final transcript is
		// a turn), and the question's transcript shows it whole.
		s.room.Transcript(ctx, Transcript{ID: u.id, Speaker: speaker, TrackID: trackID})
	}
	s.room.Transcript(ctx, Transcript{ID: q.id, Speaker: speaker, TrackID: trackID, Text: q.text, Final: true})
	log.Debug("voice: the turn is asked", "message", q.id)
	if err := s.asker.Ask(ctx, speaker, q.id, q.text); err != nil {
		log.Warn("voice: the engine refused the turn", "err", err)
	}
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
