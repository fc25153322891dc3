package room

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	llmstandin "github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room/audio"
	speechclient "github.com/alicia-voice/alicia/speech"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/storage"
)

// A question spoken before the bot was in the room is answered: the
// client (here a Go participant doing what LiveKit's client SDKs do)
// publishes its microphone in a room without a bot, the bot is
// dispatched, and once the bot is there the client sends what it recorded
// on lk.agent.pre-connect-audio-buffer while its microphone goes on with
// room noise only. The native SDKs' raw PCM and the JavaScript SDK's
// WebM/Opus are both heard.
func TestPreconnectQuestionAnswered(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	const question = "How far is the moon?"
	a, store := preconnectAgent(t, lk, question)
	spoken48k := speechtest.Render(t, question, 140, 48000)

	t.Run("pcm", func(t *testing.T) {
		// Android's and Swift's recorders: 16-bit mono at the
		// microphone's rate.
		pcm := make([]byte, 2*len(spoken48k))
		for i, v := range spoken48k {
			binary.LittleEndian.PutUint16(pcm[2*i:], uint16(v))
		}
		askBeforeTheBot(t, lk, a, store, "conv_preconnect_pcm", "audio/pcm", pcm, question)
	})
	t.Run("webm", func(t *testing.T) {
		askBeforeTheBot(t, lk, a, store, "conv_preconnect_webm", "audio/webm;codecs=opus", webmOpus(t, spoken48k), question)
	})
}

// askBeforeTheBot joins conv as a client with a microphone,
// dispatches the bot, sends it the recording once it is there, and
// checks that the question was heard and answered.
func askBeforeTheBot(t *testing.T, lk *testenv.LiveKit, a *Agent, store storage.Store, conv, mimeType string, recording []byte, question string) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	bot := make(chan *lksdk.RemoteParticipant, 1)
	present := func(rp *lksdk.RemoteParticipant) {
		if rp.Kind() == lksdk.ParticipantAgent && rp.Attributes()[AgentStateAttribute] != "" {
			select {
			case bot <- rp:
			default:
			}
		}
	}
	answers := make(chan string, 16)
	cb := lksdk.NewRoomCallback()
	cb.OnParticipantConnected = present
	cb.OnAttributesChanged = func(_ map[string]string, p lksdk.Participant) {
		if rp, ok := p.(*lksdk.RemoteParticipant); ok {
			present(rp)
		}
	}
	// A token without the room's dispatch: the room has no bot until the
	// test asks for one. Like a stock LiveKit frontend, the client says
	// nothing to the bot: that it speaks is enough for it to be answered
	// aloud.
	r, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: conv, ParticipantIdentity: "alice"}, cb)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Disconnect()
	// The spoken answer's words come on lk.transcription, as LiveKit's
	// clients show them. The stream's attributes (which say whose words
	// they are) may only be read once it ended, and it ends when the
	// answer has been spoken: the stand-in's answers are told by their
	// first words instead.
	if err := r.RegisterTextStreamHandler(TranscriptionTopic, func(tr *lksdk.TextStreamReader, _ string) {
		const answer = "You said"
		var text []byte
		buf := make([]byte, 256)
		for len(text) < len(answer) {
			n, err := tr.Read(buf)
			text = append(text, buf[:n]...)
			if err != nil {
				break
			}
		}
		if strings.HasPrefix(string(text), answer) {
			answers <- string(text)
		}
	}); err != nil {
		t.Fatal(err)
	}
	mic, err := lkmedia.NewPCMLocalTrack(voice.InputRate, 1, protoLogger.GetLogger())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := r.LocalParticipant.PublishTrack(mic, &lksdk.TrackPublicationOptions{Name: "microphone", Source: livekit.TrackSource_MICROPHONE})
	if err != nil {
		t.Fatal(err)
	}
	// The microphone after the recording: a quiet room, at real-time
	// pace, until the test ends.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		noise := speechtest.Noise(20, voice.InputRate, 7)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			_ = mic.WriteSample(noise)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()

	if _, err := a.dispatch.CreateDispatch(ctx, &livekit.CreateAgentDispatchRequest{AgentName: a.cfg.AgentName, Room: conv}); err != nil {
		t.Fatal(err)
	}
	var agent *lksdk.RemoteParticipant
	select {
	case agent = <-bot:
	case <-ctx.Done():
		t.Fatal("the bot never came")
	}
	// As the clients send it: to the agent only, in pieces as recorded.
	w := r.LocalParticipant.StreamBytes(lksdk.StreamBytesOptions{
		Topic: PreconnectTopic, MimeType: mimeType, DestinationIdentities: []string{agent.Identity()},
		Attributes: map[string]string{"trackId": pub.SID(), "sampleRate": "48000", "channels": "1"},
	})
	for len(recording) > 0 {
		n := min(len(recording), 16<<10)
		written := make(chan struct{})
		done := func() { close(written) }
		w.Write(recording[:n], &done)
		<-written
		recording = recording[n:]
	}
	w.Close()

	select {
	case said := <-answers:
		t.Logf("the agent began to say %q", said)
	case <-ctx.Done():
		t.Fatal("the question asked before the bot came was not answered")
	}
	wantQuestionHeard(ctx, t, store, conv, question)
}

