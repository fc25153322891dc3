package pipeline

import (
	"encoding/json"
	"net/http"

	"github.com/alicia-voice/alicia/reasoning"
)

// preferenceJSON is the body of GET and PUT /v1/preferences.
type preferenceJSON struct {
	// Reasoning is the user's show-reasoning mode in force: the stored
	// choice or, when Stored is false, the operator's default.
	Reasoning reasoning.Mode `json:"reasoning"`
	Stored    bool           `json:"stored"`
	Default   reasoning.Mode `json:"default"`
}

// PreferenceHandler serves GET and PUT of the caller's own preferences
// ({"reasoning": "off"|"summary"|"full"}). The identity comes from the
// caller's token alone, so nobody can name another user's.
func (e *Engine) PreferenceHandler(authenticate func(*http.Request) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		identity, err := authenticate(r)
		if err != nil {
			httpFail(w, http.StatusUnauthorized, err.Error())
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPut:
			var in struct {
				Reasoning reasoning.Mode `json:"reasoning"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&in); err != nil || !in.Reasoning.Valid() {
				httpFail(w, http.StatusBadRequest, `body must be {"reasoning": "off" | "summary" | "full"}`)
				return
			}
			if err := e.store.SetMode(r.Context(), identity, in.Reasoning); err != nil {
				httpFail(w, http.StatusServiceUnavailable, "storage unavailable")
				return
			}
		default:
			w.Header().Set("Allow", "GET, PUT")
			httpFail(w, http.StatusMethodNotAllowed, "GET or PUT")
			return
		}
		stored, err := e.store.Mode(r.Context(), identity)
		if err != nil {
			httpFail(w, http.StatusServiceUnavailable, "storage unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(preferenceJSON{Reasoning: e.Preference(r.Context(), identity),
			Stored: stored != reasoning.ModeUnset, Default: e.cfg.ReasoningDefault})
	})
}
