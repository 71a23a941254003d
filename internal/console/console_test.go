package console

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func serve(t testing.TB, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesFiles(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="/console/app.js">`},
		{"/console/app.js", "text/javascript; charset=utf-8", "import"},
		{"/console/markdown.js", "text/javascript; charset=utf-8", "export function renderMarkdown"},
		{"/console/console.css", "text/css; charset=utf-8", ":focus-visible"},
		{"/console/icon.svg", "image/svg+xml", "<svg"},
	} {
		resp := serve(t, h, http.MethodGet, tc.path, nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", tc.path, resp.StatusCode, body)
		}
		hd := resp.Header
		if got := hd.Get("Content-Type"); got != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.contentType)
		}
		if !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: body does not contain %q", tc.path, tc.contains)
		}
		if hd.Get("Content-Security-Policy") != ContentSecurityPolicy || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: CSP %q, nosniff %q", tc.path, hd.Get("Content-Security-Policy"), hd.Get("X-Content-Type-Options"))
		}
		if hd.Get("Cache-Control") != "no-cache" || !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(hd.Get("ETag")) {
			t.Errorf("GET %s: Cache-Control %q, ETag %q", tc.path, hd.Get("Cache-Control"), hd.Get("ETag"))
		}
		if hd.Get("X-Frame-Options") != "DENY" || hd.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: X-Frame-Options %q, Referrer-Policy %q", tc.path, hd.Get("X-Frame-Options"), hd.Get("Referrer-Policy"))
		}

		// The ETag revalidates: 304, no body.
		again := serve(t, h, http.MethodGet, tc.path, http.Header{"If-None-Match": {hd.Get("ETag")}})
		b, _ := io.ReadAll(again.Body)
		if again.StatusCode != http.StatusNotModified || len(b) != 0 {
			t.Errorf("GET %s with its ETag = %d, %d bytes; want 304, none", tc.path, again.StatusCode, len(b))
		}
		other := serve(t, h, http.MethodGet, tc.path, http.Header{"If-None-Match": {`"0000"`}})
		if other.StatusCode != http.StatusOK {
			t.Errorf("GET %s with another ETag = %d, want 200", tc.path, other.StatusCode)
		}
		head := serve(t, h, http.MethodHead, tc.path, nil)
		hb, _ := io.ReadAll(head.Body)
		if head.StatusCode != http.StatusOK || len(hb) != 0 || head.Header.Get("Content-Length") != hd.Get("Content-Length") {
			t.Errorf("HEAD %s = %d, %d bytes, length %q (GET: %q)", tc.path, head.StatusCode, len(hb),
				head.Header.Get("Content-Length"), hd.Get("Content-Length"))
		}
	}
}

func TestHandlerRefuses(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/console/", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/console/nope.js", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/console/index.html", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/console/../console.go", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/console/static/app.js", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/console/.hidden", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/index.html", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/app.js", http.StatusNotFound, "not_found"},
		{http.MethodPost, "/", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodDelete, "/console/app.js", http.StatusMethodNotAllowed, "method_not_allowed"},
	} {
		resp := serve(t, h, tc.method, tc.path, nil)
		var body struct {
			Error struct{ Code, Message string }
		}
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message == "" {
			t.Errorf("%s %s = %d %s; want %d %s", tc.method, tc.path, resp.StatusCode, raw, tc.status, tc.code)
		}
		if resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: Content-Type %q, nosniff %q", tc.method, tc.path, resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"))
		}
		if tc.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, resp.Header.Get("Allow"))
		}
	}
}

// TestEveryFileIsServed fails when a file under static/ has no content
// type in the table, and so would silently not be served.
func TestEveryFileIsServed(t *testing.T) {
	h := Handler()
	n := 0
	err := fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		target := Prefix + strings.TrimPrefix(name, "static/")
		if name == "static/index.html" {
			target = PagePath
		}
		if resp := serve(t, h, http.MethodGet, target, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s (%s) = %d", name, target, resp.StatusCode)
		}
		return nil
	})
	if err != nil || n < 8 {
		t.Fatalf("walked %d files: %v", n, err)
	}
}

// TestPageLoadsOnlyItsOwnFiles checks what the Content-Security-Policy
// would otherwise refuse at run time: every file the page and the modules
// refer to exists, and nothing is inline (no script body, no event
// handler attribute, no style attribute or element).
func TestPageLoadsOnlyItsOwnFiles(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	refs := regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`).FindAllStringSubmatch(html, -1)
	if len(refs) < 3 {
		t.Fatalf("the page refers to %d files", len(refs))
	}
	for _, m := range refs {
		if !strings.HasPrefix(m[1], Prefix) {
			t.Errorf("the page refers to %q, outside %s", m[1], Prefix)
			continue
		}
		if _, err := static.ReadFile("static/" + strings.TrimPrefix(m[1], Prefix)); err != nil {
			t.Errorf("the page refers to %q: %v", m[1], err)
		}
	}
	// Every script is a file: its tag has a src and nothing inside.
	scripts := regexp.MustCompile(`<script\b[^>]*>([^<]*)</script>`).FindAllStringSubmatch(html, -1)
	if len(scripts) != strings.Count(html, "<script") || len(scripts) == 0 {
		t.Errorf("the page has %d script tags, %d of them closed", strings.Count(html, "<script"), len(scripts))
	}
	for _, m := range scripts {
		if !strings.Contains(m[0], ` src="`) || strings.TrimSpace(m[1]) != "" {
			t.Errorf("an inline script: %q", m[0])
		}
	}
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`<style`)} {
		if m := bad.FindString(html); m != "" {
			t.Errorf("the page has inline code or style: %q", m)
		}
	}
	imports := regexp.MustCompile(`(?m)^\s*import\s[^"]*"([^"]+)"`)
	err = fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || path.Ext(name) != ".js" {
			return err
		}
		src, err := static.ReadFile(name)
		if err != nil {
			return err
		}
		for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
			if !strings.HasPrefix(m[1], "./") {
				t.Errorf("%s imports %q: only the console's own modules, by relative path", name, m[1])
				continue
			}
			if _, err := static.ReadFile(path.Join("static", m[1])); err != nil {
				t.Errorf("%s imports %q: %v", name, m[1], err)
			}
		}
		for _, bad := range []string{"eval(", "new Function(", "document.write", "insertAdjacentHTML", "outerHTML"} {
			if strings.Contains(string(src), bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
		// Only the Markdown renderer writes HTML, through its policy.
		if n := strings.Count(string(src), ".innerHTML"); n > 0 && name != "static/markdown.js" {
			t.Errorf("%s sets innerHTML %d times", name, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScriptsUnderNode runs the console's JavaScript unit tests (the
// Markdown renderer, the diff parser, the event stream's reconnects) with
// Node's own test runner.
func TestScriptsUnderNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): install Node.js 20 or later (scripts/install-agents.sh needs it too)", err)
	}
	files, err := filepath.Glob(filepath.Join("test", "*.test.js"))
	if err != nil || len(files) < 3 {
		t.Fatalf("test files %v: %v", files, err)
	}
	cmd := exec.Command(node, append([]string{"--test", "--test-reporter=tap"}, files...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NODE_OPTIONS="}
	cmd.WaitDelay = 5 * time.Second
	done := make(chan struct{})
	timer := time.AfterFunc(2*time.Minute, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	close(done)
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	// Every file ran, and their tests passed.
	pass := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(out)
	fail := regexp.MustCompile(`(?m)^# fail (\d+)$`).FindSubmatch(out)
	if pass == nil || fail == nil || string(fail[1]) != "0" || string(pass[1]) == "0" {
		t.Fatalf("node --test reported no passing tests or some failures:\n%s", out)
	}
	t.Logf("node --test: %s tests passed", pass[1])
}

// FuzzFileName holds the request path mapping to its contract: a name
// without a directory, a dot-segment or a hidden name, and the handler
// answers every path without panicking, with a status it documents.
func FuzzFileName(f *testing.F) {
	for _, s := range []string{"/", "/console/app.js", "/console/", "/console/../x", "/console/a/b", "/console/.x",
		"/console/index.html", "//console/app.js", "/console/app.js/", "/console/%2e%2e", "/console/\\x"} {
		f.Add(s)
	}
	h := Handler()
	names := map[string]bool{}
	fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names[strings.TrimPrefix(name, "static/")] = true
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, p string) {
		name := fileName(p)
		if name != "" {
			if strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
				t.Fatalf("fileName(%q) = %q", p, name)
			}
			if name == "index.html" && p != PagePath {
				t.Fatalf("fileName(%q) = the page", p)
			}
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = p
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			if !names[name] {
				t.Fatalf("GET %q = 200 for %q, which is not a file", p, name)
			}
		case http.StatusNotFound:
			if names[name] {
				t.Fatalf("GET %q = 404 for the file %q", p, name)
			}
		default:
			t.Fatalf("GET %q = %d", p, rec.Code)
		}
		if !slices.Contains([]string{"application/json", "text/html; charset=utf-8", "text/javascript; charset=utf-8",
			"text/css; charset=utf-8", "image/svg+xml", "text/plain; charset=utf-8"}, rec.Header().Get("Content-Type")) {
			t.Fatalf("GET %q: Content-Type %q", p, rec.Header().Get("Content-Type"))
		}
	})
}
