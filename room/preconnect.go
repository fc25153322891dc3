package room

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room/audio"
)

// PreconnectTopic is the byte-stream topic on which LiveKit's client SDKs
// send what the microphone recorded before an agent was in the room: the
// native SDKs raw 16-bit PCM (Android and Swift with no mime type, so the
// byte streams' default), the JavaScript SDK its MediaRecorder's
// WebM/Opus, cut short of its last chunk (Safari's MP4 is refused). The
// stream's attributes name the microphone track it belongs to (trackId)
// and the PCM's format (sampleRate, channels).
const PreconnectTopic = "lk.agent.pre-connect-audio-buffer"

const (
	// preconnectMaxSeconds bounds the audio taken: the clients stop
	// recording after 10 s, and a longer stream is not theirs.
	preconnectMaxSeconds = 12
	// preconnectMaxContainer bounds a WebM stream: 12 s of Opus at its
	// highest bitrate is below it.
	preconnectMaxContainer = 1 << 20
	// preconnectMaxPCMBytes bounds a PCM stream before its format is
	// known: 12 s of 48 kHz stereo, more than the clients record, fits.
	preconnectMaxPCMBytes = 3 << 20
	// preconnectWait is how long a microphone's audio is held for its
	// recording once the bot listens to it: the JavaScript client ends the
	// recording when the bot subscribes, so it completes moments later.
	// LiveKit's Python agents wait as long.
	preconnectWait = 3 * time.Second
	// preconnectKeep is how long a recording whose track the bot has not
	// subscribed to yet is kept for it.
	preconnectKeep = 10 * time.Second
	// preconnectMaxPending bounds the recordings one room keeps for
	// microphones not subscribed to yet; preconnectMaxPerSender the ones a
	// sender may send at once.
	preconnectMaxPending   = 32
	preconnectMaxPerSender = 4
)

// preconnect receives the pre-connect recordings of a room and puts each
// in front of its microphone's live audio, so that what a user said
// before the bot came is heard, and heard first.
type preconnect struct {
	log *slog.Logger
	// wait is preconnectWait (shorter in tests).
	wait time.Duration

	mu sync.Mutex
	// reading counts the recordings each sender is sending now. Which
	// track one belongs to is only known once it ends (see receive), so
	// all of the sender's microphones wait for them.
	reading map[string]int
	// recordings read and not claimed by a microphone yet, by sender and
	// track: a recording only ever reaches its sender's own track.
	recordings map[preKey]recording
	// gates: the microphones listened to while their recording may still
	// come, by owner and track.
	gates map[preKey]*preGate
}

type preKey struct{ identity, trackID string }

// recording is a pre-connect recording at voice.InputRate (nil: one that
// could not be used), and when it was read.
type recording struct {
	audio []int16
	at    time.Time
}

func newPreconnect(log *slog.Logger) *preconnect {
	return &preconnect{log: log, wait: preconnectWait, reading: map[string]int{},
		recordings: map[preKey]recording{}, gates: map[preKey]*preGate{}}
}

// register receives the room's recordings from now on. It must come
// before a client can see the bot: the SDK drops a stream whose header
// comes before its handler. Registering again is harmless.
func (p *preconnect) register(r *lksdk.Room) {
	_ = r.RegisterByteStreamHandler(PreconnectTopic, func(sr *lksdk.ByteStreamReader, identity string) {
		if rp := r.GetParticipantByIdentity(identity); rp != nil && rp.Kind() == lksdk.ParticipantAgent {
			return
		}
		p.receive(sr, sr.Info.MimeType, sr.Info.Size, func() map[string]string { return sr.Info.Attributes }, identity)
	})
}

// receive reads one recording on the SDK's goroutine for the stream (its
// reads end when the stream does, or when the room is left) and hands it
// to its microphone. Whatever is wrong with it, it is logged and dropped:
// the live audio goes on without it, and is not held for it.
//
// attrs gives the stream's attributes, read only once the stream ended:
// the SDK adds the trailer's to the same map from its own goroutine, and
// reading it earlier would race with a client that sends some.
func (p *preconnect) receive(r io.Reader, mimeType string, size *uint64, attrs func() map[string]string, from string) {
	log := p.log.With("identity", from, "mime", mimeType)
	format, err := audio.FormatOf(mimeType)
	limit := preconnectMaxPCMBytes
	if format == audio.WebMOpus {
		limit = preconnectMaxContainer
	}
	if err == nil && size != nil && *size > uint64(limit) {
		err = fmt.Errorf("%d bytes announced", *size)
	}
	if err == nil && !p.begin(from) {
		err = errors.New("too many recordings at once")
	}
	if err != nil {
		log.Warn("voice: pre-connect audio ignored", "err", err)
		// Which track it was for is known once it ended; that track's
		// live audio must not wait for it meanwhile, nor after.
		_, _ = io.Copy(io.Discard, r)
		p.settle(from, attrs()["trackId"], nil)
		return
	}
	var trackID string
	var pcm []int16
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err == nil && len(data) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	if err == nil {
		a := attrs()
		trackID = a["trackId"]
		log = log.With("track", trackID)
		pcm, err = decodePreconnect(format, a, data, log)
	}
	if err != nil {
		log.Warn("voice: pre-connect audio ignored", "err", err)
		pcm = nil
	}
	p.end(from, trackID, pcm)
}

