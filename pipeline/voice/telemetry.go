package voice

import (
	"slices"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
)

// The stages the voice stage times in a turn, as metrics and traces name
// them; the model's (pipeline.StageModelFirstToken, StageFirstSentence)
// come from the engine.
const (
	// StageEndpointing: end of speech → the utterance decided over.
	StageEndpointing = "endpointing"
	// StageRecognition: end of speech → the final transcript.
	StageRecognition = "recognition"
	// StageSynthesisFirstByte: the answer's first sentence sent to the
	// synthesiser → its first audio.
	StageSynthesisFirstByte = "synthesis_first_byte"
	// StageFirstAudio: end of speech → the first audio written to the
	// output, the thinking cue's or the answer's (attribute "audio").
	StageFirstAudio = "first_audio"
	// StageFirstAnswerAudio: end of speech → the answer's first audio.
	StageFirstAnswerAudio = "first_answer_audio"
	// StageOwn is Alicia's own share of StageFirstAnswerAudio (ownShare);
	// its span starts at the end of speech and lasts that share.
	StageOwn = "own"
	// StageBargeIn: the onset of speech over the agent → its audio paused
	// or stopped.
	StageBargeIn = "barge_in"
)

// heardAt is when a user's utterance went through the stage, for the
// turn that answers it.
type heardAt struct {
	// speechEnd is the arrival of the last voiced frame; silent the
	// arrival of the audio whose silence ended the utterance, endpointed
	// when the stage got to it and decided (later when the stage is
	// behind its audio); transcript when the final transcript was known.
	speechEnd, silent, endpointed, transcript time.Time
}

// turnTimes is what the stage saw of one turn it spoke.
type turnTimes struct {
	heard heardAt
	model pipeline.Timing
	// toSynth is when the sentence whose audio came first was sent to the
	// synthesiser, firstByte when that audio came.
	toSynth, firstByte time.Time
	// firstAudio is the first write to the output, the cue's if cue;
	// firstAnswer the answer's first.
	firstAudio, firstAnswer time.Time
	cue                     bool
	bargeIns                []pipeline.Timed
	// preemptive: the model began before the end of speech was decided.
	preemptive bool
}

// stages are the turn's voice stages; those that count from the end of
// speech only for a spoken turn.
func (tt turnTimes) stages() []pipeline.Timed {
	var out []pipeline.Timed
	add := func(name string, from, to time.Time, attrs map[string]string) {
		if !from.IsZero() && !to.IsZero() {
			out = append(out, pipeline.Timed{Name: name, Start: from, End: to, Attrs: attrs})
		}
	}
	e := tt.heard.speechEnd
	add(StageEndpointing, e, tt.heard.endpointed, nil)
	add(StageRecognition, e, tt.heard.transcript, nil)
	add(StageSynthesisFirstByte, tt.toSynth, tt.firstByte, nil)
	if !e.IsZero() {
		which := "answer"
		if tt.cue {
			which = "cue"
		}
		add(StageFirstAudio, e, tt.firstAudio, map[string]string{"audio": which})
		add(StageFirstAnswerAudio, e, tt.firstAnswer, map[string]string{"preemptive": strconv.FormatBool(tt.preemptive)})
		if !tt.firstAnswer.IsZero() {
			add(StageOwn, e, e.Add(tt.own()), nil)
		}
	}
	return append(out, tt.bargeIns...)
}

