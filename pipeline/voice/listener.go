package voice

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/pipeline/voice/echo"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/wire"
)

// listener is one speaker's ear. It runs the speaker's endpointer over
// their audio, has what they say recognised (interim transcripts, a
// guess in a pause for a preemptive turn, the final transcript) and
// reports each event of an utterance to the stage through hearing. One
// goroutine owns it; recognitions run beside it, so that a recogniser's
// round trip never delays the detection of the next utterance, nor of a
// barge-in.
type listener struct {
	s                *Stage
	hear             hearing
	log              *slog.Logger
	speaker, trackID string
	// ctx ends the listener; ictx, the recognitions of utterances still
	// under way, when the listener returns.
	ctx, ictx context.Context
	// ear hears the speaker's audio, the agent's echo taken out of it,
	// through the endpointer e.
	ear *ear
	e   *Endpointer
	rt  *realtime
	pre Preempter
	// wg holds every goroutine the listener starts.
	wg sync.WaitGroup
	// finished are the utterances on their way to a final transcript,
	// in the order they were spoken.
	finished *queue.Queue[utterance]

	cur current
	// interims and guesses bring recognitions of the utterance so far
	// back; inFlight and guessing say one is under way, whichever
	// utterance it was of.
	interims chan interim
	guesses  chan guess
	inFlight bool
	guessing bool
}

// current is the utterance under way, and what the listener did with it
// so far.
type current struct {
	id string
	// interrupts: it was reported as long speech; shown: an interim
	// transcript of it went out; sinceInterim is its speech since the
	// last interim recognition began.
	interrupts   bool
	shown        bool
	sinceInterim time.Duration
	// guessedAt is its speech when it was last guessed at; preempted is
	// set when that guess started a held turn.
	guessedAt time.Duration
	preempted string
}

// listen runs one speaker's listener until ctx ends or the input closes;
// what was finished by then is still recognised.
func (s *Stage) listen(ctx context.Context, in *Input, speaker, trackID string) {
	log := s.cfg.Logger.With("speaker", speaker)
	defer in.reportDrops(log)
	e, err := NewEndpointer(s.cfg.Endpoint)
	if err != nil {
		log.Error("voice: no VAD", "err", err)
		return
	}
	ictx, stopInterims := context.WithCancel(ctx)
	l := &listener{s: s, hear: loopHearing{s}, log: log, speaker: speaker, trackID: trackID,
		ctx: ctx, ictx: ictx, e: e, rt: s.realtime(ctx, log), pre: s.preempter(),
		finished: queue.New[utterance](), interims: make(chan interim, 1), guesses: make(chan guess, 1)}
	suppressor := echo.NewSuppressor(s.sent, echo.Config{MinSound: s.cfg.Endpoint.MinSpeech})
	l.ear = newEar(suppressor, e)
	defer l.rt.close()
	defer suppressor.Close()
	ended := make(chan struct{})
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.recognition(ended)
	}()
	defer l.wg.Wait()
	defer close(ended) // what was finished is still recognised
	defer stopInterims()
	l.run(in)
}

// reportDrops logs the audio Write dropped, if any.
func (in *Input) reportDrops(log *slog.Logger) {
	in.mu.Lock()
	drops := in.drops
	in.mu.Unlock()
	if drops > 0 {
		log.Warn("voice: the stage fell behind a microphone and dropped audio", "chunks", drops)
	}
}

// run takes each event source in turn: the speaker's audio, the
// streaming recogniser's transcripts, and the recognitions of the
// utterance so far.
func (l *listener) run(in *Input) {
	for {
		select {
		case <-l.ctx.Done():
			return
		case ev, ok := <-l.rt.events():
			l.onStreamed(ev, ok)
		case g := <-l.guesses:
			l.onGuess(g)
		case r := <-l.interims:
			l.onInterim(r)
		case <-in.chunks.Ready():
			if !l.onChunks(in) {
				return
			}
		case <-in.ended:
			l.onChunks(in)
			return
		}
	}
}

// onChunks takes in all the audio waiting; false if the VAD failed.
func (l *listener) onChunks(in *Input) bool {
	for _, c := range in.chunks.Take() {
		if !l.onAudio(c) {
			return false
		}
	}
	return true
}