// begin counts a recording from sender in progress, and holds the live
// audio of its microphones meanwhile; false: it sends too many at once.
func (p *preconnect) begin(sender string) bool {
	p.mu.Lock()
	if p.reading[sender] >= preconnectMaxPerSender {
		p.mu.Unlock()
		return false
	}
	p.reading[sender]++
	gs := p.gatesOfLocked(sender)
	p.mu.Unlock()
	for _, g := range gs {
		g.expect()
	}
	return true
}

// end counts a recording from sender as read and hands it (nil if it was
// unusable) to its microphone; the sender's other microphones stop
// waiting for it.
func (p *preconnect) end(sender, trackID string, pcm []int16) {
	p.mu.Lock()
	if p.reading[sender]--; p.reading[sender] <= 0 {
		delete(p.reading, sender)
	}
	var others []*preGate
	if p.reading[sender] == 0 {
		others = slices.DeleteFunc(p.gatesOfLocked(sender), func(o *preGate) bool { return o.key.trackID == trackID })
	}
	p.mu.Unlock()
	p.settle(sender, trackID, pcm)
	for _, o := range others {
		o.release()
	}
}

// settle hands a track's recording (nil: none that can be used) to its
// microphone, or keeps it for the microphone's subscription, so that
// its live audio waits for nothing.
func (p *preconnect) settle(sender, trackID string, pcm []int16) {
	key := preKey{sender, trackID}
	now := time.Now()
	p.mu.Lock()
	p.pruneLocked(now)
	g := p.gates[key]
	if g == nil {
		if len(p.recordings) < preconnectMaxPending {
			p.recordings[key] = recording{pcm, now}
		} else {
			p.log.Warn("voice: pre-connect audio dropped: too many waiting", "identity", sender, "track", trackID)
		}
	}
	p.mu.Unlock()
	if g != nil {
		g.deliver(pcm)
	}
}

func (p *preconnect) gatesOfLocked(identity string) []*preGate {
	var gs []*preGate
	for k, g := range p.gates {
		if k.identity == identity {
			gs = append(gs, g)
		}
	}
	return gs
}

// pruneLocked drops the recordings nobody claimed in time.
func (p *preconnect) pruneLocked(now time.Time) {
	for k, rec := range p.recordings {
		if now.Sub(rec.at) > preconnectKeep {
			delete(p.recordings, k)
		}
	}
}

// attach puts the track's recording in front of its live audio into in.
// The returned input holds the live audio while the recording is
// expected (the client said it sends one, or one is being received from
// it), for at most p.wait; a recording that comes within that time,
// expected or not, is heard before whatever is still held.
func (p *preconnect) attach(identity, trackID string, flagged bool, in audio.Input) audio.Input {
	key := preKey{identity, trackID}
	p.mu.Lock()
	p.pruneLocked(time.Now())
	if rec, ok := p.recordings[key]; ok {
		delete(p.recordings, key)
		p.mu.Unlock()
		if len(rec.audio) > 0 {
			_ = in.Write(rec.audio)
		}
		return in
	}
	g := &preGate{in: in, key: key, log: p.log, detach: p.detach, flagged: flagged, holding: flagged || p.reading[identity] > 0}
	p.gates[key] = g
	g.timer = time.AfterFunc(p.wait, g.expire)
	p.mu.Unlock()
	return g
}

// sendsPreconnect reports whether the client said, when it published the
// track, that it sends a pre-connect recording of it.
func sendsPreconnect(pub *lksdk.RemoteTrackPublication) bool {
	return slices.Contains(pub.TrackInfo().GetAudioFeatures(), livekit.AudioTrackFeature_TF_PRECONNECT_BUFFER)
}

// detach forgets g once it can take no recording.
func (p *preconnect) detach(g *preGate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gates[g.key] == g {
		delete(p.gates, g.key)
	}
}

// decodePreconnect returns a recording as voice.InputRate mono. PCM's
// format is in the stream's attributes (sampleRate, channels); WebM
// states its own.
func decodePreconnect(format audio.Format, attrs map[string]string, data []byte, log *slog.Logger) ([]int16, error) {
	if attrs["trackId"] == "" {
		return nil, errors.New("no trackId")
	}
	if format == audio.WebMOpus {
		webm, err := audio.DecodeWebMOpus(data, voice.InputRate, preconnectMaxSeconds*time.Second)
		if err == nil {
			log.Info("voice: pre-connect audio received", "seconds", float64(len(webm.PCM))/voice.InputRate, "cut_short", webm.CutShort)
		}
		return webm.PCM, err
	}
	rate, err := strconv.Atoi(attrs["sampleRate"])
	if err != nil || rate < 8000 || rate > 192000 {
		return nil, fmt.Errorf("sampleRate %q", attrs["sampleRate"])
	}
	channels, err := strconv.Atoi(attrs["channels"])
	if err != nil || channels < 1 || channels > 8 {
		return nil, fmt.Errorf("channels %q", attrs["channels"])
	}
	if len(data) > preconnectMaxSeconds*rate*channels*2 {
		return nil, fmt.Errorf("longer than %d s", preconnectMaxSeconds)
	}
	pcm, err := audio.DecodePCM(data, rate, channels, voice.InputRate)
	if err == nil {
		log.Info("voice: pre-connect audio received", "seconds", float64(len(pcm))/voice.InputRate)
	}
	return pcm, err
}
