package voice

import (
	"fmt"
	"math"
	"strings"
	"time"

	webrtcvad "github.com/maxhawkins/go-webrtcvad"
)

// EndpointConfig tunes the endpointer. Zero fields take the defaults,
// which follow LiveKit Agents' (min_endpointing_delay 0.5 s,
// max_endpointing_delay 3 s).
type EndpointConfig struct {
	// Aggressiveness is the WebRTC VAD mode, 0 (least) to 3 (most eager
	// to call a frame noise). Default 2.
	Aggressiveness int
	// MinSpeech is how long voice must last before it counts as speech,
	// so that clicks and knocks start nothing. Default 120 ms.
	MinSpeech time.Duration
	// UnpitchedSpeech is how long voice without pitch must last to be
	// confirmed as speech all the same: a whisper. Shorter, it may be
	// a cough, a click, a door or a burst of noise, which the VAD takes
	// for voice; voice with pitch is confirmed at once. Default 500 ms,
	// LiveKit Agents' shortest interruption.
	UnpitchedSpeech time.Duration
	// Silence ends an utterance. Default 500 ms.
	Silence time.Duration
	// UnfinishedSilence ends an utterance whose words so far look
	// unfinished ("…and", "…the", a trailing comma). Default 1.5 s.
	UnfinishedSilence time.Duration
	// MaxSilence bounds UnfinishedSilence. Default 3 s.
	MaxSilence time.Duration
	// PreRoll is audio kept from before the speech start, so that the
	// recogniser hears the first consonant. Default 300 ms.
	PreRoll time.Duration
	// NoiseMarginDB is how far above the adaptive noise floor a frame's
	// level must be, beside the VAD's verdict, to count as voice.
	// Default 6 dB.
	NoiseMarginDB float64
	// AdaptiveMin and AdaptiveMax, when AdaptiveMax is set, let the
	// silence that ends an utterance follow the speaker: once a few of
	// their pauses inside utterances are known, it is a little longer
	// than most of them, within these bounds, in place of Silence. A
	// quick speaker is answered sooner, a slow one is not cut off
	// mid-thought. AdaptiveMin defaults to 250 ms.
	AdaptiveMin, AdaptiveMax time.Duration
}

func (c EndpointConfig) withDefaults() EndpointConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Aggressiveness == 0 {
		c.Aggressiveness = 2
	}
	def(&c.MinSpeech, defaultMinSpeech)
	def(&c.UnpitchedSpeech, defaultUnpitchedSpeech)
	def(&c.Silence, defaultSilence)
	def(&c.UnfinishedSilence, defaultUnfinishedSilence)
	def(&c.MaxSilence, 3*time.Second)
	def(&c.PreRoll, 300*time.Millisecond)
	if c.UnfinishedSilence > c.MaxSilence {
		c.UnfinishedSilence = c.MaxSilence
	}
	if c.NoiseMarginDB == 0 {
		c.NoiseMarginDB = 6
	}
	if c.AdaptiveMax > 0 {
		def(&c.AdaptiveMin, defaultAdaptiveMin)
		c.AdaptiveMin = min(c.AdaptiveMin, c.AdaptiveMax)
	}
	return c
}

// EndpointEventKind tells what an EndpointEvent reports.
type EndpointEventKind uint8

const (
	// SpeechStarted: voice has lasted MinSpeech.
	SpeechStarted EndpointEventKind = iota + 1
	// SpeechConfirmed: the utterance is speech, not noise: its voice has
	// pitch, or has lasted UnpitchedSpeech. It comes once per utterance,
	// right after SpeechStarted when the onset had pitch already, and
	// never for a sound that ends before.
	SpeechConfirmed
	// SpeechEnded: the utterance is over; Audio holds it, pre-roll
	// included.
	SpeechEnded
)

// EndpointEvent is what one frame completed.
type EndpointEvent struct {
	Kind  EndpointEventKind
	Audio []int16
	// Speech is how long the utterance's voice lasted; Trailing, for
	// SpeechEnded, the silence after it that ended it; Onset, for
	// SpeechStarted, how long before the end of this frame its first
	// voice came: Speech and the short gaps inside it.
	Speech, Trailing, Onset time.Duration
}

