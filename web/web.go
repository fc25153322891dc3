// Package web is the browser client that alicia serve ships at /: a page
// that joins a conversation with a token from the HTTP API and talks the
// Alicia protocol over LiveKit. Its sources are in src/; esbuild builds
// them into dist/ (npm run build), and dist/ is committed so that building
// and running Alicia needs no Node.js. A test rebuilds dist/ from src/ and
// fails when the committed bundle is stale.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed dist
var dist embed.FS

// Handler serves the page and its assets. index.html is never cached, so
// a new release reaches a reloading browser at once; the assets it names
// are revalidated by their modification time like any static file.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed directive guarantees the folder
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if r.URL.Path == "/" || strings.HasSuffix(r.URL.Path, "/index.html") {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}