// onAudio runs the endpointer over a chunk of the speaker's audio, the
// agent's echo taken out; false if the VAD failed. The suppressor
// decides what is echo, so it is what counts the echo rejected.
func (l *listener) onAudio(c chunk) bool {
	rejected, pathChanged, err := l.ear.hear(c.pcm, c.at, l.onFrame)
	if rejected {
		l.s.cfg.Observer.EchoRejected()
	}
	if pathChanged {
		// Rare, and what decides whether the agent's echo gets through.
		l.log.Debug("voice: the echo path changed", "echo", l.ear)
	}
	if err != nil {
		l.log.Error("voice: VAD failed", "err", err)
		return false
	}
	return true
}

// onFrame takes a frame of the speaker's audio, which came at at, and the
// events it completed.
func (l *listener) onFrame(fr []int16, evs []EndpointEvent, at time.Time) {
	plain := true
	for _, ev := range evs {
		switch ev.Kind {
		case SpeechStarted:
			l.speechStarted(ev, at)
			plain = false
		case SpeechConfirmed:
			l.speechConfirmed(ev)
		case SpeechEnded:
			l.speechEnded(ev, at, fr)
			plain = false
		}
	}
	if l.e.InSpeech() {
		l.inSpeech(fr, plain)
	}
}

// speechStarted: an utterance began in the chunk that came at at.
func (l *listener) speechStarted(ev EndpointEvent, at time.Time) {
	l.cur = current{id: wire.NewID("msg")}
	id := l.cur.id
	l.log.Debug("voice: speech began", "message", id)
	l.hear.startOfSpeech(l.speaker, id, at.Add(-ev.Onset))
	l.rt.start(id, l.e.Utterance())
}

// speechConfirmed: the utterance under way is speech. Speech heard
// while the agent's echo may be on the microphone pauses the agent, and
// is the echo itself when the suppressor missed it: what the suppressor
// knew then is what tells the two apart afterwards, so it is logged at
// info level, once per utterance over the agent.
func (l *listener) speechConfirmed(ev EndpointEvent) {
	level := slog.LevelDebug
	if l.ear.s.Echoing() {
		level = slog.LevelInfo
	}
	l.log.Log(l.ctx, level, "voice: the sound is speech", "message", l.cur.id, "after", ev.Speech, "echo", l.ear)
	l.hear.speechConfirmed(l.cur.id)
}

// speechEnded: the utterance ended with frame last, in the chunk that
// came at at; it goes to its final recognition.
func (l *listener) speechEnded(ev EndpointEvent, at time.Time, last []int16) {
	id := l.cur.id
	heard := heardAt{speechEnd: at.Add(-ev.Trailing), silent: at, endpointed: time.Now()}
	l.log.Debug("voice: speech ended", "message", id, "seconds", float64(len(ev.Audio))/InputRate)
	// Reported first, so that the stage knows of the end before the
	// transcript.
	l.hear.endOfSpeech(id, heard)
	if !l.rt.commit(last, ev.Audio, l.cur.shown) {
		l.finished.Push(utterance{id: id, audio: ev.Audio, shown: l.cur.shown}, 0)
	}
	l.cur.id = ""
}

// inSpeech takes a frame of the utterance under way; plain: it began or
// ended nothing.
func (l *listener) inSpeech(fr []int16, plain bool) {
	if plain {
		l.rt.append(fr)
	}
	if !l.cur.interrupts && l.e.Speech() >= l.s.cfg.MinInterruption {
		l.cur.interrupts = true
		l.hear.longSpeech(l.cur.id)
	}
	if l.pre != nil {
		l.guess()
	}
	l.cur.sinceInterim += FrameDuration
	if l.rt.on() {
		return // the server sends its own interim transcripts
	}
	l.interim()
}

