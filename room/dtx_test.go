package room_test

import (
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"
	"gopkg.in/hraban/opus.v2"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/room"
)

// dtxPackets encodes pcm (48 kHz mono) as a browser's WebRTC stack
// sends it with Opus DTX on, LiveKit's clients' default: in silence the
// encoder gives packets of a byte or two, and only the first of a run is
// sent.
func dtxPackets(t *testing.T, pcm []int16) [][]byte {
	t.Helper()
	enc, err := opus.NewEncoder(48000, 1, opus.AppVoIP)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.SetDTX(true); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	inDTX := false
	for i := 0; i+960 <= len(pcm); i += 960 {
		buf := make([]byte, 1500)
		n, err := enc.Encode(pcm[i:i+960], buf)
		if err != nil {
			t.Fatal(err)
		}
		if n <= 2 {
			if inDTX {
				out = append(out, nil) // nothing sent for these 20 ms
				continue
			}
			inDTX = true
		} else {
			inDTX = false
		}
		out = append(out, buf[:n])
	}
	return out
}

// A microphone that stops sending when its user stops talking (Opus DTX,
// or a muted track) still ends the utterance: the time without packets
// reaches the stage as silence, or the endpointer would wait for silence
// that never comes.
func TestMicThatGoesQuietEndsTheUtterance(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	question := "What is the weather like in Paris today?"
	speechURL := speechServer(t, question)
	const roomName = "conv_dtx_mic"

	heard := newSink()
	listening := make(chan interface{ Close() error }, 1)
	botCB := lksdk.NewRoomCallback()
	botCB.OnTrackSubscribed = func(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		if !room.IsUserMic(track, pub, rp) {
			return
		}
		m, err := room.ListenToMic(track, heard)
		if err != nil {
			t.Errorf("listen: %v", err)
			return
		}
		listening <- m
	}
	bot, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: roomName,
		ParticipantIdentity: "bot", ParticipantKind: lksdk.ParticipantAgent}, botCB)
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Disconnect()
	user, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: roomName,
		ParticipantIdentity: "user"}, lksdk.NewRoomCallback())
	if err != nil {
		t.Fatal(err)
	}
	defer user.Disconnect()
	track, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "user")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := user.LocalParticipant.PublishTrack(track, &lksdk.TrackPublicationOptions{Name: "mic", Source: livekit.TrackSource_MICROPHONE}); err != nil {
		t.Fatal(err)
	}
	var mic interface{ Close() error }
	select {
	case mic = <-listening:
	case <-time.After(15 * time.Second):
		t.Fatal("the bot never subscribed to the user's microphone")
	}
	defer mic.Close()

	// Half a second of digital silence (DTX from the start), the
	// question and the encoder's own hangover into the silence after it;
	// then the client sends nothing, as a track muted then does, and as
	// DTX does but for a comfort-noise update every 400 ms.
	pcm := append(append(speechtest.Silence(500, 48000), speechtest.Render(t, question, 140, 48000)...), speechtest.Silence(300, 48000)...)
	packets := append(dtxPackets(t, pcm), make([][]byte, 100)...)
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i, p := range packets {
			<-tick.C
			if p == nil {
				continue
			}
			// The RTP clock runs on over the frames not sent.
			d := 20 * time.Millisecond
			for j := i + 1; j < len(packets) && packets[j] == nil; j++ {
				d += 20 * time.Millisecond
			}
			_ = track.WriteSample(pionmedia.Sample{Data: p, Duration: d})
		}
	}()

	got := recognise(t, speechURL, utterance(t, heard, 30*time.Second))
	t.Logf("the bot heard %q", got)
	if speechtest.WER(question, got) > 0.2 {
		t.Fatalf("the bot heard %q for %q", got, question)
	}
}
