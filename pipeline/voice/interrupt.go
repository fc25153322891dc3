package voice

import (
	"strings"
	"time"
	"unicode"

	"github.com/alicia-voice/alicia/wire"
)

// Talk over the agent is decided in two steps, as people do: the onset
// of speech pauses the agent's audio at once (nothing is lost: the queue
// is held and the model goes on), and words decide the rest. It becomes
// an interruption when it yields a word that is not a backchannel, or
// when it lasts MinInterruption, longer than any backchannel. A laugh,
// an "mm-hm", an "okay right" or the television does neither, and the
// agent picks up where it paused. Only speech pauses it: a sound the
// endpointer has not confirmed as speech (no pitch, and shorter than a
// whisper: a cough, a click, a door) leaves the agent speaking, so that
// it leaves no gap, and a word that starts with "s" or "st" pauses it
// when its vowel comes. Each step runs on Run's goroutine, reported by
// the speaker's listener (hearing).

// talk is an utterance begun over the agent's answer, kept until its
// transcript is judged: a transcript that comes after the agent resumed,
// or after the answer ended, is still of talk over the answer, and a
// listener's "uh-huh" is never a turn however slow its recogniser.
type talk struct {
	// play is the answer it began over; at its voice's onset.
	play *playback
	at   time.Time
	// resumed: FalseInterruption ended its pause before its transcript
	// came.
	resumed bool
	// speech: it was confirmed as speech, not noise.
	speech bool
}

// onset: a speaker's utterance id began, its voice at at. Over the
// agent, it is noted as talk over it, which pauses it once confirmed as
// speech.
func (l *loop) onset(speaker, id string, at time.Time) {
	// Only the speaker who asked adds to the question: another's onset
	// must not take the slot of an addition the asker may be making.
	if l.asked.id != "" && l.asked.speaker == speaker && l.thinkingAbout(l.asked.id) {
		l.addsTo = id
	}
	if l.play == nil {
		return
	}
	if len(l.over) >= 16 {
		clear(l.over) // transcripts that never came
	}
	l.over[id] = talk{play: l.play, at: at}
}

// confirmed: the utterance id is speech, not noise; if it is talk over
// the agent, the agent pauses now. The barge-in is timed from its onset,
// so that the wait for its pitch is counted too.
func (l *loop) confirmed(id string) {
	t, ok := l.over[id]
	if l.play == nil || !ok || t.play != l.play {
		return
	}
	t.speech = true
	l.over[id] = t
	if l.warmingUp() {
		return
	}
	if l.paused == "" {
		l.s.out.Pause()
		l.play.bargedIn(t.at)
	}
	// The pause is the latest talk's: the agent resumes no sooner than
	// FalseInterruption after the end of the last voice over it.
	l.paused = id
	l.stopResume()
}

// longSpeech: the utterance has lasted MinInterruption. While the echo
// canceller may still be settling, duration proves nothing.
func (l *loop) longSpeech(id string) {
	if !l.warmingUp() {
		l.interrupt(id)
	}
}

// words: the utterance was recognised (interim or final) to hold words.
func (l *loop) words(id string) { l.interrupt(id) }

// interrupt stops the agent for good, audio and generation, if id is
// talk over the answer it is speaking.
func (l *loop) interrupt(id string) {
	t, ok := l.over[id]
	if l.play == nil || !ok || t.play != l.play {
		return
	}
	if t.resumed {
		// A recogniser slower than FalseInterruption: the words were
		// said over the agent all the same, and the log tells how often.
		l.s.cfg.Logger.Info("voice: barge-in heard after the agent resumed; it stops speaking")
	} else {
		l.s.cfg.Logger.Info("voice: barge-in; the agent stops speaking")
	}
	l.s.cfg.Observer.Interrupted()
	if l.paused == "" && !t.resumed {
		// Not paused (the echo warm-up, or a whisper's words before it
		// was confirmed as speech): the agent goes quiet now. A talk that
		// paused it was timed then: the stage is how fast the agent fell
		// silent, not how slow a recogniser was.
		l.play.bargedIn(t.at)
	}
	l.stop(wire.StopAll)
}

// speechEnded: the utterance's voice ended; if it paused the agent,
// the agent resumes unless a word comes within FalseInterruption.
func (l *loop) speechEnded(id string, heard heardAt) {
	if len(l.ended) >= 16 {
		clear(l.ended) // utterances that never became turns
	}
	l.ended[id] = heard
	if t, ok := l.over[id]; ok && !t.speech {
		l.s.cfg.Logger.Debug("voice: a sound over the agent was not speech; it did not pause")
		l.s.cfg.Observer.NoiseIgnored()
	}
	if l.paused != id {
		return
	}
	l.stopResume()
	l.resume = time.AfterFunc(l.s.cfg.FalseInterruption, func() {
		l.s.post(func(l *loop) {
			if l.paused != id {
				return
			}
			l.falseInterruption("")
			if t, ok := l.over[id]; ok {
				t.resumed = true
				l.over[id] = t
			}
		})
	})
}