// guess has the utterance so far recognised when the speaker pauses, for
// a turn that starts held (preemptPause), and withdraws a held turn when
// the speaker goes on.
func (l *listener) guess() {
	speech := l.e.Speech()
	if l.cur.preempted != "" && speech != l.cur.guessedAt {
		// The speaker went on after the pause: the held turn answers
		// words that are no longer the question.
		l.log.Debug("voice: the speaker went on; the held turn goes", "message", l.cur.preempted)
		l.pre.Withdraw(l.cur.preempted)
		l.cur.preempted = ""
	}
	if l.guessing || l.e.Trailing() < preemptPause || speech == l.cur.guessedAt {
		return
	}
	l.guessing, l.cur.guessedAt = true, speech
	id := l.cur.id
	l.soFar(func(text string, err error) {
		if err != nil {
			text = ""
		}
		send(l.ictx, l.guesses, guess{id, speech, text})
	})
}

// interim has the utterance so far recognised every InterimEvery of its
// speech, one recognition at a time.
func (l *listener) interim() {
	every := l.s.cfg.InterimEvery
	if every <= 0 || l.cur.sinceInterim < every || l.inFlight {
		return
	}
	l.cur.sinceInterim, l.inFlight = 0, true
	id := l.cur.id
	l.soFar(func(text string, _ error) {
		send(l.ictx, l.interims, interim{id, text})
	})
}

// soFar recognises the utterance's audio so far beside the listener and
// hands the result to back.
func (l *listener) soFar(back func(text string, err error)) {
	audio := l.e.Utterance()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		back(l.s.recognise(l.ictx, audio, nil))
	}()
}

// send hands v to ch unless ctx ends first.
func send[T any](ctx context.Context, ch chan<- T, v T) {
	select {
	case ch <- v:
	case <-ctx.Done():
	}
}

// onGuess: if the speaker is still in the pause the guess was made in,
// and it holds words, the turn it asks starts, held. It is not waited
// for, so that the conversation's queue never holds up the VAD; a held
// turn that comes after its final transcript was asked is refused.
func (l *listener) onGuess(g guess) {
	l.guessing = false
	if !l.e.InSpeech() || g.id != l.cur.id || l.e.Speech() != g.speech || !hasWords(g.text) {
		return
	}
	l.cur.preempted = g.id
	l.log.Debug("voice: a turn starts, held, in the speaker's pause", "message", g.id, "guess", g.text)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.pre.Preempt(l.ctx, l.speaker, g.id, g.text)
	}()
}

// onInterim shows an interim transcript of the utterance still under
// way, and lets the endpointer wait longer if it looks unfinished.
func (l *listener) onInterim(r interim) {
	l.inFlight = false
	if !l.e.InSpeech() || r.id != l.cur.id || r.text == "" {
		return
	}
	l.e.SetText(r.text)
	l.transcript(Transcript{ID: r.id, Text: r.text})
	l.cur.shown = true
	l.hear.interimTranscript(r.id, r.text)
}

// onStreamed takes an event of the streaming recogniser; !ok: its
// stream closed.
func (l *listener) onStreamed(ev speech.RealtimeEvent, ok bool) {
	if !ok {
		l.rt.ended()
		return
	}
	u, known := l.rt.utterances[ev.Utterance]
	if !known {
		return
	}
	switch ev.Kind {
	case speech.RecognizePartial:
		l.transcript(Transcript{ID: u.id, Text: ev.Text})
		u.shown = true
		l.rt.utterances[ev.Utterance] = u
		if u.id == l.cur.id {
			l.e.SetText(ev.Text)
		}
		l.hear.interimTranscript(u.id, ev.Text)
	case speech.RecognizeFinal:
		delete(l.rt.utterances, ev.Utterance)
		text := ev.Text
		// The audio goes along for the log of an utterance with no words,
		// which says how long it was.
		l.finished.Push(utterance{id: u.id, audio: u.audio, text: &text, recognised: time.Now(), shown: u.shown}, 0)
	case speech.RecognizeError:
		// Recognised over HTTP instead, from the audio kept for it.
		delete(l.rt.utterances, ev.Utterance)
		l.log.Warn("voice: streaming recognition failed; the utterance is uploaded instead", "err", ev.Err)
		l.finished.Push(u, 0)
	}
}

// transcript sends the speaker's transcript t to the room.
func (l *listener) transcript(t Transcript) {
	t.Speaker, t.TrackID = l.speaker, l.trackID
	l.s.room.Transcript(l.ctx, t)
}
