package control

import (
	"embed"
	"io/fs"
	"net/http"
)

// web holds the page: plain HTML, CSS and JavaScript, no build step and
// nothing fetched from elsewhere.
//
//go:embed web
var web embed.FS

// pageHandler serves the page at / and its assets under /web/; the mux
// sends it nothing else.
func pageHandler() http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded tree has the directory: a build bug
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			http.ServeFileFS(w, r, sub, "index.html")
		case "/web/app.js", "/web/style.css":
			r2 := r.Clone(r.Context())
			r2.URL.Path = r.URL.Path[len("/web"):]
			files.ServeHTTP(w, r2)
		default:
			writeError(w, http.StatusNotFound, "no file "+r.URL.Path+": the page is at /, the API under /api/v1/")
		}
	})
}
