package standin

import (
	"encoding/json"
	"net/http"
	"path"
	"slices"
	"strings"
)

// Chat templates the stand-in reports, in the shape of Qwen3's: the part
// that matters is the generation prompt, which the 2504 hybrids leave open
// (an empty think block when thinking is off), Thinking-2507 and Qwen3.5
// end with an opened <think>, and Instruct-2507 never touches.
const (
	jinjaMessages = `{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}`
	jinjaHybrid   = jinjaMessages + `{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}{%- endif %}`
	jinjaOpens    = jinjaMessages + `{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %}`
	jinjaInstruct = jinjaMessages + `{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

	goMessages = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
	goHybrid   = goMessages + "<|im_start|>assistant\n{{ if and $.IsThinkSet (not $.Think) }}<think>\n\n</think>\n\n{{ end }}"
	goOpens    = goMessages + "<|im_start|>assistant\n<think>\n"
	goInstruct = goMessages + "<|im_start|>assistant\n"
)

type variant uint8

const (
	variantHybrid variant = iota
	variantOpens
	variantInstruct
)

// variantOf follows the same rule as plan: the weights' name decides.
func variantOf(weights string) variant {
	m := strings.ToLower(weights)
	switch {
	case strings.Contains(m, "instruct"):
		return variantInstruct
	case strings.Contains(m, "thinking") || strings.Contains(m, "qwen3.5"):
		return variantOpens
	}
	return variantHybrid
}

const created = 1763900000

// served lists the names the stand-in answers to: its aliases, or the
// default weights when it has none.
func (s *Server) served() []string {
	var names []string
	for alias := range s.aliases {
		names = append(names, alias)
	}
	slices.Sort(names)
	if len(names) == 0 {
		names = []string{"Qwen/Qwen3-8B"}
	}
	return names
}

func (s *Server) modelInfo(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { s.serveModels(w, "vllm") })
	mux.HandleFunc("GET /{profile}/v1/models", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := openAIProfiles[r.PathValue("profile")]; !ok {
			http.NotFound(w, r)
			return
		}
		s.serveModels(w, r.PathValue("profile"))
	})
	mux.HandleFunc("GET /{profile}/props", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.PathValue("profile"), "llamacpp") {
			http.NotFound(w, r)
			return
		}
		s.serveProps(w)
	})
	mux.HandleFunc("POST /api/show", s.serveShow)
	mux.HandleFunc("POST /ollama/api/show", s.serveShow)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serveModels answers GET /v1/models as each server does: vLLM and SGLang
// name the weights in "root"; llama.cpp adds its "models" list and the
// model's metadata; Ollama and the hosted services give ids only.
func (s *Server) serveModels(w http.ResponseWriter, profile string) {
	var data []any
	var llamaModels []any
	for _, name := range s.served() {
		weights := s.weights(name)
		switch {
		case strings.HasPrefix(profile, "vllm"):
			data = append(data, obj{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "vllm"},
				{"root", weights}, {"parent", nil}, {"max_model_len", 40960},
				{"permission", []any{obj{{"id", "modelperm-" + strings.Repeat("0", 32)}, {"object", "model_permission"},
					{"created", created}, {"allow_create_engine", false}, {"allow_sampling", true}, {"allow_logprobs", true},
					{"allow_search_indices", false}, {"allow_view", true}, {"allow_fine_tuning", false},
					{"organization", "*"}, {"group", nil}, {"is_blocking", false}}}}})
		case strings.HasPrefix(profile, "sglang"):
			data = append(data, obj{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "sglang"},
				{"root", weights}, {"parent", nil}, {"max_model_len", 40960}})
		case strings.HasPrefix(profile, "llamacpp"):
			data = append(data, obj{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "llamacpp"},
				{"meta", obj{{"vocab_type", 2}, {"n_vocab", 151936}, {"n_ctx_train", 262144}, {"n_embd", 2560},
					{"n_params", 4022468096}, {"size", 2497280256}}}})
			llamaModels = append(llamaModels, obj{{"name", name}, {"model", name}, {"modified_at", ""}, {"size", ""},
				{"digest", ""}, {"type", "model"}, {"description", ""}, {"tags", []string{""}},
				{"capabilities", []string{"completion"}}, {"parameters", ""},
				{"details", obj{{"parent_model", ""}, {"format", "gguf"}, {"family", ""}, {"families", []string{""}},
					{"parameter_size", ""}, {"quantization_level", ""}}}})
		case strings.HasPrefix(profile, "ollama"):
			data = append(data, obj{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "library"}})
		default:
			data = append(data, obj{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "system"}})
		}
	}
	if llamaModels != nil {
		writeJSON(w, http.StatusOK, obj{{"models", llamaModels}, {"object", "list"}, {"data", data}})
		return
	}
	writeJSON(w, http.StatusOK, obj{{"object", "list"}, {"data", data}})
}

// serveProps answers llama.cpp's GET /props for the one model a
// llama-server runs.
func (s *Server) serveProps(w http.ResponseWriter) {
	name := s.served()[0]
	weights := s.weights(name)
	tmpl := map[variant]string{variantHybrid: jinjaHybrid, variantOpens: jinjaOpens, variantInstruct: jinjaInstruct}[variantOf(weights)]
	writeJSON(w, http.StatusOK, obj{
		{"default_generation_settings", obj{{"id", 0}, {"id_task", -1}, {"n_ctx", 40960}, {"speculative", false}, {"is_processing", false},
			{"params", obj{{"n_predict", -1}, {"seed", 4294967295}, {"temperature", 0.6}, {"top_k", 20}, {"top_p", 0.95}, {"min_p", 0.0}}}}},
		{"total_slots", 1},
		{"model_alias", name},
		{"model_path", "/models/" + path.Base(weights) + "-Q4_K_M.gguf"},
		{"modalities", obj{{"vision", false}, {"audio", false}}},
		{"chat_template", tmpl},
		{"bos_token", ""},
		{"eos_token", "<|im_end|>"},
		{"build_info", "b9500-abc1234"},
	})
}

// serveShow answers Ollama's POST /api/show.
func (s *Server) serveShow(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Model string `json:"model"`
		Name  string `json:"name"` // older clients
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, obj{{"error", "invalid JSON body: " + err.Error()}})
		return
	}
	name := in.Model
	if name == "" {
		name = in.Name
	}
	if name == "" {
		writeJSON(w, http.StatusBadRequest, obj{{"error", "model is required"}})
		return
	}
	weights := s.weights(name)
	v := variantOf(weights)
	tmpl := map[variant]string{variantHybrid: goHybrid, variantOpens: goOpens, variantInstruct: goInstruct}[v]
	caps := []string{"completion", "tools"}
	finetune := "Instruct"
	if v != variantInstruct {
		caps = append(caps, "thinking")
		finetune = ""
		if v == variantOpens {
			finetune = "Thinking"
		}
	}
	writeJSON(w, http.StatusOK, obj{
		{"license", "Apache License 2.0"},
		{"modelfile", "# Modelfile generated by \"ollama show\"\nFROM " + weights + "\nTEMPLATE \"\"\"" + tmpl + "\"\"\"\n"},
		{"parameters", "temperature 0.6\ntop_k 20\ntop_p 0.95\nrepeat_penalty 1"},
		{"template", tmpl},
		{"details", obj{{"parent_model", ""}, {"format", "gguf"}, {"family", "qwen3"}, {"families", []string{"qwen3"}},
			{"parameter_size", "4.0B"}, {"quantization_level", "Q4_K_M"}}},
		{"model_info", obj{{"general.architecture", "qwen3"}, {"general.basename", "Qwen3"}, {"general.finetune", finetune},
			{"general.size_label", "4B"}, {"general.parameter_count", 4022468096}, {"qwen3.context_length", 262144}}},
		{"capabilities", caps},
		{"modified_at", "2026-11-20T10:00:00.000000000Z"},
	})
}
