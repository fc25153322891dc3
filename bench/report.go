package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/llm/standin"
)

type report struct {
	o            options
	pace         standin.Pacing
	users        []*user
	joinFailures []string
	results      [][]turnResult
	clock        *modelClock
	cpu          float64
	// lkCPU and selfCPU: livekit-server's and this process's (clients,
	// stand-in) CPU over the turns, to show who else had the cores.
	lkCPU, selfCPU float64
	rss0, rss1     int64
	rssPeak        int64
	rows           int64
	dbOn           bool
	// wire: the bot's statements and round trips to Postgres, counted on
	// the wire (wireOn: through the bench's proxy).
	wire wireCounts
	// wireWall is how long wire was counted over.
	wireWall time.Duration
	wireOn   bool
	// pgCPU: the CPU of the Postgres backends serving the bot's database
	// (pgCPUOn: when they are processes of this machine).
	pgCPU    float64
	pgCPUOn  bool
	turnWall time.Duration
	spread   time.Duration // over which the first questions were asked
	joinTook time.Duration
}

type dist []time.Duration

func (d dist) pct(p float64) string {
	if len(d) == 0 {
		return "–"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return fmt.Sprintf("%.1f", float64(s[i].Microseconds())/1000)
}

func (r report) print(w io.Writer) {
	var greet, intake, steps, sentences, firstSentence dist
	var packets, bytes, okTurns, failed, unmatched int
	reasons := map[string]int{}
	for _, u := range r.users {
		greet = append(greet, u.greeted.Sub(u.joined))
	}
	for _, rs := range r.results {
		for _, t := range rs {
			if t.err != "" {
				failed++
				reasons[strings.SplitN(t.err, ":", 2)[0]]++
				continue
			}
			okTurns++
			packets += t.packets
			bytes += t.bytes
			mt := r.clock.turn(t.question)
			if mt == nil {
				unmatched++
				continue
			}
			r.clock.mu.Lock()
			intake = append(intake, mt.requested.Sub(t.sent))
			for idx, at := range t.steps {
				if int(idx) >= 1 && int(idx) <= len(mt.stepEnds) {
					steps = append(steps, at.Sub(mt.stepEnds[idx-1]))
				} else {
					unmatched++
				}
			}
			cursor := 0
			for i, s := range t.sentences {
				sent, next, ok := mt.sentenceSent(s.text(), cursor)
				if !ok {
					unmatched++
					continue
				}
				cursor = next
				sentences = append(sentences, s.at.Sub(sent))
				if i == 0 {
					firstSentence = append(firstSentence, s.at.Sub(t.sent))
				}
			}
			r.clock.mu.Unlock()
		}
	}
	turns := okTurns + failed
	per := func(v float64, n int) string {
		if n == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", v/float64(n))
	}
	fmt.Fprintf(w, "\n%d conversations × %d turns, model pace %s (TTFT %.0f ms, %.0f ms/token), reasoning %s, Postgres %s, first questions spread over %v (-start %s)\n",
		len(r.users), r.o.turns, r.o.pace, r.pace.TTFTMs, r.pace.TokenMs, r.o.reasoning, r.o.postgres, r.spread.Round(100*time.Millisecond), r.o.start)
	fmt.Fprintf(w, "machine: %s, %d cores, %s; %s\n\n", cpuModel(), runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(w, "| figure | p50 | p95 | p99 | n |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	row := func(name string, d dist) {
		fmt.Fprintf(w, "| %s (ms) | %s | %s | %s | %d |\n", name, d.pct(50), d.pct(95), d.pct(99), len(d))
	}
	row("user joined → bot's Configuration", greet)
	row("UserMessage sent → model request", intake)
	if r.o.streams {
		row("step's last token → text stream closed at client", steps)
	} else {
		row("step's last token → ReasoningStep at client", steps)
	}
	row("sentence's last token → AssistantSentence at client", sentences)
	row("UserMessage sent → first AssistantSentence", firstSentence)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| per turn / conversation | value |")
	fmt.Fprintln(w, "| --- | --- |")
	fmt.Fprintf(w, "| packets to the client per turn | %s |\n", per(float64(packets), okTurns))
	fmt.Fprintf(w, "| bytes to the client per turn | %s |\n", per(float64(bytes), okTurns))
	if r.dbOn {
		fmt.Fprintf(w, "| database rows written per turn | %s |\n", per(float64(r.rows), turns))
	} else {
		fmt.Fprintf(w, "| database rows written per turn | – (Postgres off) |\n")
	}
	if r.wireOn {
		fmt.Fprintf(w, "| Postgres statements per turn | %s |\n", per(float64(r.wire.statements), turns))
		fmt.Fprintf(w, "| Postgres round trips per turn (the lease's apart) | %s |\n", per(float64(r.wire.roundTrips-r.wire.leaseTrips), turns))
		fmt.Fprintf(w, "| the process's lease renewals, per second | %.1f |\n", float64(r.wire.leaseTrips)/r.wireWall.Seconds())
	}
	if r.pgCPUOn {
		fmt.Fprintf(w, "| Postgres CPU-ms per turn | %s |\n", per(1000*r.pgCPU, turns))
	}
	fmt.Fprintf(w, "| bot CPU-ms per turn | %s |\n", per(1000*r.cpu, turns))
	fmt.Fprintf(w, "| bot CPU use during the turns | %.0f%% of one core over %v |\n", 100*r.cpu/r.turnWall.Seconds(), r.turnWall.Round(time.Second))
	fmt.Fprintf(w, "| CPU of one core over the turns: livekit-server / bench clients and model | %.0f%% / %.0f%% |\n", 100*r.lkCPU/r.turnWall.Seconds(), 100*r.selfCPU/r.turnWall.Seconds())
	fmt.Fprintf(w, "| bot RSS | %.1f MB idle → %.1f MB with %d conversations (peak %.1f MB) |\n", float64(r.rss0)/1e6, float64(r.rss1)/1e6, len(r.users), float64(r.rssPeak)/1e6)
	fmt.Fprintf(w, "| bot RSS per conversation | %s kB |\n", per(float64(r.rss1-r.rss0)/1e3, len(r.users)))
	fmt.Fprintf(w, "| turns: answered / failed | %d / %d |\n", okTurns, failed)
	fmt.Fprintf(w, "| users who could not join | %d |\n", len(r.joinFailures))
	if unmatched > 0 {
		fmt.Fprintf(w, "| events not matched to a model token | %d |\n", unmatched)
	}
	if len(reasons) > 0 {
		keys := make([]string, 0, len(reasons))
		for k := range reasons {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "| failed: %s | %d |\n", k, reasons[k])
		}
	}
	if len(r.joinFailures) > 0 {
		fmt.Fprintf(w, "\nfirst join failure: %s\n", r.joinFailures[0])
	}
}

func (a arrival) text() string {
	return sentenceText(a)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
