package pipeline

import "github.com/alicia-voice/alicia/reasoning"

// ReasoningDefault is the show-reasoning mode of a user who never chose
// one, after Config's defaults: the preferences API reports it beside the
// user's own choice.
func (e *Engine) ReasoningDefault() reasoning.Mode { return e.cfg.ReasoningDefault }
