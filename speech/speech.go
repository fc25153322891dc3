// Package speech is Alicia's speech providers: recognisers and
// synthesisers that speak OpenAI's audio API (a whole utterance uploaded,
// transcripts and audio streamed back as chunks or SSE events) and its
// Realtime transcription WebSocket (audio sent as it is spoken), each
// over an ordered list of servers that fail over to the next.
//
// They are shaped like llm.Client: Stream(ctx, request) yields events and
// ends with exactly one final or error event, and every failure is a
// *provider.Error with its kind. The voice stage (pipeline/voice) names
// the ports it needs from them; the stand-in (speech/standin) serves the
// same API for tests and for a start without speech servers.
package speech

// RecognitionRate is the sample rate of the audio a realtime stream
// takes: 16 kHz mono, what speech recognisers expect.
const RecognitionRate = 16000
