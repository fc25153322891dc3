package room_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/speech/standin"
)

// pcmSink collects decoded audio and hands it on in order.
// PCMRemoteTrack closes its writer, then flushes its resampler into it:
// writes after Close are dropped.
type pcmSink struct {
	mu     sync.Mutex
	ch     chan []int16
	closed bool
}

func newSink() *pcmSink { return &pcmSink{ch: make(chan []int16, 4096)} }

func (s *pcmSink) Write(p []int16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.ch <- append([]int16(nil), p...)
	}
	return nil
}

func (s *pcmSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	return nil
}

// utterance runs an endpointer over the sink until an utterance ends.
func utterance(t *testing.T, s *pcmSink, within time.Duration) []int16 {
	t.Helper()
	e, err := voice.NewEndpointer(voice.EndpointConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var f voice.Framer
	deadline := time.After(within)
	for {
		select {
		case p, ok := <-s.ch:
			if !ok {
				t.Fatal("the track ended before an utterance did")
			}
			for _, fr := range f.Write(p) {
				evs, err := e.Push(fr)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					if ev.Kind == voice.SpeechEnded {
						return ev.Audio
					}
				}
			}
		case <-deadline:
			t.Fatalf("no utterance within %v", within)
		}
	}
}

func recognise(t *testing.T, base string, pcm []int16) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &speech.OpenAIRecognizer{URL: base + "/v1", Model: "whisper-1"}
	for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: pcm, SampleRate: voice.InputRate}) {
		switch ev.Kind {
		case speech.RecognizeFinal:
			return ev.Text
		case speech.RecognizeError:
			t.Fatal(ev.Err)
		}
	}
	t.Fatal("recognition ended without a result")
	return ""
}

