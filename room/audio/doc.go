// Package audio is the codec work under Alicia's LiveKit binding, apart
// from any session: the agent's RTP Opus track (Track), the decoding of a
// microphone's Opus packets with its DTX and voice-activity flags
// (NewMicDecoder), and the recordings clients make before an agent joins
// (WebM/Opus from browsers, raw PCM from the native SDKs). It imports
// nothing of room or the engine; room binds it to LiveKit.
package audio
