package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	mrtp "github.com/livekit/media-sdk/rtp"
	"github.com/livekit/protocol/livekit"
	protologger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/wire"
)

// voiceUser is a user with a microphone and ears.
type voiceUser struct {
	*user
	mic *mic
	ear *ear
}

// joinVoice joins a new conversation as a client that plays audio and
// shows reasoning, publishes a microphone sending s.between when it says
// nothing (and the bot's voice back, with an echo), and listens to the
// bot's track.
func joinVoice(ctx context.Context, api, secret, identity string, s *voiceSounds, echo echoPath) (*voiceUser, error) {
	m, err := newMic(s, echo)
	if err != nil {
		return nil, err
	}
	e := &ear{echo: m.echo}
	var tracks []opus.Writer
	var mu sync.Mutex
	onTrack := func(track *webrtc.TrackRemote) {
		if track.Kind() != webrtc.RTPCodecTypeAudio {
			return
		}
		r, err := hear(track, e)
		if err != nil {
			return
		}
		mu.Lock()
		tracks = append(tracks, r)
		mu.Unlock()
	}
	// The bot listening to the microphone: before, what is said is lost.
	heard := make(chan struct{})
	var heardOnce sync.Once
	media := func(cb *lksdk.RoomCallback) {
		cb.OnTrackSubscribed = func(t *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) { onTrack(t) }
		cb.OnLocalTrackSubscribed = func(*lksdk.LocalTrackPublication, *lksdk.LocalParticipant) {
			heardOnce.Do(func() { close(heard) })
		}
	}
	u, err := joinWith(ctx, api, secret, identity, "", []string{wire.FeatureStreaming, wire.FeatureReasoningSteps, wire.FeatureAudioOutput}, media)
	if err != nil {
		return nil, err
	}
	u.closeTracks = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range tracks {
			r.Close()
		}
	}
	track, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus}, "mic", identity)
	if err != nil {
		u.leave()
		return nil, err
	}
	if _, err := u.room.LocalParticipant.PublishTrack(track, &lksdk.TrackPublicationOptions{Name: "microphone", Source: livekit.TrackSource_MICROPHONE}); err != nil {
		u.leave()
		return nil, err
	}
	select {
	case <-heard:
	case <-time.After(20 * time.Second):
		u.leave()
		return nil, errors.New("the bot never subscribed to the microphone")
	case <-ctx.Done():
		u.leave()
		return nil, ctx.Err()
	}
	m.track = track
	return &voiceUser{user: u, mic: m, ear: e}, nil
}

// hear plays the bot's track into e as a phone does: LiveKit's jitter
// buffer and depacketiser, then libopus at 48 kHz, each frame with its
// RTP timestamp, by which a phone's playout keeps the gaps the bot leaves
// in sending. Close the returned decoder to stop.
func hear(track *webrtc.TrackRemote, e *ear) (opus.Writer, error) {
	f := &stampedFrames{e: e}
	dec, err := opus.Decode(f, 1, protologger.GetLogger())
	if err != nil {
		return nil, err
	}
	f.next = mrtp.NewMediaStreamIn[opus.Sample](dec)
	// Ends when the track does (its reads fail once the user leaves).
	go func() { _ = mrtp.HandleLoop(track, mrtp.HandleJitter(mrtp.NewNopCloser(f))) }()
	return dec, nil
}

// stampedFrames hands the ear each decoded frame with the RTP timestamp
// of its packet: the decoder writes it back synchronously, on the
// track's loop.
type stampedFrames struct {
	e    *ear
	next mrtp.Handler
	ts   uint32
}

func (f *stampedFrames) String() string  { return "stamped frames" }
func (f *stampedFrames) SampleRate() int { return opusRate }
func (f *stampedFrames) Close() error    { return nil }

func (f *stampedFrames) HandleRTP(h *rtp.Header, payload []byte) error {
	f.ts = h.Timestamp
	return f.next.HandleRTP(h, payload)
}

func (f *stampedFrames) WriteSample(p media.PCM16Sample) error { return f.e.write(p, f.ts) }

// voiceTurn is what a user heard of one spoken question.
type voiceTurn struct {
	// final, firstAudio and firstAnswer are from the end of the
	// question's speech: the final Transcription, the first audible
	// output (cue or answer) and the answer's first audio.
	final, firstAudio, firstAnswer time.Duration
	misheard                       bool
	// bargeIn: from the onset of speech over the answer to silence on
	// the bot's track; set when the user interrupted.
	bargeIn     time.Duration
	interrupted bool
	err         string
}

// echoWarmup is how long the bot's first speech is talked over at the
// earliest: its echo warm-up, 3 s, was on by default, and is off now
// that the bot removes its own echo; waiting as long keeps the pause at
// the onset measured as before, and past the first second of the first
// answer, in which the echo suppressor may still hold back talk.
const echoWarmup = 3 * time.Second

