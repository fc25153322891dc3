package room_test

import (
	"slices"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/room"
)

// A microphone that stops sending when its user stops talking still ends
// the utterance, or the endpointer would wait for silence that never
// comes. A client stops sending in Opus DTX (LiveKit's clients' default),
// which its last packet says; the bot hears the time without packets as
// silence. A client that stops its track on mute (livekit-client's
// stopMicTrackOnMute) sends nothing at all, and livekit-server then sends
// a second of Opus silence in its place, which ends the utterance too.
func TestMicThatGoesQuietEndsTheUtterance(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	question := "What is the weather like in Paris today?"
	speechURL := speechtest.Server(t, question)
	speech := speechtest.Trim(speechtest.Render(t, question, 140, 48000))

	for _, tc := range []struct {
		name string
		dtx  bool // else the track is muted after the last packet
		// tail is the silence sent after the question: in DTX, the
		// encoder's way into it; muted, none, so that only the mute can
		// end the utterance.
		tail int
	}{{"dtx", true, 300}, {"stopped on mute", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			// Half a second of digital silence, the question and the tail;
			// then the client sends nothing.
			pcm := append(append(speechtest.Silence(500, 48000), speech...), speechtest.Silence(tc.tail, 48000)...)
			packets, err := speechtest.Opus(pcm, 48000, tc.dtx)
			if err != nil {
				t.Fatal(err)
			}
			heard := newSink()
			mic, pub, track := listenedMic(t, lk, "conv_quiet_mic_"+map[bool]string{true: "dtx", false: "mute"}[tc.dtx], heard)
			done := make(chan struct{})
			defer func() { <-done }()
			go func() {
				defer close(done)
				sendPaced(track, packets, nil)
				if !tc.dtx {
					pub.SetMuted(true)
				}
			}()
			defer mic.Close()

			got := recognise(t, speechURL, utterance(t, heard, 30*time.Second))
			t.Logf("the bot heard %q", got)
			if speechtest.WER(question, got) > 0.2 {
				t.Fatalf("the bot heard %q for %q", got, question)
			}
		})
	}
}

// sendPaced sends a microphone's 20 ms packets as a client does, one
// every 20 ms. A nil packet is a frame not sent (DTX): the RTP clock runs
// on over it. A packet lost (lost may be nil) is one the network lost:
// the packets after it are numbered as if it had been sent.
func sendPaced(track *webrtc.TrackLocalStaticSample, packets [][]byte, lost func(i int) bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	dropped := uint16(0)
	for i, p := range packets {
		<-tick.C
		if lost != nil && lost(i) {
			dropped++
			continue
		}
		if p == nil {
			continue
		}
		d := 20 * time.Millisecond
		for j := i + 1; j < len(packets) && packets[j] == nil; j++ {
			d += 20 * time.Millisecond
		}
		_ = track.WriteSample(pionmedia.Sample{Data: p, Duration: d, PrevDroppedPackets: dropped})
		dropped = 0
	}
}

// listenedMic publishes a user's microphone in a room of its own, with a
// bot decoding it into heard as its session does, once the bot listens.
// Close the decoder to stop.
func listenedMic(t *testing.T, lk *testenv.LiveKit, roomName string, heard *pcmSink) (interface{ Close() error }, *lksdk.LocalTrackPublication, *webrtc.TrackLocalStaticSample) {
	t.Helper()
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
	t.Cleanup(bot.Disconnect)
	user, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: roomName,
		ParticipantIdentity: "user"}, lksdk.NewRoomCallback())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(user.Disconnect)
	track, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "user")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := user.LocalParticipant.PublishTrack(track, &lksdk.TrackPublicationOptions{Name: "mic", Source: livekit.TrackSource_MICROPHONE})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case mic := <-listening:
		return mic, pub, track
	case <-time.After(15 * time.Second):
		t.Fatal("the bot never subscribed to the user's microphone")
	}
	return nil, nil, nil
}

// Packets a microphone loses on the way are filled in before the next is
// decoded: a client's 20 ms packets published with one in eight of the
// question's dropped (pion numbers the packets after as if they had been
// sent, as a network loses them) reach the bot as an utterance as long as
// the same question's without loss, and recognised. Unfilled (tried), the
// utterance came out 280 ms shorter for the 15 packets lost.
func TestLostPacketsOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	question := "What is the weather like in Paris today?"
	speechURL := speechtest.Server(t, question)
	speech := speechtest.Trim(speechtest.Render(t, question, 140, 48000))
	pcm := slices.Concat(speechtest.Silence(500, 48000), speech, speechtest.Silence(800, 48000))
	packets, err := speechtest.OpusWithFEC(pcm, 48000, 10)
	if err != nil {
		t.Fatal(err)
	}
	first, last := 500/20, (500+len(speech)*1000/48000)/20
	heard := func(name string, lost func(i int) bool) []int16 {
		sink := newSink()
		mic, _, track := listenedMic(t, lk, "conv_lost_packets_"+name, sink)
		defer mic.Close()
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			sendPaced(track, packets, lost)
		}()
		return utterance(t, sink, 30*time.Second)
	}
	clean := heard("none", func(int) bool { return false })
	drops := 0
	lossy := heard("one_in_eight", func(i int) bool {
		if i >= first && i < last && i%8 == 3 {
			drops++
			return true
		}
		return false
	})
	got := recognise(t, speechURL, lossy)
	diff := time.Duration(len(lossy)-len(clean)) * time.Second / 16000
	t.Logf("%d packets of the question lost: the utterance %v against %v without loss (%v), heard as %q",
		drops, time.Duration(len(lossy))*time.Second/16000, time.Duration(len(clean))*time.Second/16000, diff, got)
	if diff.Abs() > 40*time.Millisecond {
		t.Errorf("with %d packets lost the utterance lasted %v, without loss %v", drops,
			time.Duration(len(lossy))*time.Second/16000, time.Duration(len(clean))*time.Second/16000)
	}
	if speechtest.WER(question, got) > 0.2 {
		t.Errorf("with %d packets lost the bot heard %q for %q", drops, got, question)
	}
}
