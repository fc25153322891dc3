package voice

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/wire"
)

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
// (or Run ending) stops listening. It never waits, so that an SDK
// callback may call it.
func (s *Stage) Listen(speaker, trackID string) *Input {
	in := &Input{ch: make(chan []int16, 1000)}
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

// utterance is one finished utterance on its way to recognition.
type utterance struct {
	id    string
	audio []int16
}

// interim is an interim recognition of the utterance id.
type interim struct{ id, text string }

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
		sinceInter time.Duration
		interims   = make(chan interim, 1)
		inFlight   bool
		wg         sync.WaitGroup
		finished   = queue.New[utterance]()
		ended      = make(chan struct{})
	)
	ictx, stopInterims := context.WithCancel(ctx)
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
		case r := <-interims:
			inFlight = false
			if e.InSpeech() && r.id == id && r.text != "" {
				e.SetText(r.text)
				s.room.Transcript(ctx, Transcript{ID: id, Speaker: speaker, TrackID: trackID, Text: r.text})
				if hasWords(r.text) {
					s.post(func(l *loop) { l.words(r.id) })
				}
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
						uid := id
						s.post(func(l *loop) { l.onset(uid) })
					case SpeechEnded:
						uid, at := id, time.Now().Add(-ev.Trailing)
						finished.Push(utterance{id: uid, audio: ev.Audio}, 0)
						s.post(func(l *loop) { l.speechEnded(uid, at) })
						id = ""
					}
				}
				if !e.InSpeech() {
					continue
				}
				if !interrupts && e.Speech() >= s.cfg.MinInterruption {
					interrupts = true
					uid := id
					s.post(func(l *loop) { l.longSpeech(uid) })
				}
				sinceInter += FrameDuration
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

// finish recognises a whole utterance; its final transcript starts a turn.
func (s *Stage) finish(ctx context.Context, log *slog.Logger, u utterance, speaker, trackID string) {
	text, err := s.recognise(ctx, u.audio, func(partial string) {
		s.room.Transcript(ctx, Transcript{ID: u.id, Speaker: speaker, TrackID: trackID, Text: partial})
	})
	if err != nil {
		// Treated as silence, so that a paused agent resumes.
		log.Warn("voice: recognition failed; the utterance is lost", "err", err)
		text = ""
	}
	var ask bool
	if !s.do(ctx, func(l *loop) { ask = l.recognised(u.id, text) }) || !ask {
		if text == "" && err == nil {
			log.Info("voice: speech with no transcript; no turn", "seconds", float64(len(u.audio))/InputRate)
		}
		return
	}
	s.room.Transcript(ctx, Transcript{ID: u.id, Speaker: speaker, TrackID: trackID, Text: text, Final: true})
	if err := s.asker.Ask(ctx, speaker, u.id, text); err != nil {
		log.Warn("voice: the engine refused the turn", "err", err)
	}
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
