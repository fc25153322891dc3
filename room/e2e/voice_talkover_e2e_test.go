package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/wire"
)

// Backchannels of 300, 600 and 900 ms ("mm-hmm", "uh-huh", "okay" and
// "right", each at each length) over one answer, over a real
// livekit-server, with the stage's defaults: each pauses the bot at its
// onset and the bot resumes where it paused (a false interruption), or
// does not pause it at all (noise). None stops it, starts a turn or
// leaves a message; the answer is stored complete and was heard whole at
// the client (its audio, recognised, is the stored text).
func TestBackchannelsOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	c := newTalkOverClient(t, lk, talkOverSetup{conv: "conv_backchannels", answer: answerAtLength(3),
		phrases: append(slices.Clone(backchannelPhrases), otherQuestions...)})
	sounds := backchannels(t)
	id, asked := c.ask(storyQuestion)
	// Three seconds into the answer: past the echo warm-up of a first
	// answer, if the stage has one, in which nothing pauses it.
	c.rec.waitMidVoice(t, asked, 150, "the answer")
	paused := 0
	for _, b := range sounds {
		_, end := c.feed.say(t.Context(), t, b.pcm)
		outcome, at := c.obs.decision(t.Context(), t, []string{"false_interruption", "noise"})
		if outcome == "false_interruption" {
			paused++
			// The stage logged what it resumed on before it told the
			// Observer.
			heard := c.resumes.transcripts()
			at = c.rec.waitLoud(t, at, 1, "the bot's voice resumed")
			t.Logf("%s: the bot paused, heard %q, and was heard again %v after the end", b, heard[len(heard)-1], at.Sub(end).Round(time.Millisecond))
		} else {
			t.Logf("%s: the bot did not pause", b)
		}
		c.rec.waitMidVoice(t, at, 25, "the answer after "+b.String())
	}
	report, to := c.heardUntilTheEnd(t, id)
	from, _ := c.rec.firstLoud(asked)
	c.heardWhole(t, heardAnswer{id: id, report: report, from: from, to: to})
	// Every pause was a backchannel's, and the answer went on after each.
	if n := len(bargeIns(report)); n != paused || report.Interrupted {
		t.Fatalf("the turn paused %d times for %d false interruptions; interrupted: %v", n, paused, report.Interrupted)
	}
	if c.obs.count("false_interruption") != float64(paused) || c.obs.count("interruption") != 0 || c.obs.count("echo") != 0 {
		t.Fatalf("alicia_voice_talk_over_total: %v false interruptions, %v interruptions, %v echo for %d pauses",
			c.obs.count("false_interruption"), c.obs.count("interruption"), c.obs.count("echo"), paused)
	}
	// No turn: the question and its answer are all there is.
	hist, _ := c.store.History(t.Context(), c.conv)
	got := c.u.barrier()
	var finals int
	for _, tr := range bodies[*wire.Transcription](got) {
		if tr.Final {
			finals++
		}
	}
	if len(hist) != 2 || finals != 0 || has[*wire.StartAnswer](got) != 1 {
		t.Fatalf("stored %d messages; %d final transcriptions, %d answers started", len(hist), finals, has[*wire.StartAnswer](got))
	}
	t.Logf("%d backchannels: %d paused the bot and it resumed, %d did not pause it; %v gave no transcript",
		len(sounds), paused, len(sounds)-paused, c.obs.count("unrecognised"))
}

// A 300 ms burst of noise, a cough and three knocks over the bot's
// answer, over a real livekit-server, with the stage's defaults: none
// pauses the bot (its turn report has no barge-in), none is counted as a
// false interruption or an interruption, and each answer is stored
// complete and heard whole. What each sound added to its answer at the
// client, against the same answer without one, is logged;
// BenchmarkNoiseGap measures it.
func TestNoiseOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	c := newTalkOverClient(t, lk, talkOverSetup{conv: "conv_noise", answer: shortAnswer,
		phrases: append(slices.Clone(backchannelPhrases), otherQuestions...)})
	// The control, heard out without a sound over it, also takes the
	// stage past the echo warm-up of a first answer, if it has one.
	control := c.answer(t, nil)
	c.heardWhole(t, control)
	for _, n := range noises() {
		a := c.answer(t, n.pcm)
		if p := a.pauses(); len(p) > 0 || a.report.Interrupted {
			t.Fatalf("%s: the bot paused %d times (%v from the sound's onset); interrupted: %v",
				n.name, len(p), pauseTimes(p, a.sound.from), a.report.Interrupted)
		}
		c.heardWhole(t, a)
		t.Logf("%s: the answer took %v longer at the client than without it", n.name, (a.span() - control.span()).Round(time.Millisecond))
	}
	if n := c.obs.count("false_interruption") + c.obs.count("interruption"); n != 0 {
		t.Fatalf("alicia_voice_talk_over_total: %v false interruptions or interruptions", n)
	}
	hist, _ := c.store.History(t.Context(), c.conv)
	if len(hist) != 2*(1+len(noises())) {
		t.Fatalf("stored %d messages for %d questions", len(hist), 1+len(noises()))
	}
	t.Logf("noise ignored %v times", c.obs.count("noise"))
}

// BenchmarkNoiseGap: over a real livekit-server, a 300 ms burst of noise,
// a cough or three knocks over the middle of the bot's answer: what the
// sound added to the answer at the client (its first to its last voice,
// against the median of three answers without a sound in the same
// conversation; ms-gap, the median), how often the bot paused
// (paused/op), and the sounds the stage counted as noise it did not pause
// for (noise-ignored/op). Each iteration is one answer of about 7 s: run
// it with -benchtime Nx.
func BenchmarkNoiseGap(b *testing.B) {
	lk := testenv.StartLiveKit(b)
	for _, n := range noises() {
		b.Run(n.name, func(b *testing.B) {
			c := newTalkOverClient(b, lk, talkOverSetup{conv: "conv_gap_" + n.name, answer: shortAnswer,
				phrases: append(slices.Clone(backchannelPhrases), otherQuestions...)})
			var spans []time.Duration
			for range 3 {
				spans = append(spans, c.answer(b, nil).span())
			}
			control := median(spans)
			var gaps []time.Duration
			paused := 0
			for b.Loop() {
				a := c.answer(b, n.pcm)
				gaps = append(gaps, a.span()-control)
				paused += len(a.pauses())
			}
			b.ReportMetric(ms(median(gaps)), "ms-gap")
			b.ReportMetric(float64(paused)/float64(b.N), "paused/op")
			b.ReportMetric(c.obs.count("noise")/float64(b.N), "noise-ignored/op")
			b.Logf("the answer took %v without a sound (%v); what the sound added: %v", control, spans, gaps)
		})
	}
}
