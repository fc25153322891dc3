package room_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"gopkg.in/hraban/opus.v2"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/room"
)

// The agent's voice track goes quiet between answers instead of sending
// encoded silence fifty times a second: after a sound, a few packets end
// it, then one every 400 ms; the next sound's timestamp has jumped over
// the gap while the sequence numbers
// run on without a hole, so that a receiver sees discontinuous
// transmission, not loss. Read as RTP by a client of a real livekit-server
// (which does not forward the marker bit the track sets on a talkspurt's
// first packet, so that is not checked).
func TestVoiceTrackIsQuietBetweenSounds(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	const roomName = "conv_voice_dtx"
	grant := &auth.VideoGrant{RoomJoin: true, Room: roomName, Agent: true}
	jwt, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("bot").SetKind(livekit.ParticipantInfo_AGENT).
		SetVideoGrant(grant).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	bot, err := lksdk.ConnectToRoomWithToken(lk.URL, jwt, lksdk.NewRoomCallback())
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Disconnect()
	const rate = 24000
	out, err := room.PublishVoice(bot.LocalParticipant, rate)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	type packet struct {
		at     time.Time
		header rtp.Header
		loud   bool
	}
	var mu sync.Mutex
	var got []packet
	arrived := make(chan struct{}, 1)
	subscribed := make(chan struct{})
	cb := lksdk.NewRoomCallback()
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		close(subscribed)
		// Each packet is decoded to tell sound from silence: the track's
		// encoder spends as many bytes on either.
		dec, err := opus.NewDecoder(48000, 1)
		if err != nil {
			t.Error(err)
			return
		}
		pcm := make([]int16, 48000/50)
		go func() {
			for {
				p, _, err := track.ReadRTP()
				if err != nil {
					return
				}
				n, err := dec.Decode(p.Payload, pcm)
				if err != nil {
					t.Errorf("decoding the agent's voice: %v", err)
					return
				}
				mu.Lock()
				got = append(got, packet{at: time.Now(), header: p.Header, loud: speechtest.RMS(pcm[:n]) > 1000})
				mu.Unlock()
				select {
				case arrived <- struct{}{}:
				default:
				}
			}
		}()
	}
	user, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: roomName, ParticipantIdentity: "user"}, cb)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Disconnect()

	tone := make([]int16, rate*3/10)
	for i := range tone {
		tone[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	// loud waits for the packets of a sound.
	loud := func(after int, wait time.Duration) (int, bool) {
		deadline := time.After(wait)
		for {
			mu.Lock()
			for i := after; i < len(got); i++ {
				if got[i].loud {
					mu.Unlock()
					return i, true
				}
			}
			mu.Unlock()
			select {
			case <-arrived:
			case <-deadline:
				return 0, false
			}
		}
	}
	select {
	case <-subscribed:
	case <-time.After(15 * time.Second):
		t.Fatal("the user never subscribed to the agent's track")
	}
	// The SFU may still be setting up the forwarding of the first
	// packets: sound until one is heard.
	first := -1
	for try := 0; first < 0; try++ {
		if try == 10 {
			t.Fatal("no sound on the agent's track")
		}
		if err := out.Write(tone, rate); err != nil {
			t.Fatal(err)
		}
		if i, ok := loud(0, 2*time.Second); ok {
			first = i
		}
	}
	// Let that sound end before the silence is timed.
	for {
		if i, ok := loud(first+1, 200*time.Millisecond); ok {
			first = i
		} else {
			break
		}
	}
	// Two seconds of nothing to say, then another sound.
	time.Sleep(300*time.Millisecond + 2*time.Second)
	mu.Lock()
	before := len(got)
	mu.Unlock()
	if err := out.Write(tone, rate); err != nil {
		t.Fatal(err)
	}
	second, ok := loud(before, 15*time.Second)
	if !ok {
		t.Fatal("the second sound never came")
	}
	mu.Lock()
	defer mu.Unlock()
	quiet := 0
	for i := first + 1; i < second; i++ {
		if !got[i].loud {
			quiet++
		}
	}
	// 2.3 s of silence sent continuously would be 115 packets; quiet, it
	// is five to end the sound and one every 400 ms.
	if quiet > 15 {
		t.Errorf("%d silent packets between two sounds 2 s apart; the track should go quiet", quiet)
	}
	for i := first + 1; i <= second; i++ {
		if got[i].header.SequenceNumber != got[i-1].header.SequenceNumber+1 {
			t.Fatalf("sequence numbers jump from %d to %d: a receiver would see loss", got[i-1].header.SequenceNumber, got[i].header.SequenceNumber)
		}
	}
	start := second
	for start > first && got[start-1].loud {
		start--
	}
	prev, next := got[start-1].header, got[start].header
	if gap := next.Timestamp - prev.Timestamp; gap <= 960 {
		t.Errorf("the timestamp moved %d ticks over the gap; it should jump over it", gap)
	}
}
