package api

import (
	"bytes"
	"embed"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentgate/agentgate"
)

// The API's own description, served without a key: it says nothing of any
// run, and a client generator or a person reading the docs has none yet.
const (
	specYAMLPath   = "/openapi.yaml"
	specJSONPath   = "/openapi.json"
	eventsSpecPath = "/events.schema.json" // openapi.yaml's ./events.schema.json
	docsPath       = "/docs"
	docsScriptPath = "/docs/docs.js"
)

// specRoutes are the paths of the API's description and its docs page.
var specRoutes = []string{specYAMLPath, specJSONPath, eventsSpecPath, docsPath, docsScriptPath}

//go:embed docs/index.html docs/docs.js
var docsFiles embed.FS

// started stamps the embedded files' Last-Modified: they change only with
// the binary.
var started = time.Now()

// specJSON is openapi.yaml as JSON, converted once.
var specJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(agentgate.OpenAPI, &doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
})

func (s *server) serveSpec(w http.ResponseWriter, r *http.Request) {
	var body []byte
	var contentType string
	switch r.URL.Path {
	case specYAMLPath:
		body, contentType = agentgate.OpenAPI, "application/yaml"
	case eventsSpecPath:
		body, contentType = agentgate.EventsSchema, "application/schema+json"
	case specJSONPath:
		b, err := specJSON()
		if err != nil {
			s.fail(w, r, err) // the embedded spec is checked by tests: a bug
			return
		}
		body, contentType = b, "application/json"
	case docsPath:
		body, _ = docsFiles.ReadFile("docs/index.html")
		contentType = "text/html; charset=utf-8"
	case docsScriptPath:
		body, _ = docsFiles.ReadFile("docs/docs.js")
		contentType = "text/javascript; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	if r.URL.Path == docsPath {
		// The page runs only its own script and reads only this gateway.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'")
	}
	http.ServeContent(w, r, "", started, bytes.NewReader(body))
}
