package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/llm/standin"
)

// voiceRound is one N's run: a fresh bot, N users joining, each asking
// o.turns questions with pauses between, every o.interruptEvery-th turn
// talked over.
func voiceRound(ctx context.Context, o options, n int, bin, dir string, lk *lkserver.Server, speech *speechServers, model string, sounds *voiceSounds) (*voiceReport, error) {
	var dbURL string
	if o.postgres == "on" {
		var drop func()
		var err error
		if dbURL, drop, err = createDatabase(ctx); err != nil {
			return nil, err
		}
		defer drop()
	}
	thinking := "on"
	if o.reasoning == "off" {
		thinking = "off"
	}
	b, err := startBot(ctx, bin, dir, lk, []string{"ALICIA_DATABASE_URL=" + dbURL, "ALICIA_THINKING=" + thinking,
		"ALICIA_LLM_BACKEND=openai", "ALICIA_LLM_URL=" + model, "ALICIA_LLM_MODEL=Qwen3-8B",
		"ALICIA_VOICE=on", "ALICIA_STT_URL=" + speech.url + "/v1", "ALICIA_TTS_URL=" + speech.url + "/v1",
		"ALICIA_STT_TRANSPORT=" + o.sttTransport},
		"-max-sessions", fmt.Sprint(2*n+10))
	if err != nil {
		return nil, err
	}
	defer b.stop()
	pid := b.cmd.Process.Pid

	// A warm-up conversation: LiveKit's agent dispatcher's first query
	// (see run), and the bot's first synthesis and recognition.
	fmt.Fprintf(os.Stderr, "bench: N=%d: warm-up conversation...\n", n)
	warmCtx, cancelWarm := context.WithCancel(ctx)
	warm, err := joinVoice(warmCtx, b.api, b.secret, "warm-up", sounds, o.echo)
	if err != nil {
		cancelWarm()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	warmStart := time.Now()
	go warm.mic.run(warmCtx)
	wt := warm.speakTurn(warmCtx, sounds.questions[0], sounds.over, false, o.turnTimeout)
	cancelWarm()
	warm.leave()
	if len(wt) == 0 || wt[0].err != "" {
		return nil, fmt.Errorf("warm-up turn: %v\n%s", wt, b.logTail(20))
	}
	// The bot's idle cost, measured over the rest of the dispatcher's
	// wait, is taken off its cost per conversation.
	idle0, _ := procCPU(pid)
	idleStart := time.Now()
	if !sleepCtx(ctx, max(5*time.Second-time.Since(warmStart), 2*time.Second)) {
		return nil, ctx.Err()
	}
	idle1, _ := procCPU(pid)
	rep := &voiceReport{n: n, mic: o.mic, echo: o.echo, idle: (idle1 - idle0) / time.Since(idleStart).Seconds()}
	rss0, _ := procRSS(pid)

	fmt.Fprintf(os.Stderr, "bench: N=%d: users joining...\n", n)
	joined, joinFailures := joinAll(n, o.joinParallel, func(i int) (*voiceUser, error) {
		return joinVoice(ctx, b.api, b.secret, fmt.Sprintf("voice%04d", i), sounds, o.echo)
	})
	rep.joinFailures = joinFailures
	micCtx, stopMics := context.WithCancel(ctx)
	var mics sync.WaitGroup
	defer func() {
		stopMics()
		mics.Wait()
		for _, u := range joined {
			u.leave()
		}
	}()
	for _, u := range joined {
		mics.Add(1)
		go func() {
			defer mics.Done()
			u.mic.run(micCtx)
		}()
	}
	if len(joined) == 0 {
		return nil, fmt.Errorf("no user joined: %v", rep.joinFailures[0])
	}
	stages0, err := scrapeStages(ctx, b.api)
	if err != nil {
		return nil, err
	}
	cpu0, _ := procCPU(pid)
	lkCPU0, _ := procCPU(lk.PID())
	selfCPU0, _ := procCPU(os.Getpid())
	speechCPU0, _ := procTreeCPU(speech.cmd.Process.Pid)
	micFrames.take()
	echoMoves.take()
	fmt.Fprintf(os.Stderr, "bench: N=%d: %d joined; %d spoken turns each...\n", n, len(joined), o.turns)
	profiled := make(chan error, 1)
	if o.profile != "" {
		go func() {
			prefix := fmt.Sprintf("%svoice-%d-", o.profile, n)
			err := fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", b.debugPort, int(o.profileFor.Seconds())), prefix+"cpu.pprof")
			if err == nil {
				err = fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", b.debugPort), prefix+"heap.pprof")
			}
			profiled <- err
		}()
	} else {
		profiled <- nil
	}
	results := make([][]voiceTurn, len(joined))
	var wg sync.WaitGroup
	start := time.Now()
	for i, u := range joined {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The users start spread over one cycle, as independent
			// users are, and pause between turns as people do.
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			if !sleepCtx(ctx, time.Duration(rng.Int64N(int64(o.voiceCycle)))) {
				return
			}
			for k := range o.turns {
				interrupt := o.interruptEvery > 0 && (k+i)%o.interruptEvery == o.interruptEvery-1
				ts := u.speakTurn(ctx, sounds.questions[(i+k)%len(sounds.questions)], sounds.over, interrupt, o.turnTimeout)
				results[i] = append(results[i], ts...)
				for _, t := range ts {
					if t.err != "" {
						fmt.Fprintf(os.Stderr, "bench: %s (%s), turn %d: %s\n", u.name, u.convID, k+1, t.err)
					}
				}
				if len(ts) == 0 || ts[len(ts)-1].err != "" {
					return
				}
				if !sleepCtx(ctx, o.think/2+time.Duration(rng.Int64N(int64(o.think)))) {
					return
				}
			}
		}()
	}
	wg.Wait()
	rep.wall = time.Since(start)
	rep.micWakes, rep.micLate, rep.micMost = micFrames.take()
	rep.echoSkipped, rep.echoDry = echoMoves.take()
	if err := <-profiled; err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
	}
	rep.cpu, _ = procCPU(pid)
	rep.cpu -= cpu0
	rep.lkCPU, _ = procCPU(lk.PID())
	rep.lkCPU -= lkCPU0
	rep.selfCPU, _ = procCPU(os.Getpid())
	rep.selfCPU -= selfCPU0
	rep.speechCPU, _ = procTreeCPU(speech.cmd.Process.Pid)
	rep.speechCPU -= speechCPU0
	rss1, _ := procRSS(pid)
	rep.rssPer = float64(rss1-rss0) / float64(len(joined))
	rep.users = len(joined)
	for _, rs := range results {
		rep.turns = append(rep.turns, rs...)
	}
	rep.stages, err = scrapeTurns(ctx, b.api, stages0, rep.turns)
	return rep, err
}

