package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// voiceReport is one N's figures.
type voiceReport struct {
	n, users     int
	mic          string   // what the microphones send between phrases (-mic)
	echo         echoPath // how they pick up the bot (-echo)
	joinFailures []string
	turns        []voiceTurn
	wall         time.Duration
	// CPU seconds over the turns: the bot's, livekit-server's, this
	// process's (the users) and the speech servers'.
	cpu, lkCPU, selfCPU, speechCPU float64
	// idle is the bot's CPU (cores) with no conversation, taken off its
	// cost per conversation.
	idle float64
	// rssPer is the bot's resident memory per voice conversation, bytes.
	rssPer float64
	// The users' microphones over the turns: how often they woke to send,
	// how often a frame or more late, and the latest.
	micWakes, micLate int
	micMost           time.Duration
	// With an echo, what moved it (echoMoves): frames the speakers
	// skipped, and sounds they ran dry in.
	echoSkipped, echoDry int64
	stages               stageHistograms
}

// The bot's per-turn histograms: where a spoken answer spent its time,
// as the bot measured it.
const (
	stageMetric   = "alicia_voice_turn_stage_seconds"
	bargeInMetric = "alicia_voice_barge_in_seconds"
)

// breakdown is the stages printed, in the order a turn passes them.
var breakdown = []string{"endpointing", "recognition", "model_first_token", "first_sentence", "synthesis_first_byte", "first_audio", "own"}

// talkOverKey holds, among the stages, the bot's count of what users'
// speech over it or to it came to (alicia_voice_talk_over_total, by
// outcome), as a histogram of one sample each.
func talkOverKey(outcome string) string { return "talk_over:" + outcome }

// histogram is a Prometheus histogram's cumulative buckets.
type histogram struct {
	upper  []float64
	counts []float64
	count  float64
}

type stageHistograms map[string]histogram

// scrapeStages reads the bot's stage histograms from its /metrics.
func scrapeStages(ctx context.Context, api string) (stageHistograms, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseStages(resp.Body)
}

func parseStages(r io.Reader) (stageHistograms, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("the bot's /metrics: %w", err)
	}
	out := stageHistograms{}
	add := func(name string, m *dto.Metric) {
		h := m.GetHistogram()
		if h == nil {
			return
		}
		var hist histogram
		for _, b := range h.GetBucket() {
			hist.upper = append(hist.upper, b.GetUpperBound())
			hist.counts = append(hist.counts, float64(b.GetCumulativeCount()))
		}
		hist.count = float64(h.GetSampleCount())
		out[name] = hist
	}
	if f := fams[stageMetric]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					add(l.GetValue(), m)
				}
			}
		}
	}
	if f := fams[bargeInMetric]; f != nil && len(f.GetMetric()) > 0 {
		add("barge_in", f.GetMetric()[0])
	}
	if f := fams["alicia_voice_talk_over_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[talkOverKey(l.GetValue())] = histogram{count: m.GetCounter().GetValue()}
				}
			}
		}
	}
	return out, nil
}

