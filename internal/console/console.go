package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is the path under which the console's files other than the page
// itself are served: /console/app.js is static/app.js.
const Prefix = "/console/"

// PagePath is the path of the console's page.
const PagePath = "/"

// ContentSecurityPolicy is sent with every file. Scripts, styles, images
// and connections come from the gateway's own origin only; nothing is
// inline, nothing is evaluated, no plugin or frame loads, forms submit
// nowhere (the console handles them in script), and HTML may be written
// into the page only through the Markdown renderer's Trusted Types policy,
// which escapes the agent's text before adding any markup.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types agentgate-markdown"

// contentTypes are the types of the console's files, by extension: set
// here rather than from the system's MIME table, which varies by machine
// and could make a module unloadable (a browser refuses a module script
// that is not served as JavaScript).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".txt":  "text/plain; charset=utf-8",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// Handler serves the console: the page at PagePath and its other files
// under Prefix, for GET and HEAD. A path that names no file is a 404 and
// any other method a 405, both with the gateway's error body. It reads the
// embedded files once, when called.
func Handler() http.Handler {
	assets := map[string]asset{}
	err := fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(name)
		if err != nil {
			return err
		}
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			// A file the table does not know would be served as
			// something a browser might guess at: keep it out.
			return nil
		}
		sum := sha256.Sum256(body)
		assets[strings.TrimPrefix(name, "static/")] = asset{
			body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, contentType: ctype,
		}
		return nil
	})
	if err != nil {
		// The files are compiled in: failing to read them is a broken
		// build, not a condition to serve around.
		panic("console: read embedded files: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				"the console's files answer only GET and HEAD")
			return
		}
		a, ok := assets[fileName(r.URL.Path)]
		if !ok {
			writeError(w, http.StatusNotFound, "not_found", "the console has no file at "+clip(r.URL.Path))
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		// Revalidate every time: the ETag makes that one small request,
		// and a page never mixes modules of two versions.
		h.Set("Cache-Control", "no-cache")
		// ServeContent answers If-None-Match with 304, HEAD without a
		// body, and ranges; the zero time leaves Last-Modified out.
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}

// fileName maps a request path to the name of an embedded file, or "" for
// none: the page for PagePath, a plain name under Prefix. Nothing with a
// directory, a dot-segment or a hidden name is served.
func fileName(p string) string {
	if p == PagePath {
		return "index.html"
	}
	name, ok := strings.CutPrefix(p, Prefix)
	if !ok || name == "" || name == "index.html" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return ""
	}
	return name
}

// writeError writes the gateway's error body, {"error":{"code","message"}}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// clip bounds a request path quoted in an error message.
func clip(s string) string {
	const limit = 200
	if len(s) > limit {
		return strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
