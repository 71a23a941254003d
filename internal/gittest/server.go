package gittest

import (
	"crypto/subtle"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// HTTPBackend is git's smart HTTP server program as Debian installs it.
const HTTPBackend = "/usr/lib/git-core/git-http-backend"

// Server serves the bare repositories under Root at URL. Every request
// must carry Token as its HTTP Basic password, any user name, unless Token
// is empty.
type Server struct {
	// URL is the server's base, "http://127.0.0.1:PORT"; a repository
	// named "r" is at URL+"/r.git".
	URL string
	// Root holds the bare repositories, "<name>.git".
	Root string
	// Token is the password every request needs; empty serves anyone.
	Token string

	requests atomic.Int64
	sent     atomic.Int64
}

// NewServer starts a server on 127.0.0.1 that is closed when t ends.
// token empty serves without authentication.
func NewServer(t testing.TB, token string) *Server {
	t.Helper()
	if _, err := os.Stat(HTTPBackend); err != nil {
		t.Fatalf("git http-backend not installed (apt-get install git; scripts/test.sh does): %v", err)
	}
	s := &Server{Root: t.TempDir(), Token: token}
	hs := httptest.NewServer(s.handler(t))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Requests is how many requests the server has answered.
func (s *Server) Requests() int64 { return s.requests.Load() }

// BytesSent is how many response body bytes the server has written.
func (s *Server) BytesSent() int64 { return s.sent.Load() }

// RepoURL is the URL of the repository called name.
func (s *Server) RepoURL(name string) string { return s.URL + "/" + name + ".git" }

func (s *Server) handler(t testing.TB) http.Handler {
	backend := &cgi.Handler{
		Path: HTTPBackend,
		Root: "/",
		Dir:  s.Root,
		// The backend's complaints (an unknown repository, an unknown
		// commit) are what the client is told anyway.
		Stderr: io.Discard,
		Env: append(Env(t.TempDir()),
			"GIT_PROJECT_ROOT="+s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
		),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(&countingWriter{ResponseWriter: w, n: &s.sent}, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	if s.Token == "" {
		return true
	}
	_, password, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(password), []byte(s.Token)) == 1
}

// countingWriter counts the body bytes written through it.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// Env is the environment of a git process in a test: no system or user
// configuration, home, nor terminal prompt, so the machine's own git setup
// changes nothing.
func Env(home string) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=gittest",
		"GIT_AUTHOR_EMAIL=gittest@example.invalid",
		"GIT_COMMITTER_NAME=gittest",
		"GIT_COMMITTER_EMAIL=gittest@example.invalid",
	}
}

func (s *Server) repoDir(name string) string {
	return filepath.Join(s.Root, name+".git")
}