// wantQuestionHeard checks that the conversation's first message is the
// user's question, as recognised.
func wantQuestionHeard(ctx context.Context, t *testing.T, store storage.Store, conv, question string) {
	t.Helper()
	hist, err := store.History(ctx, conv)
	if err != nil || len(hist) == 0 || hist[0].Role != "user" {
		t.Fatalf("stored %+v, %v", hist, err)
	}
	t.Logf("heard %q", hist[0].Content)
	if speechtest.WER(question, hist[0].Content) > 0.2 {
		t.Fatalf("heard %q for %q", hist[0].Content, question)
	}
}

// preconnectAgent runs a voice bot with the engine, the Qwen3 stand-in
// and the speech stand-in limited to phrases, keeping conversations in
// memory.
func preconnectAgent(t *testing.T, lk *testenv.LiveKit, phrases ...string) (*Agent, storage.Store) {
	t.Helper()
	model, _ := llmstandin.New(nil, llmstandin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	ms := httptest.NewServer(model.Handler())
	t.Cleanup(ms.Close)
	client, err := llm.New(llm.Config{Backend: "openai", URL: ms.URL + "/vllm/v1", Model: "Qwen3-8B"})
	if err != nil {
		t.Fatal(err)
	}
	speech := speechtest.Server(t, phrases...)
	mem := storage.NewMemory(storage.ReasoningPlain)
	log := testenv.Log(t)
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, Logger: log}, mem)
	cfg := Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-preconnect", EmptyTimeout: 5 * time.Second}
	a := NewAgent(cfg, mem, NewMetrics(nil), func(id string) Conversation { return engine.Open(id) }, log)
	a.EnableVoice(VoiceConfig{OutputRate: speechstandin.PCMRate, Stage: voice.Config{
		Recognizer:  &speechclient.OpenAIRecognizer{URL: speech + "/v1", Streaming: true},
		Synthesizer: &speechclient.OpenAISynthesizer{URL: speech + "/v1", Format: "pcm", PCMRate: speechstandin.PCMRate},
		Logger:      log,
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Registered():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent worker did not register")
	}
	return a, mem
}

// webmOpus encodes 48 kHz mono speech as LiveKit's Go WebM writer does.
func webmOpus(t testing.TB, pcm []int16) []byte {
	t.Helper()
	file, err := speechtest.WebM(pcm, 48000)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// micSink is a stage input that keeps what it was given, in order.
type micSink struct {
	mu     sync.Mutex
	writes [][]int16
	wrote  chan struct{}
	closed bool
}

func newMicSink() *micSink { return &micSink{wrote: make(chan struct{}, 1024)} }

func (s *micSink) Write(p []int16) error {
	s.mu.Lock()
	s.writes = append(s.writes, append([]int16(nil), p...))
	s.mu.Unlock()
	s.wrote <- struct{}{}
	return nil
}

func (s *micSink) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// got is the first value of each write, which the tests make distinct.
func (s *micSink) got() []int16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int16
	for _, w := range s.writes {
		out = append(out, w[0])
	}
	return out
}

func constant(v int16, n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// pcmRecording is a 16 kHz mono recording of n samples of v, as a
// native client sends it.
func pcmRecording(v int16, n int) (data []byte, attrs func(track string) func() map[string]string) {
	data = make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(v))
	}
	return data, func(track string) func() map[string]string {
		return func() map[string]string {
			return map[string]string{"trackId": track, "sampleRate": strconv.Itoa(voice.InputRate), "channels": "1"}
		}
	}
}

