// Package httpjson is the shape every HTTP API of the server fails in, so
// that clients read one error body whichever endpoint refused them.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Error answers status with {"error": msg}. Headers the caller set before
// (Allow, WWW-Authenticate) go out with it.
func Error(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