// Endpointer finds utterances in a stream of 16 kHz frames. It counts
// time in audio, not on a clock, so it behaves the same in a test as on a
// live track. One Endpointer serves one speaker and is not safe for
// concurrent use.
type Endpointer struct {
	cfg EndpointConfig
	vad *webrtcvad.VAD

	floor    float64 // the noise level, as RMS
	floorSet bool

	inSpeech bool
	// run counts the voiced frames of a sound before the start; span
	// the frames since its first, and gap the unvoiced ones in a row
	// since its last, at most maxRunGap.
	run, span, gap int
	// confirmed: the run or the utterance is known to be speech; until
	// then pitch holds the periodicity of the frame before
	// (pitch.go). prev and before are the two frames before this one,
	// which its pitch is measured with; recent whether the last frames
	// were voice, this one in bit 0, and levels their RMS, this one's
	// first; echoed whether the frames may carry the agent's echo
	// (SetEchoed), which makes the pitch's measure the stricter one.
	confirmed    bool
	echoed       bool
	pitch        pitchTrack
	prev, before []int16
	recent       uint8
	levels       [3]float64
	silent       int // unvoiced frames in a row inside speech
	voiced       int // voiced frames since the start
	pre          [][]int16
	audio        []int16
	text         string

	// pauses are the speaker's recent pauses; sinceEnd counts the frames
	// since the last utterance's voice ended, while ended says one did
	// and its gap to the next may still be a pause it was cut off at.
	pauses   pauses
	sinceEnd int
	ended    bool
}

// Silence is the silence that now ends an utterance of this speaker
// whose words do not look unfinished: Silence, or with AdaptiveMax what
// the speaker's pauses call for.
func (e *Endpointer) Silence() time.Duration {
	if e.cfg.AdaptiveMax <= 0 {
		return e.cfg.Silence
	}
	return e.pauses.silence(e.cfg.Silence, e.cfg.AdaptiveMin, e.cfg.AdaptiveMax)
}

// NewEndpointer builds an endpointer around a WebRTC VAD.
func NewEndpointer(cfg EndpointConfig) (*Endpointer, error) {
	cfg = cfg.withDefaults()
	v, err := webrtcvad.New()
	if err != nil {
		return nil, err
	}
	if err := v.SetMode(cfg.Aggressiveness); err != nil {
		return nil, fmt.Errorf("VAD mode %d: %w", cfg.Aggressiveness, err)
	}
	return &Endpointer{cfg: cfg, vad: v}, nil
}

// InSpeech reports whether an utterance is under way.
func (e *Endpointer) InSpeech() bool { return e.inSpeech }

// Speech is how long the current utterance's voice has lasted.
func (e *Endpointer) Speech() time.Duration { return time.Duration(e.voiced) * FrameDuration }

// Utterance is a copy of the current utterance's audio so far.
func (e *Endpointer) Utterance() []int16 {
	if !e.inSpeech {
		return nil
	}
	return append([]int16(nil), e.audio...)
}

// Trailing is how long the current utterance has been silent: the pause
// it is in, 0 while its voice goes on.
func (e *Endpointer) Trailing() time.Duration {
	if !e.inSpeech {
		return 0
	}
	return time.Duration(e.silent) * FrameDuration
}

// SetEchoed says whether the frames pushed from now on may carry what is
// left of the agent's echo: their pitch is then measured more strictly
// (pitch.go).
func (e *Endpointer) SetEchoed(echoed bool) { e.echoed = echoed }

// Forget drops the sound counted so far towards the start of an
// utterance, which was not the speaker's: the agent's echo, come back at
// a delay the suppressor had not followed yet. An utterance under way
// goes on.
func (e *Endpointer) Forget() {
	if !e.inSpeech {
		e.run, e.span, e.gap, e.recent = 0, 0, 0, 0
		e.confirmed, e.pitch = false, pitchTrack{}
	}
}