// speakTurn says q and follows its answer; with interrupt, it talks over
// the answer a second and a half into it (and after the bot's echo
// warm-up) and follows the interruption's answer instead, as a turn of
// its own.
func (v *voiceUser) speakTurn(ctx context.Context, q, over phrase, interrupt bool, timeout time.Duration) []voiceTurn {
	v.mu.Lock()
	from := len(v.got)
	v.mu.Unlock()
	utt := v.mic.say(q)
	select {
	case <-utt.done:
	case <-ctx.Done():
		return nil
	}
	t, answerID := v.follow(ctx, q, utt, time.Time{}, from, timeout)
	if t.err != "" || !interrupt {
		if t.err == "" {
			t.err = v.answerHeard(ctx, answerID, timeout)
		}
		return []voiceTurn{t}
	}
	// Talk over the answer once it has played a while, if it still
	// plays; otherwise there is nothing to interrupt.
	v.ear.mu.Lock()
	warm := v.ear.spoke.Add(echoWarmup + 500*time.Millisecond)
	v.ear.mu.Unlock()
	if !sleepCtx(ctx, time.Until(later(utt.ended.Add(t.firstAnswer+1500*time.Millisecond), warm))) {
		return []voiceTurn{t}
	}
	// Between sentences there is nothing to talk over: the pause would
	// be the bot's own, not the user's doing.
	if v.ear.silentFor(100 * time.Millisecond) {
		t.err = v.answerHeard(ctx, answerID, timeout)
		return []voiceTurn{t}
	}
	v.mu.Lock()
	from = len(v.got)
	v.mu.Unlock()
	over2 := v.mic.say(over)
	// The onset is when the first frame went out.
	if !poll(ctx, time.Second, func() bool {
		v.mic.mu.Lock()
		defer v.mic.mu.Unlock()
		return !over2.onset.IsZero()
	}) {
		t.err = "interruption not sent"
		return []voiceTurn{t}
	}
	v.mic.mu.Lock()
	onset := over2.onset
	v.mic.mu.Unlock()
	var quiet time.Time
	if !poll(ctx, 5*time.Second, func() bool {
		var ok bool
		quiet, ok = v.ear.quietSince(onset, 400*time.Millisecond)
		return ok
	}) {
		t.err = "the agent talked on over the interruption"
		return []voiceTurn{t}
	}
	t.interrupted, t.bargeIn = true, quiet.Sub(onset)
	select {
	case <-over2.done:
	case <-ctx.Done():
		return []voiceTurn{t}
	}
	t2, answer2 := v.follow(ctx, over, over2, quiet, from, timeout)
	if t2.err == "" {
		t2.err = v.answerHeard(ctx, answer2, timeout)
	}
	return []voiceTurn{t, t2}
}

// follow waits for an utterance's final Transcription, its answer's
// StartAnswer and its first audio: the first after the utterance's end,
// and after quiet, when the bot fell silent if it was talked over.
func (v *voiceUser) follow(ctx context.Context, q phrase, utt *utterance, quiet time.Time, from int, timeout time.Duration) (voiceTurn, string) {
	var t voiceTurn
	final, err := v.waitFor(ctx, from, timeout, func(a arrival) bool {
		tr, ok := a.env.Body.(*wire.Transcription)
		return ok && tr.Final
	})
	if err != nil {
		t.err = "no final transcription"
		return t, ""
	}
	tr := final.env.Body.(*wire.Transcription)
	t.final = final.at.Sub(utt.ended)
	t.misheard = speechtest.WER(q.text, tr.Text) > 0.5
	start, err := v.waitFor(ctx, from, timeout, func(a arrival) bool {
		s, ok := a.env.Body.(*wire.StartAnswer)
		return ok && s.PreviousID == tr.ID
	})
	if err != nil {
		t.err = "no answer started"
		return t, ""
	}
	var at time.Time
	after := later(utt.ended, quiet)
	if !poll(ctx, timeout, func() (ok bool) { at, ok = v.ear.first(after, true); return ok }) {
		t.err = "nothing heard"
		return t, ""
	}
	t.firstAudio = at.Sub(utt.ended)
	if !poll(ctx, timeout, func() (ok bool) { at, ok = v.ear.first(after, false); return ok }) {
		t.err = "no answer heard"
		return t, ""
	}
	t.firstAnswer = at.Sub(utt.ended)
	return t, start.env.Body.(*wire.StartAnswer).ID
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// answerHeard waits for the answer's last sentence and for its audio to
// end.
func (v *voiceUser) answerHeard(ctx context.Context, answerID string, timeout time.Duration) string {
	_, err := v.waitFor(ctx, 0, timeout, func(a arrival) bool {
		switch b := a.env.Body.(type) {
		case *wire.AssistantSentence:
			return b.PreviousID == answerID && b.IsFinal
		case *wire.ErrorMessage:
			return true
		}
		return false
	})
	if err != nil {
		return "answer not finished"
	}
	if !poll(ctx, timeout, func() bool { return v.ear.silentFor(800 * time.Millisecond) }) {
		return "answer audio did not end"
	}
	return ""
}

// speechServers runs the speech stand-in (and a model stand-in the bot
// does not use) as a process of its own, so that /proc tells its CPU
// apart from the bot's and the clients'.
type speechServers struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startSpeech(ctx context.Context, bin, dir string) (*speechServers, error) {
	phrases := filepath.Join(dir, "phrases.txt")
	if err := os.WriteFile(phrases, []byte(strings.Join(append(voiceQuestions, interruption), "\n")), 0o644); err != nil {
		return nil, err
	}
	port, err := lkserver.FreePort("tcp")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "speech.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	s := &speechServers{url: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	s.cmd = exec.Command(bin, "standin", "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-phrases", phrases)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if !poll(ctx, 20*time.Second, func() bool {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		s.stop()
		return nil, fmt.Errorf("speech servers did not start (%s)", log.Name())
	}
	return s, nil
}

func (s *speechServers) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