// The live audio of a microphone whose recording is being received waits
// for it, then follows it; a recording that came before the subscription
// is heard first; a recording sent for another participant's track never
// reaches it.
func TestPreconnectComesBeforeTheLiveAudio(t *testing.T) {
	p := newPreconnect(testenv.Log(t))
	p.wait = time.Hour // the recordings come; the wait never ends here

	// Being received when the bot subscribes.
	pr, pw := io.Pipe()
	data, attrs := pcmRecording(1, 800)
	received := make(chan struct{})
	go func() {
		defer close(received)
		p.receive(pr, "audio/pcm", nil, attrs("TR_a"), "alice")
	}()
	// The header came: the recording is known before any of its bytes.
	if _, err := pw.Write(data[:2]); err != nil {
		t.Fatal(err)
	}
	sink := newMicSink()
	in := p.attach("alice", "TR_a", false, sink)
	_ = in.Write(constant(2, 320))
	_ = in.Write(constant(3, 320))
	if got := sink.got(); len(got) != 0 {
		t.Fatalf("live audio %v went ahead of the recording", got)
	}
	_, _ = pw.Write(data[2:])
	_ = pw.Close()
	<-received
	_ = in.Write(constant(4, 320))
	if got := sink.got(); !equal(got, []int16{1, 2, 3, 4}) {
		t.Fatalf("heard %v, want the recording, then the live audio in order", got)
	}

	// Received before the bot subscribed.
	data, attrs = pcmRecording(5, 800)
	p.receive(bytes.NewReader(data), "application/octet-stream", nil, attrs("TR_b"), "bob")
	sink = newMicSink()
	in = p.attach("bob", "TR_b", false, sink)
	_ = in.Write(constant(6, 320))
	if got := sink.got(); !equal(got, []int16{5, 6}) {
		t.Fatalf("heard %v", got)
	}
	_ = in.Close()

	// Begun after the bot subscribed: the live audio waits from then on.
	// A recording of the sender's other track lets it go again.
	sink = newMicSink()
	in = p.attach("dave", "TR_d", false, sink)
	_ = in.Write(constant(9, 320))
	pr, pw = io.Pipe()
	received = make(chan struct{})
	data, attrs = pcmRecording(10, 800)
	go func() {
		defer close(received)
		p.receive(pr, "audio/pcm", nil, attrs("TR_d"), "dave")
	}()
	if _, err := pw.Write(data[:2]); err != nil {
		t.Fatal(err)
	}
	_ = in.Write(constant(11, 320))
	_, _ = pw.Write(data[2:])
	_ = pw.Close()
	<-received
	other, otherAttrs := pcmRecording(12, 800)
	sink2 := newMicSink()
	in2 := p.attach("dave", "TR_e", false, sink2)
	pr, pw = io.Pipe()
	received = make(chan struct{})
	go func() {
		defer close(received)
		p.receive(pr, "audio/pcm", nil, otherAttrs("TR_f"), "dave")
	}()
	if _, err := pw.Write(other[:2]); err != nil {
		t.Fatal(err)
	}
	_ = in2.Write(constant(13, 320))
	if got := sink2.got(); len(got) != 0 {
		t.Fatalf("live audio %v went ahead of a recording being received", got)
	}
	_, _ = pw.Write(other[2:])
	_ = pw.Close()
	<-received
	_ = in2.Write(constant(14, 320))
	if got, got2 := sink.got(), sink2.got(); !equal(got, []int16{9, 10, 11}) || !equal(got2, []int16{13, 14}) {
		t.Fatalf("heard %v and %v", got, got2)
	}
	_ = in.Close()
	_ = in2.Close()

	// Sent by mallory for carol's track: not carol's.
	data, attrs = pcmRecording(7, 800)
	p.receive(bytes.NewReader(data), "audio/pcm", nil, attrs("TR_c"), "mallory")
	sink = newMicSink()
	in = p.attach("carol", "TR_c", false, sink)
	_ = in.Write(constant(8, 320))
	if got := sink.got(); !equal(got, []int16{8}) {
		t.Fatalf("carol's microphone heard %v", got)
	}
	_ = in.Close()
}