// own is Alicia's own share of the wait from the end of the user's
// speech to the answer's first audio: that wait less the time in it
// spent waiting on someone else, which is the union of
//
//   - the endpointing silence (end of speech → the arrival of the audio
//     that completed it),
//   - the recogniser (end decided → final transcript; with a streaming
//     recogniser that finishes within the silence, nothing),
//   - the model (request sent → its first sentence),
//   - the synthesiser (sentence sent → its first audio),
//
// each clipped to the wait. What is left is the stage's and the engine's
// own doing: the stage catching up with its audio, queues, hand-offs, the
// transcript's and the turn's way to the model and the prompt built for
// it, the sentence's way to the synthesiser, the audio's to the output. It is never negative. The thinking cue does not end the wait:
// it plays at a set time whatever the answer does.
func (tt turnTimes) own() time.Duration {
	e := tt.heard.speechEnd
	asked := tt.model.Requested
	if asked.IsZero() {
		asked = tt.model.Asked
	}
	return ownShare(interval{e, tt.firstAnswer},
		interval{e, tt.heard.silent},
		interval{tt.heard.endpointed, tt.heard.transcript},
		interval{asked, tt.model.FirstSentence},
		interval{tt.toSynth, tt.firstByte})
}

// interval is a stretch of time; one with a zero end is none.
type interval struct{ from, to time.Time }

// ownShare is total's length less the union of waits within it, never
// negative.
func ownShare(total interval, waits ...interval) time.Duration {
	if total.from.IsZero() || total.to.IsZero() || !total.to.After(total.from) {
		return 0
	}
	var in []interval
	for _, w := range waits {
		if w.from.IsZero() || w.to.IsZero() {
			continue
		}
		w.from, w.to = later(w.from, total.from), earlier(w.to, total.to)
		if w.to.After(w.from) {
			in = append(in, w)
		}
	}
	slices.SortFunc(in, func(a, b interval) int { return a.from.Compare(b.from) })
	var waited time.Duration
	var end time.Time // the end of the union so far
	for _, w := range in {
		if w.from.Before(end) {
			w.from = end // the part already counted
		}
		if w.to.After(w.from) {
			waited += w.to.Sub(w.from)
			end = w.to
		}
	}
	return max(0, total.to.Sub(total.from)-waited)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// measured reports the turn p spoke, once its speech is over: its voice
// stages join the model's in the turn's report, and a slow one is
// logged.
func (s *Stage) measured(p *playback) {
	p.mu.Lock()
	tt := p.times
	cut := p.cut
	p.mu.Unlock()
	tt.model = p.turn.Timing()
	if t, ok := p.turn.(interface{ Preemptive() bool }); ok {
		tt.preemptive = t.Preemptive()
	}
	stages := tt.stages()
	s.logSlow(p.turn.UserMessageID(), tt, stages)
	p.report(cut, stages...)
}

// logSlow logs a spoken turn whose answer was first heard more than
// SlowTurn after the end of the user's speech, with each stage. It goes
// by the answer, not the cue: the cue plays at CueAfter whatever the
// answer does, which would hide every slow answer.
func (s *Stage) logSlow(id string, tt turnTimes, stages []pipeline.Timed) {
	e := tt.heard.speechEnd
	if s.cfg.SlowTurn <= 0 || e.IsZero() || tt.firstAnswer.IsZero() || tt.firstAnswer.Sub(e) <= s.cfg.SlowTurn {
		return
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	args := []any{"message", id}
	if m := tt.model; !m.FirstToken.IsZero() {
		args = append(args, pipeline.StageModelFirstToken+"_ms", ms(m.FirstToken.Sub(m.Asked)))
	}
	if m := tt.model; !m.FirstSentence.IsZero() {
		args = append(args, pipeline.StageFirstSentence+"_ms", ms(m.FirstSentence.Sub(m.Asked)))
	}
	for _, st := range stages {
		if st.Name != StageBargeIn {
			args = append(args, st.Name+"_ms", ms(st.End.Sub(st.Start)))
		}
	}
	args = append(args, "preemptive", tt.preemptive)
	s.cfg.Logger.Warn("slow voice turn", args...)
}

// bargedIn records speech over the agent, its voice begun at onset,
// that has just paused or stopped its audio.
func (p *playback) bargedIn(onset time.Time) {
	if onset.IsZero() {
		return
	}
	now := time.Now()
	p.mu.Lock()
	p.times.bargeIns = append(p.times.bargeIns, pipeline.Timed{Name: StageBargeIn, Start: onset, End: now})
	p.mu.Unlock()
}
