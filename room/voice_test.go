package room_test

import (
	"context"
	"iter"
	"log/slog"
	"maps"
	"math"
	"net/http/httptest"
	"strings"
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
	llmstandin "github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/pipeline/voice/standin"
	"github.com/alicia-voice/alicia/reasoning/sentence"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/wire"
)

// standinTurn answers as the Qwen3 stand-in's default scenario does, cut
// into sentences by the real splitter: a stand-in for the engine's turn
// until the voice stage is wired to it.
type standinTurn struct {
	sentences  []voice.Sentence
	mu         sync.Mutex
	interrupts []voice.StopKind
	heard      *voice.Heard
	stopped    chan struct{}
	once       sync.Once
}

func answerTo(question string) *standinTurn {
	text := strings.ReplaceAll(llmstandin.DefaultScenario().Rounds[0].Answer, "{{question}}", question)
	var sp sentence.Splitter
	parts := append(sp.Write(text), sp.Flush()...)
	t := &standinTurn{stopped: make(chan struct{})}
	for i, p := range parts {
		f := sentence.Inspect(p)
		t.sentences = append(t.sentences, voice.Sentence{Seq: i + 1, Text: p, Code: f.HasCode, Emphasis: f.HasEmphasis})
	}
	return t
}

func (t *standinTurn) Sentences(ctx context.Context) iter.Seq[voice.Sentence] {
	return func(yield func(voice.Sentence) bool) {
		for _, s := range t.sentences {
			select {
			case <-t.stopped:
				return
			case <-ctx.Done():
				return
			default:
			}
			if !yield(s) {
				return
			}
		}
	}
}

func (t *standinTurn) Interrupt(kind voice.StopKind) {
	t.mu.Lock()
	t.interrupts = append(t.interrupts, kind)
	t.mu.Unlock()
	if kind != voice.StopSpeech {
		t.once.Do(func() { close(t.stopped) })
	}
}

func (t *standinTurn) Heard(h voice.Heard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heard = &h
}

func (t *standinTurn) Speaking() func()        { return func() {} }
func (t *standinTurn) Hushed() <-chan struct{} { return nil }

func (t *standinTurn) Done() <-chan struct{} { return t.stopped }

type standinEngine struct {
	turns chan *standinTurn
	ids   chan [2]string
}

func (e *standinEngine) StartTurn(_ context.Context, _, id, text string) (voice.Turn, error) {
	t := answerTo(text)
	e.ids <- [2]string{id, text}
	e.turns <- t
	return t, nil
}

// frame is 10 ms or so of received audio and when it arrived.
type frame struct {
	at  time.Time
	rms float64
	pcm []int16
}

type recorder struct {
	mu     sync.Mutex
	frames []frame
	ch     chan []int16
	closed bool
}

func (r *recorder) WriteSample(p media.PCM16Sample) error {
	var sum float64
	for _, v := range p {
		sum += float64(v) * float64(v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.frames = append(r.frames, frame{time.Now(), math.Sqrt(sum / float64(max(1, len(p)))), append([]int16(nil), p...)})
	select {
	case r.ch <- append([]int16(nil), p...):
	default:
	}
	return nil
}

func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// lastLoud is when the received audio last carried speech.
func (r *recorder) lastLoud() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.frames) - 1; i >= 0; i-- {
		if r.frames[i].rms > 300 {
			return r.frames[i].at
		}
	}
	return time.Time{}
}

func trimmed(pcm []int16) []int16 {
	start, end := 0, len(pcm)
	for start < end && pcm[start] < 500 && pcm[start] > -500 {
		start++
	}
	for end > start && pcm[end-1] < 500 && pcm[end-1] > -500 {
		end--
	}
	return pcm[start:end]
}

