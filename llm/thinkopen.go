package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Whether a model's chat template opens <think> in the prompt (Qwen3
// Thinking-2507, Qwen3.5). Such a model's raw output is reasoning, a bare
// </think>, then the answer; a server without a reasoning parser passes it
// on as content, and read as an answer the whole reasoning would be spoken
// and sent back as history.
const (
	thinkUnknown int32 = iota
	thinkPlain         // the template does not open <think>
	thinkOpens         // it does: content starts as reasoning
)

// modelKnowledge is what a client knows of its model's template, shared by
// its turns: configuration or the model's name decide it, else the backend
// is asked once, else the first turn that shows a tag teaches it. Turns
// keep teaching: a model name is not one model behind a router or a
// gateway alias that serves two deployments, so what the last turn showed
// wins over what was believed before.
type modelKnowledge struct {
	state  atomic.Int32
	probed atomic.Bool
	// seen is the template the turns last showed; mixed says they have
	// shown both under this name.
	seen  atomic.Int32
	mixed atomic.Bool
	// probe asks the backend what model it serves; nil where the backend
	// cannot say (AG-UI).
	probe func(ctx context.Context) int32
}

func newModelKnowledge(forcedOpen bool, model string, probe func(ctx context.Context) int32) *modelKnowledge {
	k := &modelKnowledge{probe: probe}
	switch {
	case forcedOpen:
		k.state.Store(thinkOpens)
	default:
		k.state.Store(thinkByName(model))
	}
	return k
}

func (k *modelKnowledge) get() int32 { return k.state.Load() }

// assume is what a new turn takes the template to be. For a name that has
// shown both templates, the choice that is right whichever comes: with
// thinking on, both write a tag before any answer (the hybrid an opening
// <think>, which reasoning mode drops, the other a closing one), so
// content starts as reasoning; with thinking off the hybrid writes a bare
// answer, which must stream, and a Thinking-2507 model's reasoning read as
// answer is retracted at its </think>.
func (k *modelKnowledge) assume(thinking bool) int32 {
	if k.mixed.Load() {
		if thinking {
			return thinkOpens
		}
		return thinkPlain
	}
	return k.get()
}

// believe records what the backend said of its model: an unknown model
// only, so that a configured answer is never overruled by it.
func (k *modelKnowledge) believe(v int32) {
	k.state.CompareAndSwap(thinkUnknown, v)
}

// observe records the template a turn showed: an inline <think> or a
// whole answer without tags (plain), or a bare </think> (opens). It
// replaces whatever was believed.
func (k *modelKnowledge) observe(v int32) {
	if prev := k.seen.Swap(v); prev != thinkUnknown && prev != v {
		k.mixed.Store(true)
	}
	k.state.Store(v)
}

// ensure asks the backend once, on the first turn that needs it. A turn
// running meanwhile treats the model as unknown, which is safe.
func (k *modelKnowledge) ensure(ctx context.Context) {
	if k.get() != thinkUnknown || k.probe == nil || !k.probed.CompareAndSwap(false, true) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if v := k.probe(ctx); v != thinkUnknown {
		k.believe(v)
	}
}

// thinkByName reads a Hugging Face style model name or path. An alias (a
// vLLM --served-model-name, an Ollama tag such as qwen3:4b, which now
// resolves to a Thinking-2507 build) says nothing.
func thinkByName(name string) int32 {
	m := strings.ToLower(name)
	switch {
	case opensThinkInPrompt(m):
		return thinkOpens
	case strings.Contains(m, "qwen3-") && !strings.Contains(m, ":"):
		return thinkPlain
	}
	return thinkUnknown
}

// templateOpensThink reads a chat template (Jinja or Ollama's Go
// template): does the part that writes the generation prompt leave a
// <think> open? Templates that only pre-fill an empty think block (the
// 2504 hybrids with thinking switched off) do not.
func templateOpensThink(tmpl string) int32 {
	if tmpl == "" {
		return thinkUnknown
	}
	t := strings.ReplaceAll(tmpl, `\n`, "\n")
	tail := t
	if i := strings.LastIndex(t, "add_generation_prompt"); i >= 0 {
		tail = t[i:]
	} else if i := strings.LastIndex(t, "<|im_start|>assistant"); i >= 0 {
		tail = t[i:]
	}
	for _, empty := range []string{"<think>\n\n</think>", "<think></think>"} {
		tail = strings.ReplaceAll(tail, empty, "")
	}
	if strings.Contains(tail, "<think>") {
		return thinkOpens
	}
	return thinkPlain
}

// getJSON reads a model-information endpoint; any failure is "cannot say".
func (b *httpBackend) getJSON(ctx context.Context, method, url string, body string, v any) bool {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return false
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.apiKey)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v) == nil
}

// serverRoot is the server's own root under an OpenAI base URL ending in
// /v1, where llama.cpp's /props and Ollama's /api live.
func serverRoot(base string) string {
	base = strings.TrimRight(base, "/")
	return strings.TrimSuffix(base, "/v1")
}

// probeOpenAI asks an OpenAI-compatible server: vLLM and SGLang name the
// served weights in /v1/models "root"; llama.cpp returns its chat template
// at /props; Ollama its template at /api/show.
func probeOpenAI(b *httpBackend, model string, flavor Flavor) func(context.Context) int32 {
	return func(ctx context.Context) int32 {
		switch flavor {
		case FlavorOllama:
			return probeOllamaShow(ctx, b, serverRoot(b.baseURL), model)
		case FlavorGeneric:
		default:
			return thinkUnknown // hosted services parse reasoning themselves
		}
		var list struct {
			Data []struct {
				ID   string `json:"id"`
				Root string `json:"root"`
			} `json:"data"`
		}
		if b.getJSON(ctx, http.MethodGet, strings.TrimRight(b.baseURL, "/")+"/models", "", &list) {
			for _, m := range list.Data {
				if m.ID == model || model == "" {
					if v := thinkByName(m.Root); v != thinkUnknown {
						return v
					}
					break
				}
			}
		}
		var props struct {
			ChatTemplate string `json:"chat_template"`
			ModelPath    string `json:"model_path"`
		}
		if b.getJSON(ctx, http.MethodGet, serverRoot(b.baseURL)+"/props", "", &props) {
			if v := templateOpensThink(props.ChatTemplate); v != thinkUnknown {
				return v
			}
			return thinkByName(props.ModelPath)
		}
		return thinkUnknown
	}
}

func probeOllamaShow(ctx context.Context, b *httpBackend, root, model string) int32 {
	body, _ := json.Marshal(map[string]string{"model": model})
	var show struct {
		Template     string   `json:"template"`
		Capabilities []string `json:"capabilities"`
	}
	if !b.getJSON(ctx, http.MethodPost, root+"/api/show", string(body), &show) {
		return thinkUnknown
	}
	if len(show.Capabilities) > 0 && !slices.Contains(show.Capabilities, "thinking") {
		return thinkPlain
	}
	return templateOpensThink(show.Template)
}