// question is what a speaker asks: a message id and its text.
type question struct{ id, speaker, text string }

// recognised takes an utterance's final transcript and says what it asks,
// if anything. Talk over the agent with no words in it is not a turn,
// whenever its transcript comes: the agent resumes at once, without
// waiting out FalseInterruption, and one that resumed already goes on.
// Words in it are a turn, and interrupt the answer they were said over
// even after FalseInterruption resumed it (a recogniser slower than the
// timer): the user did talk over the agent, and an answer that played on
// over their question would be cut by its turn anyway. LiveKit Agents
// does the same: a final transcript pauses the resumed answer again, and
// the reply to it cuts it.
// A speaker who adds to the question while its answer is still being
// thought ("…in Paris, I mean") asks the whole question again under the
// same message, so that the turn thinking about half of it is superseded
// instead of both being answered.
func (l *loop) recognised(id, speaker, text string, at time.Time) question {
	t, over := l.over[id]
	heard, ok := l.ended[id]
	if ok {
		heard.transcript = at
		l.ended[id] = heard
	}
	if text == "" {
		l.s.cfg.Observer.Unrecognised()
	}
	switch {
	case over && !hasWords(text):
		delete(l.over, id)
		switch {
		case l.paused == id:
			l.falseInterruption(text)
		case t.resumed && text != "":
			l.s.cfg.Logger.Info("voice: a backchannel's transcript came after the agent resumed; no turn", "transcript", text)
		}
		return question{}
	case text == "":
		return question{}
	}
	q := question{id: id, speaker: speaker, text: text}
	if last := l.asked; l.addsTo == id && last.speaker == speaker {
		q.id, q.text = last.id, last.text+" "+text
		if ok {
			// The whole question ended with this utterance.
			delete(l.ended, id)
			l.ended[q.id] = heard
		}
	}
	if over {
		l.interrupt(id)
		delete(l.over, id)
	}
	l.asked = q
	return q
}

// thinkingAbout: the running turn answers message id and nothing of its
// answer has been heard yet. It is asked when the next utterance begins:
// by the time that one is recognised, its length may have stopped the
// turn already.
func (l *loop) thinkingAbout(id string) bool {
	if l.turn == nil || l.turn.UserMessageID() != id || l.voiced == l.turn {
		return false
	}
	select {
	case <-l.turn.Done():
		return false
	default:
		return true
	}
}

// falseInterruption resumes the agent; heard is the talk's transcript,
// if it was recognised before the agent resumed. A transcript of
// backchannels only tells nothing of what the user said, so it is
// logged: it tells a recognised "mm-hm" from a sound the recogniser
// heard nothing in, and shows which spellings a recogniser uses.
func (l *loop) falseInterruption(heard string) {
	if heard == "" {
		l.s.cfg.Logger.Info("voice: talk over the agent held no words; it resumes")
	} else {
		l.s.cfg.Logger.Info("voice: talk over the agent was only a backchannel; it resumes", "transcript", heard)
	}
	l.s.cfg.Observer.FalseInterruption()
	l.paused = ""
	l.stopResume()
	l.s.out.Resume()
}

func (l *loop) stopResume() {
	if l.resume != nil {
		l.resume.Stop()
		l.resume = nil
	}
}

// warmingUp: the agent's speech began less than EchoWarmup ago.
func (l *loop) warmingUp() bool {
	return l.s.cfg.EchoWarmup > 0 && !l.spoke.IsZero() && time.Since(l.spoke) < l.s.cfg.EchoWarmup
}

// backchannels are what listeners say to show they follow, not to take
// the turn; recognisers write them many ways.
var backchannels = map[string]bool{
	"mm": true, "mmm": true, "mhm": true, "mmhm": true, "mmhmm": true, "hm": true, "hmm": true,
	"uh": true, "uhhuh": true, "um": true, "umm": true, "ah": true, "oh": true, "huh": true, "er": true,
	"okay": true, "ok": true, "right": true, "yeah": true, "yep": true, "aha": true,
	"ha": true, "haha": true, "hahaha": true, "hehe": true,
}

// hasWords reports whether a transcript holds anything but backchannels.
func hasWords(text string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return unicode.IsSpace(r) || r == ',' || r == '.' || r == '!' || r == '?' }) {
		w = strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) {
				return r
			}
			return -1
		}, w)
		if w != "" && !backchannels[w] {
			return true
		}
	}
	return false
}