// The voice path end to end over a real livekit-server, with the
// stand-in engine's answer: a user's espeak-ng question becomes interim
// and final Transcriptions and lk.transcription streams; the answer's
// first sentence is heard on the bot's track; a click does not stop it, a
// spoken interruption does, and the turn learns how much was heard.
func TestVoiceConversationOverLiveKit(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	// pocketsphinx, even with a grammar, loses "what is the weather like
	// in paris today" after the bot's 24 kHz → Opus → 16 kHz path (it
	// recognises the same phrase from a microphone): the question is the
	// one it hears reliably on the way back.
	question, interruption := "How far is the moon?", "What is the weather like in Paris today?"
	firstSentence := "You said: how far is the moon."
	sp, err := standin.New(standin.Config{Phrases: []string{question, interruption, "you said"}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sp.Handler())
	defer func() { srv.Close(); sp.Close() }()
	const roomName = "conv_voice_e2e"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)

	// The bot joins as the worker's job assignment would have it.
	mics := room.NewMics(ctx, log)
	cb := lksdk.NewRoomCallback()
	mics.Bind(cb)
	grant := &auth.VideoGrant{RoomJoin: true, Room: roomName, Agent: true}
	grant.SetCanUpdateOwnMetadata(true)
	jwt, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("bot").SetKind(livekit.ParticipantInfo_AGENT).SetVideoGrant(grant).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	bot, err := lksdk.ConnectToRoomWithToken(lk.URL, jwt, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Disconnect()
	defer mics.Close()
	out, err := room.PublishVoice(bot.LocalParticipant, standin.PCMRate)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	transcriptions := make(chan *wire.Transcription, 64)
	vr := room.NewVoiceRoom(bot.LocalParticipant, roomName, func(_ context.Context, tr *wire.Transcription) { transcriptions <- tr },
		func() bool { return true }, log)
	eng := &standinEngine{turns: make(chan *standinTurn, 4), ids: make(chan [2]string, 4)}
	stage := voice.New(voice.Config{
		Recognizer:  &voice.OpenAIRecognizer{URL: srv.URL + "/v1", Model: "whisper-1", Streaming: true},
		Synthesizer: &voice.OpenAISynthesizer{URL: srv.URL + "/v1", Model: "tts-1"},
		Logger:      log,
	}, eng, vr, out)
	stageDone := make(chan struct{})
	go func() { defer close(stageDone); stage.Run(ctx) }()
	defer func() { cancel(); <-stageDone }()
	mics.Start(bot, stage)

	// The user: records the bot's voice, reads transcripts, speaks.
	rec := &recorder{ch: make(chan []int16, 8192)}
	var recTrack *lkmedia.PCMRemoteTrack
	recording := make(chan struct{})
	// The SDK merges a stream's trailer attributes into the map its
	// handler was given, from another goroutine: they are read once the
	// stream is complete.
	type textStream struct {
		attrs map[string]string
		text  string
	}
	userStreams := make(chan textStream, 64)
	ucb := lksdk.NewRoomCallback()
	ucb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		if rp.Identity() != "bot" {
			return
		}
		var err error
		if recTrack, err = lkmedia.NewPCMRemoteTrack(track, rec, lkmedia.WithTargetSampleRate(voice.InputRate)); err != nil {
			t.Errorf("record: %v", err)
			return
		}
		close(recording)
	}
	user, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: roomName, ParticipantIdentity: "user"}, ucb)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Disconnect()
	defer func() {
		if recTrack != nil {
			recTrack.Close()
		}
	}()
	if err := user.RegisterTextStreamHandler(room.TranscriptionTopic, func(r *lksdk.TextStreamReader, from string) {
		text := r.ReadAll()
		userStreams <- textStream{maps.Clone(r.Info.Attributes), text}
	}); err != nil {
		t.Fatal(err)
	}
	mic, err := lkmedia.NewPCMLocalTrack(voice.InputRate, 1, protoLogger.GetLogger())
	if err != nil {
		t.Fatal(err)
	}
	micPub, err := user.LocalParticipant.PublishTrack(mic, &lksdk.TrackPublicationOptions{Name: "mic", Source: livekit.TrackSource_MICROPHONE})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-recording:
	case <-time.After(15 * time.Second):
		t.Fatal("the user never got the bot's voice track")
	}
	// The bot subscribes on the publication; its first transcript proves
	// it listens. Until the track is bound PCMLocalTrack drops samples,
	// so speak once the user's track is subscribed by the bot.
	deadline := time.Now().Add(15 * time.Second)
	for !subscribedBy(bot, "user") {
		if time.Now().After(deadline) {
			t.Fatal("the bot never subscribed to the user's microphone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := mic.WriteSample(append(speechtest.Render(t, question, 140, voice.InputRate), speechtest.Silence(1000, voice.InputRate)...)); err != nil {
		t.Fatal(err)
	}

	ids := wait(t, eng.ids, "turn")
	turn := wait(t, eng.turns, "turn")
	var interim, final []*wire.Transcription
	for tr := range transcriptions {
		if tr.ID != ids[0] || tr.ConversationID != roomName {
			t.Fatalf("transcription %+v for message %s", tr, ids[0])
		}
		if tr.Final {
			final = append(final, tr)
			break
		}
		interim = append(interim, tr)
	}
	werFinal := speechtest.WER(question, final[0].Text)
	werInterim := 1.0
	if len(interim) > 0 {
		werInterim = speechtest.WER(question, interim[len(interim)-1].Text)
	}
	t.Logf("final Transcription %q (WER %.2f) after %d interim (last WER %.2f); user message id %s", final[0].Text, werFinal, len(interim), werInterim, ids[0])
	if werFinal > 0.2 || len(interim) == 0 || ids[1] != final[0].Text {
		t.Fatalf("final %q, %d interims, turn text %q", final[0].Text, len(interim), ids[1])
	}
	// The user's own words reached the user's client on lk.transcription,
	// in the user's name, final last.
	sawFinal := false
	for !sawFinal {
		r := wait(t, userStreams, "user transcript stream")
		a, text := r.attrs, r.text
		if a[room.AttrSegmentID] != "SG_"+ids[0] {
			continue // the agent's speech
		}
		if a[room.AttrTranscribedTrack] != micPub.SID() {
			t.Fatalf("transcript on track %q, want %q", a[room.AttrTranscribedTrack], micPub.SID())
		}
		sawFinal = a[room.AttrTranscriptFinal] == "true" && text == final[0].Text
	}

	// The first sentence of the answer is on the bot's track.
	e, err := voice.NewEndpointer(voice.EndpointConfig{Silence: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// espeak-ng pauses about half a second at the colon of 'You said:
	// "…"', as long as between two sentences: the first sentence is the
	// first two stretches of speech.
	var fr voice.Framer
	var first []int16
	for parts := 0; parts < 2; {
		pcm := wait(t, rec.ch, "the bot's voice")
		for _, f := range fr.Write(pcm) {
			evs, _ := e.Push(f)
			for _, ev := range evs {
				if ev.Kind == voice.SpeechEnded && parts < 2 {
					first = append(first, ev.Audio...)
					parts++
				}
			}
		}
	}
	heard := recognise(t, srv.URL, first)
	t.Logf("the user heard %q for the first sentence %q", heard, turn.sentences[0].Text)
	if w := speechtest.WER(firstSentence, heard); w > 0.2 {
		t.Fatalf("heard %q (WER %.2f)", heard, w)
	}

	// A 150 ms click over the answer does not stop it.
	clickAt := time.Now()
	_ = mic.WriteSample(append(speechtest.Click(150, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
	for rec.lastLoud().Before(clickAt.Add(1500 * time.Millisecond)) {
		if time.Since(clickAt) > 10*time.Second {
			t.Fatal("the answer stopped after a click")
		}
		time.Sleep(50 * time.Millisecond)
	}
	turn.mu.Lock()
	n := len(turn.interrupts)
	turn.mu.Unlock()
	if n != 0 {
		t.Fatalf("a click interrupted: %v", turn.interrupts)
	}

	// Speaking over it does: the audio stops within the time measured.
	speech := trimmed(speechtest.Render(t, interruption, 140, voice.InputRate))
	spokeAt := time.Now()
	_ = mic.WriteSample(append(speech, speechtest.Silence(1000, voice.InputRate)...))
	wait(t, eng.ids, "the interruption's turn")
	stopped := rec.lastLoud()
	t.Logf("barge-in: the bot's audio stopped %v after the user's speech began (%v after the 500 ms minimum)",
		stopped.Sub(spokeAt).Round(time.Millisecond), stopped.Sub(spokeAt.Add(500*time.Millisecond)).Round(time.Millisecond))
	turn.mu.Lock()
	kinds, h := turn.interrupts, turn.heard
	turn.mu.Unlock()
	if len(kinds) == 0 || kinds[0] != voice.StopAll || h == nil || h.Played >= h.Total || !strings.HasPrefix(h.Text, voice.Speakable(turn.sentences[0])) {
		t.Fatalf("interrupts %v, heard %+v", kinds, h)
	}
	t.Logf("the turn heard %v of %v: %q, cut in %q", h.Played.Round(time.Millisecond), h.Total.Round(time.Millisecond), h.Text, h.Partial)
}

func subscribedBy(bot *lksdk.Room, identity string) bool {
	p := bot.GetParticipantByIdentity(identity)
	if p == nil {
		return false
	}
	for _, pub := range p.TrackPublications() {
		if pub.Kind() == lksdk.TrackKindAudio && pub.Track() != nil {
			return true
		}
	}
	return false
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30 s", what)
	}
	var zero T
	return zero
}
