package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/storage"
)

// serveConfig is every setting of `alicia serve`. Each is a flag and an
// environment variable of the same name, ALICIA_ and the flag's name in
// capitals with underscores (-livekit-url is ALICIA_LIVEKIT_URL); a flag
// given on the command line wins over the environment.
type serveConfig struct {
	Room           room.Config
	LLM            llm.Config
	DatabaseURL    string
	StoreReasoning string
	StorageKey     string
	SystemPrompt   string
	AGUIPath       string
	Thinking       string
	LogLevel       slog.Level
	DebugAddr      string
	Voice          string
	Speech         speech.ProviderConfig
	// Stage is the voice stage's turn-taking; its providers come from
	// Speech.
	Stage voice.Config
	// SpeechStandinPhrases limits the speech stand-in's recogniser.
	SpeechStandinPhrases string
	// ReasoningDefault: the show-reasoning mode of users who never chose.
	ReasoningDefault string
	// VoiceThinking and the budgets: how spoken and typed turns think
	// (thinkingPolicy).
	VoiceThinking string
	VoiceBudget   pipeline.Budget
	TypedBudget   pipeline.Budget
	// CoolOff is how long a failed model, recognition or synthesis server
	// is skipped; it goes to LLM and Speech.
	CoolOff time.Duration

	// StorageBatchWindow is how long the storage writer collects records
	// to send them together (group commit); zero: not at all.
	StorageBatchWindow time.Duration
}

func parseServeConfig(args []string, stderr io.Writer) (*serveConfig, error) {
	c := &serveConfig{}
	fs := c.flags()
	fs.SetOutput(stderr)
	if err := ff.Parse(fs, args, ff.WithEnvVarPrefix("ALICIA")); err != nil {
		return nil, err
	}
	c.LLM.CoolOff, c.Speech.CoolOff = c.CoolOff, c.CoolOff
	return c, c.validate()
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return "ALICIA_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (c *serveConfig) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.Room.Flags(fs)
	c.LLM.Flags(fs)
	fs.StringVar(&c.DatabaseURL, "database-url", "", "Postgres URL, migrated at start-up; empty keeps conversations in memory")
	fs.StringVar(&c.StoreReasoning, "store-reasoning", string(storage.ReasoningPlain), "what is stored of the reasoning: plain, encrypted or off")
	fs.StringVar(&c.StorageKey, "storage-key", "", "base64 32-byte AES key for -store-reasoning encrypted")
	fs.DurationVar(&c.StorageBatchWindow, "storage-batch-window", storage.DefaultBatchWindow, "how long the database writer collects records to send them in one round trip; 0: none")
	fs.StringVar(&c.SystemPrompt, "system-prompt", "You are Alicia, a helpful voice assistant. Answer briefly.", "the model's system prompt")
	fs.StringVar(&c.AGUIPath, "agui-path", "/agui", "path of the AG-UI endpoint")
	fs.StringVar(&c.Thinking, "thinking", "on", "on: the model reasons before answering; off: it answers at once")
	fs.StringVar(&c.DebugAddr, "debug-addr", "", "serve /debug/pprof on this address; keep it private")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "debug, info, warn or error; the LiveKit SDK's routine lines are debug")
	fs.StringVar(&c.Voice, "voice", "on", "on: listen to users' microphones and speak answers; off: text only")
	c.Speech.Flags(fs)
	c.Stage.Flags(fs)
	fs.StringVar(&c.SpeechStandinPhrases, "speech-standin-phrases", "", "a file of phrases, one a line, that the speech stand-in's recogniser is limited to")
	fs.StringVar(&c.ReasoningDefault, "reasoning-default", string(pipeline.DefaultReasoningMode), "show-reasoning mode of a user who never chose one: off, summary or full")
	fs.StringVar(&c.VoiceThinking, "voice-thinking", "", "spoken turns: on, off, or budget (reason within -voice-reasoning-budget); empty: budget when -thinking is on, else off")
	fs.TextVar(&c.VoiceBudget, "voice-reasoning-budget", pipeline.Budget{Duration: pipeline.DefaultReasoningBudget}, "how long (3s) or how many tokens (300tokens) a spoken turn may reason, or both (3s,300tokens); 0: unlimited")
	fs.TextVar(&c.TypedBudget, "typed-reasoning-budget", pipeline.Budget{}, "the same for typed turns; 0: unlimited")
	fs.DurationVar(&c.CoolOff, "failover-cool-off", failover.DefaultCoolOff, "how long a model, recognition or synthesis server that failed is skipped for the next in its list; doubles with each failure in a row, up to 5 minutes")
	fs.VisitAll(func(f *flag.Flag) { f.Usage += " (" + envName(f.Name) + ")" })
	return fs
}

