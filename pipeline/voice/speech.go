package voice

import (
	"context"
	"iter"

	"github.com/alicia-voice/alicia/speech"
)

// The ports the stage needs from speech providers. The speech package
// implements them over HTTP and WebSocket (speech.ProviderConfig builds
// them from the configuration); a test may bring its own.

// Recognizer turns an utterance into text: its events end with one
// speech.RecognizeFinal or speech.RecognizeError; breaking out early or
// cancelling ctx stops the request.
type Recognizer interface {
	Stream(ctx context.Context, req *speech.RecognizeRequest) iter.Seq[speech.RecognizeEvent]
}

// LiveRecognizer is a Recognizer that can also hear a speaker's audio as
// it is spoken (speech.RealtimeRecognizer): the stage streams each
// utterance to it and has its transcript moments after its end, instead
// of uploading it whole.
type LiveRecognizer interface {
	Recognizer
	Open(ctx context.Context) (*speech.RealtimeStream, error)
}

// Synthesizer turns text into audio: its events end with one
// speech.SynthesizeDone or speech.SynthesizeError; breaking out early or
// cancelling ctx stops the request.
type Synthesizer interface {
	Stream(ctx context.Context, req *speech.SynthesizeRequest) iter.Seq[speech.SynthesizeEvent]
}
