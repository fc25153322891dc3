package voice

import (
	"fmt"
	"strconv"
	"strings"
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

// ConfigFromEnv reads ALICIA_STT_URL, ALICIA_STT_MODEL, ALICIA_STT_API_KEY,
// ALICIA_STT_STREAM, ALICIA_STT_LANGUAGE, ALICIA_TTS_URL, ALICIA_TTS_MODEL,
// ALICIA_TTS_API_KEY, ALICIA_TTS_VOICE, ALICIA_TTS_FORMAT and
// ALICIA_TTS_PCM_RATE.
func ConfigFromEnv(getenv func(string) string) (ProviderConfig, error) {
	c := ProviderConfig{
		STTURL: getenv("ALICIA_STT_URL"), STTModel: getenv("ALICIA_STT_MODEL"), STTAPIKey: getenv("ALICIA_STT_API_KEY"),
		Language: getenv("ALICIA_STT_LANGUAGE"),
		TTSURL:   getenv("ALICIA_TTS_URL"), TTSModel: getenv("ALICIA_TTS_MODEL"), TTSAPIKey: getenv("ALICIA_TTS_API_KEY"),
		TTSVoice: getenv("ALICIA_TTS_VOICE"), TTSFormat: getenv("ALICIA_TTS_FORMAT"),
	}
	if c.STTModel == "" {
		c.STTModel = "whisper-1"
	}
	if c.TTSModel == "" {
		c.TTSModel = "tts-1"
	}
	if v := getenv("ALICIA_STT_STREAM"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("ALICIA_STT_STREAM: %w", err)
		}
		c.STTStream = b
	}
	switch strings.ToLower(c.TTSFormat) {
	case "", "pcm", "wav":
		c.TTSFormat = strings.ToLower(c.TTSFormat)
	default:
		return c, fmt.Errorf("ALICIA_TTS_FORMAT %q: want pcm or wav", c.TTSFormat)
	}
	if v := getenv("ALICIA_TTS_PCM_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 8000 || n > 48000 {
			return c, fmt.Errorf("ALICIA_TTS_PCM_RATE %q: want a sample rate in Hz", v)
		}
		c.TTSRate = n
	}
	if c.TTSRate == 0 {
		c.TTSRate = 24000
	}
	return c, nil
}

// Recognizer builds the configured recogniser.
func (c ProviderConfig) Recognizer() Recognizer {
	return &OpenAIRecognizer{URL: c.STTURL, Model: c.STTModel, APIKey: c.STTAPIKey, Streaming: c.STTStream}
}

// Synthesizer builds the configured synthesiser.
func (c ProviderConfig) Synthesizer() Synthesizer {
	return &OpenAISynthesizer{URL: c.TTSURL, Model: c.TTSModel, APIKey: c.TTSAPIKey, Voice: c.TTSVoice, Format: c.TTSFormat, PCMRate: c.TTSRate}
}
