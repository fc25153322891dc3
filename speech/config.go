package speech

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
)

// ProviderConfig says where speech recognition and synthesis are served.
type ProviderConfig struct {
	// STTURL and TTSURL are OpenAI-compatible base URLs including /v1,
	// or several, comma-separated, in order of preference: the next
	// serves while one is down (they share model, key and the rest);
	// empty means no server (alicia serve then runs the stand-in).
	STTURL, STTModel, STTAPIKey string
	// STTStream asks the recogniser for streamed partial transcripts.
	STTStream bool
	// STTTransport is "http" (POST /audio/transcriptions per utterance)
	// or "realtime" (the Realtime transcription WebSocket, audio sent as
	// it is spoken).
	STTTransport string
	Language     string

	TTSURL, TTSModel, TTSAPIKey, TTSVoice string
	// TTSFormat is "pcm" (default) or "wav".
	TTSFormat string
	// TTSRate is the sample rate of "pcm" responses (DefaultPCMRate).
	TTSRate int
	// TTSStreamFormat is "audio" (a chunked audio body) or "sse"
	// (OpenAI's speech.audio.delta events).
	TTSStreamFormat string

	// STTFirstByte and TTSFirstByte bound the wait for a server's first
	// byte when another could serve instead (defaults 5 s; for an
	// upload, plus the utterance's length); CoolOff is
	// how long a failed server is skipped (default 30 s, doubling with
	// each failure in a row up to five minutes).
	STTFirstByte, TTSFirstByte, CoolOff time.Duration
	Logger                              *slog.Logger
}

// Flags registers the providers' settings on fs (-stt-url is
// ALICIA_STT_URL for a caller that reads the environment too).
func (c *ProviderConfig) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.STTURL, "stt-url", "", "an OpenAI-compatible speech recogniser (POST /v1/audio/transcriptions; the URL includes /v1), or several, comma-separated, in order of preference; empty: the built-in stand-in")
	fs.DurationVar(&c.STTFirstByte, "stt-first-byte-timeout", DefaultSTTFirstByte, "with several recognisers, how long one may take to answer before the next is asked (for an uploaded utterance, plus its length)")
	fs.StringVar(&c.STTModel, "stt-model", "whisper-1", "the recogniser's model")
	fs.StringVar(&c.STTAPIKey, "stt-api-key", "", "the recogniser's API key")
	fs.BoolVar(&c.STTStream, "stt-stream", false, "ask the recogniser for streamed partial transcripts (stream=true)")
	fs.StringVar(&c.STTTransport, "stt-transport", "http", "http: upload each utterance (POST /v1/audio/transcriptions); realtime: stream audio as it is spoken over the Realtime transcription WebSocket (/v1/realtime?intent=transcription), from the same URL")
	fs.StringVar(&c.Language, "stt-language", "", "the language spoken (ISO 639-1); empty: the recogniser detects it")
	fs.StringVar(&c.TTSURL, "tts-url", "", "an OpenAI-compatible speech synthesiser (POST /v1/audio/speech), or several, comma-separated, in order of preference; empty: the built-in stand-in")
	fs.DurationVar(&c.TTSFirstByte, "tts-first-byte-timeout", DefaultTTSFirstByte, "with several synthesisers, how long one may take to start its audio before the next is asked")
	fs.StringVar(&c.TTSModel, "tts-model", "tts-1", "the synthesiser's model")
	fs.StringVar(&c.TTSAPIKey, "tts-api-key", "", "the synthesiser's API key")
	fs.StringVar(&c.TTSVoice, "tts-voice", "alloy", "the synthesiser's voice")
	fs.StringVar(&c.TTSFormat, "tts-format", "pcm", "pcm (streamed 16-bit mono) or wav")
	fs.IntVar(&c.TTSRate, "tts-pcm-rate", DefaultPCMRate, "the sample rate of pcm responses, in Hz")
	fs.StringVar(&c.TTSStreamFormat, "tts-stream-format", "audio", "audio: a chunked audio body; sse: server-sent speech.audio.delta events (stream_format=sse, with pcm); both play from the first bytes")
}

// Validate says what is wrong with the settings.
func (c *ProviderConfig) Validate() error {
	var errs []error
	if c.TTSFormat != "pcm" && c.TTSFormat != "wav" {
		errs = append(errs, fmt.Errorf("ALICIA_TTS_FORMAT must be pcm or wav, not %q", c.TTSFormat))
	}
	if c.STTTransport != "http" && c.STTTransport != "realtime" {
		errs = append(errs, fmt.Errorf("ALICIA_STT_TRANSPORT must be http or realtime, not %q", c.STTTransport))
	}
	switch c.TTSStreamFormat {
	case "audio":
	case "sse":
		if c.TTSFormat != "pcm" {
			errs = append(errs, fmt.Errorf("ALICIA_TTS_STREAM_FORMAT sse carries pcm: ALICIA_TTS_FORMAT must be pcm, not %q", c.TTSFormat))
		}
	default:
		errs = append(errs, fmt.Errorf("ALICIA_TTS_STREAM_FORMAT must be audio or sse, not %q", c.TTSStreamFormat))
	}
	if c.TTSRate < 8000 || c.TTSRate > 48000 {
		errs = append(errs, fmt.Errorf("ALICIA_TTS_PCM_RATE must be a sample rate from 8000 to 48000 Hz, not %d", c.TTSRate))
	}
	return errors.Join(errs...)
}

// Recognizer builds the configured recogniser, over its own pool of
// servers (build it once). With the realtime transport it is a
// *RealtimeRecognizer, whose Open streams a speaker's audio as it is
// spoken.
func (c ProviderConfig) Recognizer() Recognizer {
	urls := failover.Split(c.STTURL)
	pool := failover.New("stt", urls, failover.Config{FirstByte: c.STTFirstByte, CoolOff: c.CoolOff, Logger: c.Logger})
	if c.STTTransport == "realtime" {
		return &RealtimeRecognizer{URL: pool.First(), Model: c.STTModel, APIKey: c.STTAPIKey, Language: c.Language, Logger: c.Logger, servers: servers{pool: pool}}
	}
	return &OpenAIRecognizer{URL: pool.First(), Model: c.STTModel, APIKey: c.STTAPIKey, Streaming: c.STTStream, servers: servers{pool: pool}}
}

// Synthesizer builds the configured synthesiser, over its own pool of
// servers (build it once).
func (c ProviderConfig) Synthesizer() Synthesizer {
	pool := failover.New("tts", failover.Split(c.TTSURL), failover.Config{FirstByte: c.TTSFirstByte, CoolOff: c.CoolOff, Logger: c.Logger})
	return &OpenAISynthesizer{URL: pool.First(), Model: c.TTSModel, APIKey: c.TTSAPIKey, Voice: c.TTSVoice, Format: c.TTSFormat, PCMRate: c.TTSRate,
		StreamFormat: c.TTSStreamFormat, servers: servers{pool: pool}}
}