// SetText gives the endpointer the words recognised so far in the
// current utterance, so that it waits longer when they look unfinished.
func (e *Endpointer) SetText(s string) { e.text = s }

// Push processes one frame of FrameSamples samples.
func (e *Endpointer) Push(frame []int16) ([]EndpointEvent, error) {
	if len(frame) != FrameSamples {
		return nil, fmt.Errorf("frame of %d samples; want %d", len(frame), FrameSamples)
	}
	voiced, err := e.judge(frame)
	if err != nil {
		return nil, err
	}
	e.recent <<= 1
	if voiced {
		e.recent |= 1
	}
	var evs []EndpointEvent
	if !e.inSpeech {
		evs = e.beforeSpeech(frame, voiced)
	} else {
		evs = e.duringSpeech(frame, voiced)
	}
	// Kept, not copied, as the pre-roll's frames are: the next frames'
	// pitch is measured with them.
	e.before, e.prev = e.prev, frame
	return evs, nil
}

// judge judges a frame: voice by the VAD, and loud enough over the
// noise floor, which it updates.
func (e *Endpointer) judge(frame []int16) (bool, error) {
	level := rms(frame)
	e.levels = [3]float64{level, e.levels[0], e.levels[1]}
	// Below minLevel a frame is silence whatever the VAD says, so the VAD
	// is spared it: the silence a client in DTX leaves between utterances
	// is most of what it sends.
	voice := false
	if level > minLevel {
		var err error
		if voice, err = e.vad.Process(InputRate, pcmBytes(frame)); err != nil {
			return false, err
		}
	}
	loud := level > e.floor*math.Pow(10, e.cfg.NoiseMarginDB/20) && level > minLevel
	if !voice || !e.floorSet || !e.inSpeech {
		e.follow(level)
	}
	return voice && loud, nil
}

// follow moves the noise floor towards level. The floor follows, in
// decibels, the level outside utterances and of what the VAD calls noise
// inside them: fast downwards (a quieter room), slower upwards (a fan
// starting; a time constant of 0.4 s keeps a rise of 13 dB/s within the
// margin), so that the first syllables of speech lift it only a little.
func (e *Endpointer) follow(level float64) {
	switch db, floor := dbfs(level), dbfs(e.floor); {
	case !e.floorSet:
		e.floor, e.floorSet = level, true
	case db < floor:
		e.floor = fromDBFS(floor + 0.3*(db-floor))
	default:
		e.floor = fromDBFS(floor + 0.05*(db-floor))
	}
}

// beforeSpeech takes a frame outside an utterance: voice that lasts
// MinSpeech starts one, with the pre-roll kept before it.
func (e *Endpointer) beforeSpeech(frame []int16, voiced bool) []EndpointEvent {
	e.pre = append(e.pre, frame)
	if keep := frames(e.cfg.PreRoll) + max(e.span, frames(e.cfg.MinSpeech)); len(e.pre) > keep {
		e.pre = e.pre[len(e.pre)-keep:]
	}
	e.extendRun(voiced)
	e.confirm(frame, e.run)
	if e.run == 0 {
		// Pitch too short to be speech: the ring of a knock.
		e.confirmed, e.pitch = false, pitchTrack{}
	}
	e.sinceEnd++
	if e.run < frames(e.cfg.MinSpeech) {
		return nil
	}
	// Speech soon after the end of the last utterance: the speaker was
	// cut off in a pause, which is the kind of pause the silence must
	// learn to outlast.
	if gap := time.Duration(e.sinceEnd-e.span) * FrameDuration; e.ended && e.cfg.AdaptiveMax > 0 && gap >= minPause && gap <= e.cfg.AdaptiveMax {
		e.pauses.add(gap)
	}
	e.ended = false
	e.inSpeech, e.silent, e.voiced = true, 0, e.run
	e.audio = e.audio[:0]
	for _, f := range e.pre {
		e.audio = append(e.audio, f...)
	}
	e.pre = e.pre[:0]
	evs := []EndpointEvent{{Kind: SpeechStarted, Speech: e.Speech(), Onset: time.Duration(e.span) * FrameDuration}}
	if e.confirmed {
		evs = append(evs, EndpointEvent{Kind: SpeechConfirmed, Speech: e.Speech()})
	}
	return evs
}

