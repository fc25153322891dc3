package voice

import (
	"errors"
	"flag"
	"fmt"
)

// ProviderConfig says where speech recognition and synthesis are served.
type ProviderConfig struct {
	// STTURL and TTSURL are OpenAI-compatible base URLs including /v1;
	// empty means no server (alicia serve then runs the stand-in).
	STTURL, STTModel, STTAPIKey string
	// STTStream asks the recogniser for streamed partial transcripts.
	STTStream bool
	Language  string

	TTSURL, TTSModel, TTSAPIKey, TTSVoice string
	// TTSFormat is "pcm" (default) or "wav".
	TTSFormat string
	// TTSRate is the sample rate of "pcm" responses. Default 24000.
	TTSRate int
}

// Flags registers the providers' settings on fs (-stt-url is
// ALICIA_STT_URL for a caller that reads the environment too).
func (c *ProviderConfig) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.STTURL, "stt-url", "", "an OpenAI-compatible speech recogniser (POST /v1/audio/transcriptions; the URL includes /v1); empty: the built-in stand-in")
	fs.StringVar(&c.STTModel, "stt-model", "whisper-1", "the recogniser's model")
	fs.StringVar(&c.STTAPIKey, "stt-api-key", "", "the recogniser's API key")
	fs.BoolVar(&c.STTStream, "stt-stream", false, "ask the recogniser for streamed partial transcripts (stream=true)")
	fs.StringVar(&c.Language, "stt-language", "", "the language spoken (ISO 639-1); empty: the recogniser detects it")
	fs.StringVar(&c.TTSURL, "tts-url", "", "an OpenAI-compatible speech synthesiser (POST /v1/audio/speech); empty: the built-in stand-in")
	fs.StringVar(&c.TTSModel, "tts-model", "tts-1", "the synthesiser's model")
	fs.StringVar(&c.TTSAPIKey, "tts-api-key", "", "the synthesiser's API key")
	fs.StringVar(&c.TTSVoice, "tts-voice", "alloy", "the synthesiser's voice")
	fs.StringVar(&c.TTSFormat, "tts-format", "pcm", "pcm (streamed 16-bit mono) or wav")
	fs.IntVar(&c.TTSRate, "tts-pcm-rate", 24000, "the sample rate of pcm responses, in Hz")
}

// Validate says what is wrong with the settings.
func (c *ProviderConfig) Validate() error {
	var errs []error
	if c.TTSFormat != "pcm" && c.TTSFormat != "wav" {
		errs = append(errs, fmt.Errorf("ALICIA_TTS_FORMAT must be pcm or wav, not %q", c.TTSFormat))
	}
	if c.TTSRate < 8000 || c.TTSRate > 48000 {
		errs = append(errs, fmt.Errorf("ALICIA_TTS_PCM_RATE must be a sample rate from 8000 to 48000 Hz, not %d", c.TTSRate))
	}
	return errors.Join(errs...)
}

// Recognizer builds the configured recogniser.
func (c ProviderConfig) Recognizer() Recognizer {
	return &OpenAIRecognizer{URL: c.STTURL, Model: c.STTModel, APIKey: c.STTAPIKey, Streaming: c.STTStream}
}

// Synthesizer builds the configured synthesiser.
func (c ProviderConfig) Synthesizer() Synthesizer {
	return &OpenAISynthesizer{URL: c.TTSURL, Model: c.TTSModel, APIKey: c.TTSAPIKey, Voice: c.TTSVoice, Format: c.TTSFormat, PCMRate: c.TTSRate}
}