// since is what was observed after before.
func (s stageHistograms) since(before stageHistograms) stageHistograms {
	out := stageHistograms{}
	for name, h := range s {
		b, ok := before[name]
		d := histogram{upper: h.upper, counts: make([]float64, len(h.counts)), count: h.count}
		copy(d.counts, h.counts)
		if ok && len(b.counts) == len(h.counts) {
			for i := range d.counts {
				d.counts[i] -= b.counts[i]
			}
			d.count -= b.count
		}
		out[name] = d
	}
	return out
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket that holds it.
func (h histogram) quantile(q float64) (float64, bool) {
	if h.count <= 0 || len(h.upper) == 0 {
		return 0, false
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, up := range h.upper {
		if h.counts[i] >= rank {
			in := h.counts[i] - below
			if in <= 0 || up > 1e9 {
				return lower, true
			}
			return lower + (up-lower)*(rank-below)/in, true
		}
		lower, below = up, h.counts[i]
	}
	return lower, true
}

func (s stageHistograms) pct(stage string, q float64) string {
	v, ok := s[stage].quantile(q)
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.0f", v*1000)
}

func (r *voiceReport) print(w io.Writer) {
	var final, audio, answer, bargeIn dist
	failed, misheard, interrupted := 0, 0, 0
	reasons := map[string]int{}
	for _, t := range r.turns {
		if t.err != "" {
			failed++
			reasons[t.err]++
		}
		if t.final > 0 {
			final = append(final, t.final)
		}
		if t.firstAudio > 0 {
			audio = append(audio, t.firstAudio)
		}
		if t.firstAnswer > 0 {
			answer = append(answer, t.firstAnswer)
		}
		if t.interrupted {
			interrupted++
			bargeIn = append(bargeIn, t.bargeIn)
		}
		if t.misheard {
			misheard++
		}
	}
	fmt.Fprintf(w, "\nvoice: %d users (%d failed to join; microphones: %s, echo %v), %d spoken turns over %v, %d failed, %d talked over, %d misheard\n",
		r.users, len(r.joinFailures), r.mic, r.echo, len(r.turns), r.wall.Round(time.Second), failed, interrupted, misheard)
	fmt.Fprintf(w, "  the users' microphones woke %d times to send, %d of them more than a frame late, the latest by %v\n",
		r.micWakes, r.micLate, r.micMost.Round(time.Millisecond))
	if r.echo.on() {
		fmt.Fprintf(w, "  the users' speakers moved the echo: %d frames skipped to keep the delay, %d sounds ran dry and started anew\n", r.echoSkipped, r.echoDry)
	}
	fmt.Fprintf(w, "  speech the recogniser returned no words for (the bot counted it and started no turn): %d\n", r.unrecognised())
	fmt.Fprintf(w, "  talk over the bot as it counted it: %d interruptions, %d false interruptions (resumed), %d noise ignored, %d echo rejected\n",
		r.talkOver("interruption"), r.talkOver("false_interruption"), r.talkOver("noise"), r.talkOver("echo"))
	if len(reasons) > 0 {
		var rs []string
		for k, v := range reasons {
			rs = append(rs, fmt.Sprintf("%s: %d", k, v))
		}
		sort.Strings(rs)
		fmt.Fprintf(w, "  failures: %s\n", strings.Join(rs, "; "))
	}
	fmt.Fprintf(w, "  at the client, from the end of the user's speech (ms, p50 / p95):\n")
	fmt.Fprintf(w, "    final Transcription   %s / %s\n", final.pct(50), final.pct(95))
	fmt.Fprintf(w, "    first audible output  %s / %s   (the thinking cue or the answer)\n", audio.pct(50), audio.pct(95))
	fmt.Fprintf(w, "    first audible answer  %s / %s\n", answer.pct(50), answer.pct(95))
	fmt.Fprintf(w, "    barge-in onset → silence at the client  %s / %s  (%d)\n", bargeIn.pct(50), bargeIn.pct(95), len(bargeIn))
	fmt.Fprintf(w, "  in the bot, per turn (ms, p50 / p95 from its histograms):\n")
	for _, st := range breakdown {
		fmt.Fprintf(w, "    %-22s %s / %s  (%d)\n", st, r.stages.pct(st, 0.5), r.stages.pct(st, 0.95), int(r.stages[st].count))
	}
	fmt.Fprintf(w, "    %-22s %s / %s  (%d)\n", "barge-in onset → paused", r.stages.pct("barge_in", 0.5), r.stages.pct("barge_in", 0.95), int(r.stages["barge_in"].count))
	fmt.Fprintf(w, "  bot: %.2f%% of a core per voice conversation (%.2f CPU-s per conversation-minute; idle bot %.2f%% of a core, not included), %.2f MB RSS per voice conversation\n",
		100*r.perConversation(), r.perConversation()*60, 100*r.idle, r.rssPer/1e6)
	// What a conversation costs a minute depends on how often its user
	// speaks, which a starved machine slows: per spoken turn it does not.
	fmt.Fprintf(w, "  bot: %.0f CPU-ms per spoken turn, at %.2f spoken turns per conversation-minute\n",
		1000*r.perConversation()*float64(r.users)*r.wall.Seconds()/float64(max(1, len(r.turns))), float64(len(r.turns))/float64(max(1, r.users))/r.wall.Minutes())
	fmt.Fprintf(w, "  CPU over the turns (cores): bot %.2f, livekit-server %.2f, users %.2f, speech servers %.2f\n",
		r.cpu/r.wall.Seconds(), r.lkCPU/r.wall.Seconds(), r.selfCPU/r.wall.Seconds(), r.speechCPU/r.wall.Seconds())
}

// unrecognised is how much speech the bot counted as giving no words.
func (r *voiceReport) unrecognised() int { return r.talkOver("unrecognised") }

// talkOver is how often the bot counted talk over it coming to outcome.
func (r *voiceReport) talkOver(outcome string) int { return int(r.stages[talkOverKey(outcome)].count) }

// perConversation is the bot's CPU per voice conversation, in cores,
// above what it spends idle.
func (r *voiceReport) perConversation() float64 {
	return max(0, r.cpu/r.wall.Seconds()-r.idle) / float64(max(1, r.users))
}

// row is the report as a line of the README's table.
func (r *voiceReport) row() string {
	var final, answer, bargeIn dist
	failed := 0
	for _, t := range r.turns {
		if t.err != "" {
			failed++
		}
		if t.final > 0 {
			final = append(final, t.final)
		}
		if t.firstAudio > 0 {
			answer = append(answer, t.firstAudio)
		}
		if t.interrupted {
			bargeIn = append(bargeIn, t.bargeIn)
		}
	}
	return fmt.Sprintf("| %d | %d (%d)/%d | %s / %s | %s / %s | %s / %s | %s | %.2f%% | %.2f | %.2f | %.2f | %.2f |",
		r.n, failed, r.unrecognised(), len(r.turns), final.pct(50), final.pct(95), answer.pct(50), answer.pct(95), bargeIn.pct(50), bargeIn.pct(95),
		r.stages.pct("own", 0.95), 100*r.perConversation(), r.rssPer/1e6,
		r.lkCPU/r.wall.Seconds(), r.selfCPU/r.wall.Seconds(), r.speechCPU/r.wall.Seconds())
}

const voiceTableHead = "| N | failed (no words from the recogniser)/turns | end of speech → final (ms p50/p95) | → first audio | barge-in → silence | own p95 | bot CPU per conv (% core) | bot MB per conv | livekit cores | users cores | speech cores |\n|---|---|---|---|---|---|---|---|---|---|---|"
