package voice

import (
	"math"
	"time"
)

// recognition recognises the speaker's finished utterances in the order
// they were spoken, until ended, then what is left.
func (l *listener) recognition(ended <-chan struct{}) {
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.finished.Ready():
		case <-ended:
			l.finishAll()
			return
		}
		l.finishAll()
	}
}

func (l *listener) finishAll() {
	for _, u := range l.finished.Take() {
		l.finish(u)
	}
}

// finish takes an utterance's final transcript to the stage, which says
// what it asks; that question starts a turn.
func (l *listener) finish(u utterance) {
	text, at, err := l.finalText(&u)
	if err != nil {
		// Treated as silence, so that a paused agent resumes.
		l.log.Warn("voice: recognition failed; the utterance is lost", "err", err)
		l.s.speechFailed(l.ctx, "stt", err)
		text = ""
	}
	var q question
	if l.pre != nil {
		defer func() {
			if q.id != u.id {
				// No turn asks this utterance as it is: a held turn
				// guessed from it goes.
				l.pre.Withdraw(u.id)
			}
		}()
	}
	l.log.Debug("voice: final transcript", "message", u.id, "text", text)
	q, judged := l.hear.finalTranscript(l.ctx, u.id, l.speaker, text, at)
	if !judged || q.id == "" {
		if judged && u.shown {
			// What a client shows of it goes, and is not made final: a
			// final transcript is the user's turn.
			l.transcript(Transcript{ID: u.id})
		}
		if text == "" && err == nil {
			// Its loudest frame tells a recogniser's miss from audio that
			// reached it quiet (taken out, or cut).
			l.log.Info("voice: speech with no transcript; no turn", "seconds", float64(len(u.audio))/InputRate,
				"loudest_dbfs", math.Round(dbfs(loudestFrame(u.audio))))
		}
		return
	}
	l.ask(u, q)
}

// finalText is the utterance's final transcript, and when it was known:
// the streaming recogniser's, or the whole utterance recognised now.
func (l *listener) finalText(u *utterance) (string, time.Time, error) {
	if u.text != nil {
		return *u.text, u.recognised, nil
	}
	text, err := l.s.recognise(l.ctx, u.audio, func(partial string) {
		l.transcript(Transcript{ID: u.id, Text: partial})
		u.shown = true
	})
	return text, time.Now(), err
}

// ask shows the question q as the speaker's final transcript and asks
// it; u is the utterance that ended it.
func (l *listener) ask(u utterance, q question) {
	if q.id != u.id && u.shown {
		// The utterance added to the question asked before it: what a
		// client shows of it goes, not made final (a final transcript is
		// a turn), and the question's transcript shows it whole.
		l.transcript(Transcript{ID: u.id})
	}
	l.transcript(Transcript{ID: q.id, Text: q.text, Final: true})
	l.log.Debug("voice: the turn is asked", "message", q.id)
	if err := l.s.asker.Ask(l.ctx, l.speaker, q.id, q.text); err != nil {
		l.log.Warn("voice: the engine refused the turn", "err", err)
	}
}

// loudestFrame is the RMS level of the loudest frame of pcm.
func loudestFrame(pcm []int16) float64 {
	var loudest float64
	for i := 0; i < len(pcm); i += FrameSamples {
		loudest = max(loudest, rms(pcm[i:min(i+FrameSamples, len(pcm))]))
	}
	return loudest
}