// maxRunGap is how many unvoiced frames in a row a sound's run to
// MinSpeech goes on through: the closure and the burst of a "t" or a
// "p" (20 to 40 ms), which the VAD calls silence, are inside a word.
// Restarted there, a "stop" counted its MinSpeech from its vowel,
// 100 ms after its first sound.
const maxRunGap = 2

// extendRun counts a frame before the start into the sound's run.
func (e *Endpointer) extendRun(voiced bool) {
	switch {
	case voiced:
		e.run, e.span, e.gap = e.run+1, e.span+1, 0
	case e.run > 0 && e.gap < maxRunGap:
		e.span, e.gap = e.span+1, e.gap+1
	default:
		e.run, e.span, e.gap = 0, 0, 0
	}
}

// duringSpeech takes a frame of an utterance: enough silence, longer
// after words that look unfinished, ends it.
func (e *Endpointer) duringSpeech(frame []int16, voiced bool) []EndpointEvent {
	e.audio = append(e.audio, frame...)
	if voiced {
		if pause := time.Duration(e.silent) * FrameDuration; pause >= minPause {
			e.pauses.add(pause) // a pause that did not end the utterance
		}
		e.silent = 0
		e.voiced++
		if e.confirm(frame, e.voiced) {
			return []EndpointEvent{{Kind: SpeechConfirmed, Speech: e.Speech()}}
		}
		return nil
	}
	e.pitch = pitchTrack{}
	e.silent++
	wait := e.Silence()
	if LooksUnfinished(e.text) {
		wait = min(max(wait, e.cfg.UnfinishedSilence), e.cfg.MaxSilence)
	}
	if e.silent < frames(wait) {
		return nil
	}
	// The utterance's audio goes with the event, and the next utterance
	// grows a buffer of its own: kept, the longest utterance's buffer
	// would stay with every speaker for good.
	ev := EndpointEvent{Kind: SpeechEnded, Audio: e.audio, Speech: e.Speech(), Trailing: time.Duration(e.silent) * FrameDuration}
	e.ended, e.sinceEnd = true, e.silent
	e.inSpeech, e.run, e.span, e.gap, e.voiced, e.text = false, 0, 0, 0, 0, ""
	e.confirmed, e.pitch = false, pitchTrack{}
	e.audio = nil
	return []EndpointEvent{ev}
}

func pcmBytes(s []int16) []byte {
	b := make([]byte, 2*len(s))
	for i, v := range s {
		b[2*i] = byte(v)
		b[2*i+1] = byte(uint16(v) >> 8)
	}
	return b
}

// unfinishedEnds are words after which an English sentence rarely stops.
var unfinishedEnds = map[string]bool{
	"and": true, "or": true, "but": true, "so": true, "because": true, "the": true, "a": true, "an": true,
	"to": true, "of": true, "in": true, "on": true, "at": true, "for": true, "with": true, "from": true,
	"my": true, "your": true, "is": true, "are": true, "what": true, "how": true, "if": true, "that": true,
	"um": true, "uh": true, "like": true, "about": true, "than": true, "then": true,
}

// LooksUnfinished reports whether a transcript so far seems to stop in the
// middle of a sentence: a trailing comma or a word that needs another
// after it.
func LooksUnfinished(text string) bool {
	t := strings.TrimSpace(strings.ToLower(text))
	if strings.HasSuffix(t, ",") {
		return true
	}
	if t == "" || strings.ContainsAny(t[len(t)-1:], ".?!") {
		return false
	}
	words := strings.Fields(t)
	return unfinishedEnds[strings.Trim(words[len(words)-1], "\"'")]
}