// validate says at start what is wrong, in the words of the settings.
// Every setting is checked, so that one start lists all that is wrong; the
// list keeps the order of the checks below.
func (c *serveConfig) validate() error {
	errs := []error{
		c.Room.Validate(),
		c.storeReasoningError(),
		onOrOff("ALICIA_THINKING", c.Thinking),
		c.voiceThinkingError(),
		onOrOff("ALICIA_VOICE", c.Voice),
		c.Speech.Validate(),
		c.reasoningDefaultError(),
		c.aguiPathError(),
	}
	errs = append(errs, c.durationErrors()...)
	// Join drops the checks that passed, and is nil when all did.
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// onOrOff checks a setting that is either on or off.
func onOrOff(name, v string) error {
	if v != "on" && v != "off" {
		return fmt.Errorf("%s must be on or off, not %q", name, v)
	}
	return nil
}

// storeReasoningError checks ALICIA_STORE_REASONING and, when reasoning
// is stored encrypted, the key it needs.
func (c *serveConfig) storeReasoningError() error {
	switch storage.ReasoningMode(c.StoreReasoning) {
	case storage.ReasoningPlain, storage.ReasoningOff:
	case storage.ReasoningEncrypted:
		if _, err := storage.ParseKey(c.StorageKey); err != nil {
			return fmt.Errorf("ALICIA_STORAGE_KEY: %w", err)
		}
	default:
		return fmt.Errorf("ALICIA_STORE_REASONING must be plain, encrypted or off, not %q", c.StoreReasoning)
	}
	return nil
}

// voiceThinkingError checks ALICIA_VOICE_THINKING; thinking within a
// budget needs one.
func (c *serveConfig) voiceThinkingError() error {
	switch pipeline.ThinkingMode(c.VoiceThinking) {
	case "", pipeline.ThinkingOn, pipeline.ThinkingOff:
	case pipeline.ThinkingBudget:
		if c.VoiceBudget.Unlimited() {
			return errors.New("ALICIA_VOICE_THINKING=budget needs a budget in ALICIA_VOICE_REASONING_BUDGET")
		}
	default:
		return fmt.Errorf("ALICIA_VOICE_THINKING must be on, off or budget, not %q", c.VoiceThinking)
	}
	return nil
}

// reasoningDefaultError checks ALICIA_REASONING_DEFAULT, which users who
// never chose get and so must be a mode they could have chosen.
func (c *serveConfig) reasoningDefaultError() error {
	if !reasoning.Mode(c.ReasoningDefault).Valid() {
		return fmt.Errorf("ALICIA_REASONING_DEFAULT must be off, summary or full, not %q", c.ReasoningDefault)
	}
	return nil
}

// aguiPathError checks ALICIA_AGUI_PATH, which becomes a route pattern.
func (c *serveConfig) aguiPathError() error {
	if len(c.AGUIPath) == 0 || c.AGUIPath[0] != '/' {
		return fmt.Errorf("ALICIA_AGUI_PATH must start with /, not %q", c.AGUIPath)
	}
	return nil
}

// durationErrors checks the cool-off and the timeouts, which must be
// positive, and the storage batch window, which may be zero.
func (c *serveConfig) durationErrors() []error {
	var errs []error
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"ALICIA_FAILOVER_COOL_OFF", c.CoolOff}, {"ALICIA_LLM_FIRST_BYTE_TIMEOUT", c.LLM.FirstByteTimeout},
		{"ALICIA_STT_FIRST_BYTE_TIMEOUT", c.Speech.STTFirstByte}, {"ALICIA_TTS_FIRST_BYTE_TIMEOUT", c.Speech.TTSFirstByte}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %v", d.name, d.d))
		}
	}
	if c.StorageBatchWindow < 0 {
		errs = append(errs, fmt.Errorf("ALICIA_STORAGE_BATCH_WINDOW must not be negative, not %v", c.StorageBatchWindow))
	}
	if c.LLM.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ALICIA_LLM_IDLE_TIMEOUT must be positive, not %v", c.LLM.IdleTimeout))
	}
	return errs
}

// thinkingPolicy is how the settings ask typed and spoken turns to think:
// typed turns as ALICIA_THINKING says, within ALICIA_TYPED_REASONING_BUDGET
// if one is set; spoken turns as ALICIA_VOICE_THINKING says, by default
// within ALICIA_VOICE_REASONING_BUDGET unless thinking is off.
func (c *serveConfig) thinkingPolicy() pipeline.ThinkingPolicy {
	typed := pipeline.Thinking{Mode: pipeline.ThinkingOff}
	if c.Thinking == "on" {
		typed.Mode = pipeline.ThinkingOn
		if !c.TypedBudget.Unlimited() {
			typed = pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: c.TypedBudget}
		}
	}
	spoken := pipeline.Thinking{Mode: pipeline.ThinkingMode(c.VoiceThinking), Budget: c.VoiceBudget}
	if spoken.Mode == "" {
		spoken.Mode = pipeline.ThinkingOff
		if c.Thinking == "on" {
			spoken.Mode = pipeline.ThinkingBudget
		}
	}
	if spoken.Mode == pipeline.ThinkingBudget && c.VoiceBudget.Unlimited() {
		spoken.Mode = pipeline.ThinkingOn
	}
	return pipeline.ThinkingPolicy{Typed: typed, Spoken: spoken}
}

// pipelineConfig is the engine's configuration: the settings, with the
// model client and the turn telemetry assembled at start.
func (c *serveConfig) pipelineConfig(client llm.Client, turns pipeline.TurnObserver, log *slog.Logger) pipeline.Config {
	policy := c.thinkingPolicy()
	return pipeline.Config{LLM: client, System: c.SystemPrompt, Thinking: c.Thinking == "on", ThinkingPolicy: &policy,
		ReasoningDefault: reasoning.Mode(c.ReasoningDefault), Telemetry: turns, Logger: log}
}

// batchWindow is ALICIA_STORAGE_BATCH_WINDOW in storage.Config's terms,
// where zero stands for the default.
func (c *serveConfig) batchWindow() time.Duration {
	if c.StorageBatchWindow == 0 {
		return -1
	}
	return c.StorageBatchWindow
}