// A user's espeak-ng question, published as a microphone track, reaches
// the bot as 16 kHz speech the recogniser understands; another agent's
// microphone is never listened to; the bot's voice track carries speech the
// user's side recognises; the agent state and transcripts arrive as
// LiveKit's clients read them.
func TestVoiceTracksOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	question, answer := "What is the weather like in Paris today?", "How far is the moon?"
	speechURL := speechtest.Server(t, question, answer, "stop")
	const roomName = "conv_voice_tracks"

	heard := newSink()
	ignored := make(chan string, 4)
	listening := make(chan string, 4)
	var mics []interface{ Close() error }
	var micsMu sync.Mutex
	botCB := lksdk.NewRoomCallback()
	botCB.OnTrackSubscribed = func(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		if !room.IsUserMic(track, pub, rp) {
			ignored <- rp.Identity()
			return
		}
		m, err := room.ListenToMic(track, heard)
		if err != nil {
			t.Errorf("listen: %v", err)
			return
		}
		micsMu.Lock()
		mics = append(mics, m)
		micsMu.Unlock()
		listening <- rp.Identity()
	}
	// The token the worker's job assignment carries: an agent that may
	// update its own attributes.
	grant := &auth.VideoGrant{RoomJoin: true, Room: roomName, Agent: true}
	grant.SetCanUpdateOwnMetadata(true)
	jwt, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("bot").SetKind(livekit.ParticipantInfo_AGENT).
		SetVideoGrant(grant).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	bot, err := lksdk.ConnectToRoomWithToken(lk.URL, jwt, botCB)
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Disconnect()
	defer func() {
		micsMu.Lock()
		defer micsMu.Unlock()
		for _, m := range mics {
			m.Close()
		}
	}()
	out, err := room.PublishVoice(bot.LocalParticipant, standin.PCMRate)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := room.SetAgentState(bot, voice.StateListening); err != nil {
		t.Fatal(err)
	}

	publishMic := func(identity string, kind lksdk.ParticipantKind, cb *lksdk.RoomCallback) (*lksdk.Room, *lkmedia.PCMLocalTrack) {
		r, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: roomName,
			ParticipantIdentity: identity, ParticipantKind: kind}, cb)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := lkmedia.NewPCMLocalTrack(voice.InputRate, 1, protoLogger.GetLogger())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.LocalParticipant.PublishTrack(tr, &lksdk.TrackPublicationOptions{Name: "mic", Source: livekit.TrackSource_MICROPHONE}); err != nil {
			t.Fatal(err)
		}
		return r, tr
	}

	// Another agent talks in the room first: the bot must not listen.
	other, otherMic := publishMic("other-agent", lksdk.ParticipantAgent, lksdk.NewRoomCallback())
	defer other.Disconnect()
	select {
	case id := <-ignored:
		if id != "other-agent" {
			t.Fatalf("ignored %q", id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the bot never saw the other agent's track")
	}
	_ = otherMic.WriteSample(speechtest.Render(t, "stop", 140, voice.InputRate))

	recorded := newSink()
	transcripts := make(chan *lksdk.TextStreamReader, 4)
	var recorders []*lkmedia.PCMRemoteTrack
	recording := make(chan struct{}, 1)
	userCB := lksdk.NewRoomCallback()
	userCB.OnTrackSubscribed = func(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		if rp.Identity() != "bot" {
			return
		}
		m, err := lkmedia.NewPCMRemoteTrack(track, recorderWriter{recorded}, lkmedia.WithTargetSampleRate(voice.InputRate))
		if err != nil {
			t.Errorf("record: %v", err)
			return
		}
		recorders = append(recorders, m)
		recording <- struct{}{}
	}
	user, userMic := publishMic("user", lksdk.ParticipantStandard, userCB)
	defer user.Disconnect()
	defer func() {
		for _, m := range recorders {
			m.Close()
		}
	}()
	if err := user.RegisterTextStreamHandler(room.TranscriptionTopic, func(r *lksdk.TextStreamReader, _ string) { transcripts <- r }); err != nil {
		t.Fatal(err)
	}
	// PCMLocalTrack drops samples until its track is bound: the bot's
	// subscription says it is.
	select {
	case <-listening:
	case <-time.After(15 * time.Second):
		t.Fatal("the bot never subscribed to the user's microphone")
	}
	spoken := append(speechtest.Render(t, question, 140, voice.InputRate), speechtest.Silence(1500, voice.InputRate)...)
	if err := userMic.WriteSample(spoken); err != nil {
		t.Fatal(err)
	}

	got := recognise(t, speechURL, utterance(t, heard, 30*time.Second))
	wer := speechtest.WER(question, got)
	t.Logf("the bot heard %q (WER %.2f)", got, wer)
	if wer > 0.2 {
		t.Fatalf("the bot heard %q for %q", got, question)
	}

	// The transcript reaches the user as LiveKit's clients read it, in the
	// user's name.
	userPub := firstAudio(user.LocalParticipant)
	if err := room.SendTranscript(bot, "user", userPub, "SG_test", got, true); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-transcripts:
		a := r.Info.Attributes
		text := r.ReadAll()
		if text != got || a[room.AttrTranscriptFinal] != "true" || a[room.AttrSegmentID] != "SG_test" || a[room.AttrTranscribedTrack] != userPub {
			t.Fatalf("transcript %q with %v", text, a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no transcript stream")
	}

	// The bot speaks; the user's side, subscribed to its voice, hears it.
	select {
	case <-recording:
	case <-time.After(15 * time.Second):
		t.Fatal("the user never subscribed to the bot's voice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	syn := &speech.OpenAISynthesizer{URL: speechURL + "/v1", Model: "tts-1"}
	for ev := range syn.Stream(ctx, &speech.SynthesizeRequest{Text: answer}) {
		switch ev.Kind {
		case speech.SynthesizeAudio:
			if err := out.Write(ev.Samples, ev.SampleRate); err != nil {
				t.Fatal(err)
			}
		case speech.SynthesizeError:
			t.Fatal(ev.Err)
		}
	}
	if out.Queued() <= 0 {
		t.Fatal("nothing queued after synthesis")
	}
	said := recognise(t, speechURL, utterance(t, recorded, 30*time.Second))
	t.Logf("the user heard %q", said)
	if speechtest.WER(answer, said) > 0.2 {
		t.Fatalf("the user heard %q for %q", said, answer)
	}
	if st := user.GetParticipantByIdentity("bot").Attributes()[room.AgentStateAttribute]; st != string(voice.StateListening) {
		t.Fatalf("agent state %q", st)
	}
	// Nothing from the other agent ever reached the bot's recogniser: the
	// bot's only decoder is the user's.
	micsMu.Lock()
	n := len(mics)
	micsMu.Unlock()
	if n != 1 {
		t.Fatalf("the bot listens to %d tracks", n)
	}
}

type recorderWriter struct{ s *pcmSink }

func (r recorderWriter) WriteSample(p media.PCM16Sample) error { return r.s.Write(p) }
func (r recorderWriter) Close() error                          { return r.s.Close() }

func firstAudio(lp *lksdk.LocalParticipant) string {
	for _, p := range lp.TrackPublications() {
		if p.Kind() == lksdk.TrackKindAudio {
			return p.SID()
		}
	}
	return ""
}