// A client that said it sends a recording and does not: its live audio
// is held for the wait only, then heard, and a recording too late for it
// is dropped. A recording that cannot be used releases the live audio at
// once, and holds none of a microphone listened to after it.
func TestPreconnectThatNeverComes(t *testing.T) {
	p := newPreconnect(testenv.Log(t))
	p.wait = time.Millisecond
	sink := newMicSink()
	in := p.attach("alice", "TR_a", true, sink)
	_ = in.Write(constant(2, 320))
	<-sink.wrote // the wait ended and released it
	data, attrs := pcmRecording(1, 800)
	p.receive(bytes.NewReader(data), "audio/pcm", nil, attrs("TR_a"), "alice")
	_ = in.Write(constant(3, 320))
	if got := sink.got(); !equal(got, []int16{2, 3}) {
		t.Fatalf("heard %v", got)
	}
	_ = in.Close()

	p = newPreconnect(testenv.Log(t))
	p.wait = time.Hour
	sink = newMicSink()
	in = p.attach("bob", "TR_b", true, sink)
	_ = in.Write(constant(2, 320))
	p.receive(strings.NewReader("not a WebM file"), "audio/webm;codecs=opus", nil, attrs("TR_b"), "bob")
	_ = in.Write(constant(3, 320))
	if got := sink.got(); !equal(got, []int16{2, 3}) {
		t.Fatalf("heard %v", got)
	}
	_ = in.Close()

	// Safari's MP4 is not decoded: the live audio is let through when it
	// ends, whether the bot listened to the microphone before (carol) or
	// after (dave).
	sink = newMicSink()
	in = p.attach("carol", "TR_c", true, sink)
	_ = in.Write(constant(4, 320))
	p.receive(strings.NewReader("an MP4 file"), "video/mp4", nil, attrs("TR_c"), "carol")
	_ = in.Write(constant(5, 320))
	if got := sink.got(); !equal(got, []int16{4, 5}) {
		t.Fatalf("heard %v", got)
	}
	_ = in.Close()
	p.receive(strings.NewReader("an MP4 file"), "video/mp4", nil, attrs("TR_d"), "dave")
	sink = newMicSink()
	in = p.attach("dave", "TR_d", true, sink)
	_ = in.Write(constant(6, 320))
	if got := sink.got(); !equal(got, []int16{6}) {
		t.Fatalf("heard %v", got)
	}
	_ = in.Close()
}

// squareWave is n samples of a 600 Hz square wave at 48 kHz.
func squareWave(n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(6000 * ((i/40)%2*2 - 1))
	}
	return out
}

func equal(a, b []int16) bool {
	return len(a) == len(b) && string(int16Bytes(a)) == string(int16Bytes(b))
}

func int16Bytes(s []int16) []byte {
	b := make([]byte, 2*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}

// What the clients send decodes to 16 kHz mono; a stream that does not
// say what it holds is refused.
func TestPreconnectDecoding(t *testing.T) {
	log := testenv.Log(t)
	// Stereo PCM at 48 kHz, one second: one channel loud, one silent.
	stereo := make([]byte, 4*48000)
	for i := range 48000 {
		binary.LittleEndian.PutUint16(stereo[4*i:], uint16(int16(8000)))
	}
	got, err := decodePreconnect(audio.PCM, map[string]string{"trackId": "TR_a", "sampleRate": "48000", "channels": "2"}, stereo, log)
	if err != nil || len(got) < 15900 || len(got) > 16100 || got[8000] < 3900 || got[8000] > 4100 {
		t.Fatalf("%d samples, middle %d, %v", len(got), got[len(got)/2], err)
	}
	got, err = decodePreconnect(audio.WebMOpus, map[string]string{"trackId": "TR_a"}, webmOpus(t, squareWave(48000)), log)
	if err != nil || len(got) != voice.InputRate {
		t.Fatalf("%d samples, %v", len(got), err)
	}
	pcm := make([]byte, 3200)
	for _, attrs := range []map[string]string{
		{"sampleRate": "16000", "channels": "1"},
		{"trackId": "TR_a", "sampleRate": "1", "channels": "1"},
		{"trackId": "TR_a", "sampleRate": "48000", "channels": "0"},
		{"trackId": "TR_a", "channels": "1"},
	} {
		if _, err := decodePreconnect(audio.PCM, attrs, pcm, log); err == nil {
			t.Errorf("%v accepted", attrs)
		}
	}

	// Longer than a client records: announced, or sent.
	p := newPreconnect(testenv.Log(t))
	long := make([]byte, 2*voice.InputRate*(preconnectMaxSeconds+1))
	size := uint64(preconnectMaxPCMBytes + 1)
	_, attrs := pcmRecording(0, 0)
	p.receive(bytes.NewReader(long), "audio/pcm", &size, attrs("TR_x"), "alice")
	p.receive(bytes.NewReader(long), "audio/pcm", nil, attrs("TR_y"), "alice")
	if len(p.reading) != 0 {
		t.Fatalf("reading %v", p.reading)
	}
	for k, rec := range p.recordings {
		if len(rec.audio) > 0 {
			t.Fatalf("kept %d samples for %v", len(rec.audio), k)
		}
	}
}