// scrapeTurns reads the bot's stage histograms since before once they
// hold every turn whose answer was heard, or after ten seconds. The bot
// reports a turn when its answer has played out and the conversation has
// stored it, which a starved bot may do after the user heard the end.
func scrapeTurns(ctx context.Context, api string, before stageHistograms, turns []voiceTurn) (stageHistograms, error) {
	heard := 0
	for _, t := range turns {
		if t.firstAnswer > 0 {
			heard++
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := scrapeStages(ctx, api)
		if err != nil {
			return nil, err
		}
		since := now.since(before)
		if int(since["own"].count) >= heard || time.Now().After(deadline) || !sleepCtx(ctx, 100*time.Millisecond) {
			return since, nil
		}
	}
}

// runVoice runs the voice benchmark at each of o.ns and prints each
// size's figures, then all of them as one table.
func runVoice(ctx context.Context, o options) error {
	_, err := voiceBench(ctx, o, os.Stdout)
	return err
}

func voiceBench(ctx context.Context, o options, w io.Writer) (reps []*voiceReport, err error) {
	pace, err := pacing(o.pace)
	if err != nil {
		return nil, err
	}
	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	dir, done, err := runDir(o)
	if err != nil {
		return nil, err
	}
	defer done()
	bin, err := botBinary(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "bench: rendering and encoding the questions...")
	sounds, err := voiceAudio(o.mic == "dtx")
	if err != nil {
		return nil, err
	}
	lk, err := lkserver.StartFresh(dir)
	if err != nil {
		return nil, err
	}
	defer lk.Stop()
	speech, err := startSpeech(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	defer speech.stop()
	// The model stand-in answers in this process, with the users: the
	// speech servers' process is speech only.
	sv, err := standin.New(nil, pace, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	model := httptest.NewServer(sv.Handler())
	defer model.Close()

	var rows []string
	for _, n := range o.ns {
		rep, err := voiceRound(ctx, o, n, bin, dir, lk, speech, model.URL+"/vllm/v1", sounds)
		if err != nil {
			return reps, fmt.Errorf("with %d users: %w", n, err)
		}
		rep.print(w)
		reps = append(reps, rep)
		rows = append(rows, rep.row())
	}
	fmt.Fprintf(w, "\n%s\n%s\n", voiceTableHead, strings.Join(rows, "\n"))
	return reps, nil
}
