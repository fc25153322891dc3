package storage

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/alicia-voice/alicia/internal/httpjson"
	"github.com/alicia-voice/alicia/reasoning"
)

type historyJSON struct {
	ConversationID string        `json:"conversationId"`
	Messages       []messageJSON `json:"messages"`
}

type messageJSON struct {
	ID         string     `json:"id"`
	Role       string     `json:"role"`
	Author     string     `json:"author,omitempty"`
	Content    string     `json:"content"`
	Status     string     `json:"status"`
	PreviousID string     `json:"previousId,omitempty"`
	VariantOf  string     `json:"variantOf,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	Reasoning  []stepJSON `json:"reasoning,omitempty"`
}

type stepJSON struct {
	ID         string    `json:"id"`
	StepIndex  int32     `json:"stepIndex"`
	Content    string    `json:"content"`
	ToolCallID string    `json:"toolCallId,omitempty"`
	CutShort   bool      `json:"cutShort,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// HistoryHandler serves GET …/conversations/{id}: the conversation's
// messages in order, each with its reasoning steps in the owner's
// show-reasoning mode, to the conversation's owner only. authenticate
// returns the caller's identity; preference the mode the owner sees
// (the stored choice or the operator's default), which lives above storage.
func HistoryHandler(s Store, authenticate func(*http.Request) (string, error), preference func(context.Context, string) reasoning.Mode, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		identity, err := authenticate(r)
		if err != nil {
			httpjson.Error(w, http.StatusUnauthorized, err.Error())
			return
		}
		id := r.PathValue("id")
		conv, err := s.Conversation(r.Context(), id)
		// An unknown conversation and someone else's look the same, so
		// that ids cannot be probed.
		if errors.Is(err, ErrNotFound) || (err == nil && conv.Owner != identity) {
			httpjson.Error(w, http.StatusNotFound, "no such conversation")
			return
		}
		if err != nil {
			log.Error("history", "conversation", id, "err", err)
			httpjson.Error(w, http.StatusServiceUnavailable, "storage unavailable")
			return
		}
		entries, err := s.History(r.Context(), id)
		if err != nil {
			log.Error("history", "conversation", id, "err", err)
			httpjson.Error(w, http.StatusServiceUnavailable, "storage unavailable")
			return
		}
		// Stored reasoning comes back as the user sees it live: none when
		// they show none, each step's summary when they show summaries.
		mode := preference(r.Context(), identity)
		out := historyJSON{ConversationID: id, Messages: []messageJSON{}}
		for _, e := range entries {
			m := messageJSON{ID: e.ID, Role: e.Role, Author: e.Author, Content: e.Content, Status: e.Status, PreviousID: e.PreviousID,
				VariantOf: e.VariantOf, CreatedAt: e.CreatedAt}
			for _, st := range e.Steps {
				content := st.Content
				switch mode {
				case reasoning.ModeOff:
					continue
				case reasoning.ModeSummary:
					content = reasoning.Summarize(content)
				}
				m.Reasoning = append(m.Reasoning, stepJSON{ID: st.ID, StepIndex: st.Index, Content: content, ToolCallID: st.ToolCallID, CutShort: st.CutShort, CreatedAt: st.EndedAt})
			}
			out.Messages = append(out.Messages, m)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

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
// caller's token alone, so nobody can name another user's. preference is
// the mode in force and defaultMode the operator's default: both are
// decided above storage, as for HistoryHandler.
func PreferenceHandler(prefs reasoning.Preferences, authenticate func(*http.Request) (string, error), preference func(context.Context, string) reasoning.Mode, defaultMode reasoning.Mode) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		identity, err := authenticate(r)
		if err != nil {
			httpjson.Error(w, http.StatusUnauthorized, err.Error())
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPut:
			var in struct {
				Reasoning reasoning.Mode `json:"reasoning"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&in); err != nil || !in.Reasoning.Valid() {
				httpjson.Error(w, http.StatusBadRequest, `body must be {"reasoning": "off" | "summary" | "full"}`)
				return
			}
			if err := prefs.SetMode(r.Context(), identity, in.Reasoning); err != nil {
				httpjson.Error(w, http.StatusServiceUnavailable, "storage unavailable")
				return
			}
		default:
			w.Header().Set("Allow", "GET, PUT")
			httpjson.Error(w, http.StatusMethodNotAllowed, "GET or PUT")
			return
		}
		stored, err := prefs.Mode(r.Context(), identity)
		if err != nil {
			httpjson.Error(w, http.StatusServiceUnavailable, "storage unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(preferenceJSON{Reasoning: preference(r.Context(), identity),
			Stored: stored != reasoning.ModeUnset, Default: defaultMode})
	})
}
