package triggers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// FuzzParseTemplate: any text either is refused with a FieldError for
// "prompt", or renders over a fixed delivery without panicking, within
// the limit, and without showing a secret header.
func FuzzParseTemplate(f *testing.F) {
	for _, seed := range []string{
		"", "{{.payload.issue.title}}", `{{index .headers "X-Github-Event"}}`,
		`{{if eq .payload.action "opened"}}{{.payload.issue.title}}{{end}}`,
		"{{range $i, $l := .payload.labels}}{{$i}}:{{$l.name}}{{else}}none{{end}}",
		"{{range .payload.labels}}{{json .}}{{end}}{{range .payload.labels}}{{.}}{{end}}",
		"{{with .payload.issue}}{{trunc 4 .title}}{{end}}", "{{json .}}", "{{.}}", "{{$}}",
		"{{$x := .payload.labels}}{{range $x}}{{.name}}{{end}}{{len $x}}",
		`{{printf "%s" .headers}}`, `{{define "a"}}{{end}}`, "{{range 10}}{{end}}",
		"{{range .payload.labels}}{{range .}}{{end}}{{end}}", "{{.payload.issue.title.x}}",
		"{{/* c */}}{{- .payload.n -}}", "{{index .headers \"Authorization\"}}{{.headers}}",
		"{{range .headers}}{{.}}{{end}}", "{{trunc 100000 (json $)}}",
	} {
		f.Add(seed)
	}
	payload := decode(f, `{"action":"opened","n":42,"issue":{"title":"Crash on start","body":null},
		"labels":[{"name":"bug"},{"name":"p1"}]}`)
	h := header("Authorization", "Bearer agt_trg_SECRET", "X-Hub-Signature-256", "sha256=SECRET",
		"X-GitHub-Event", "issues", "Cookie", "SECRET")
	f.Fuzz(func(t *testing.T, text string) {
		tmpl, err := ParseTemplate(text)
		if err != nil {
			var field *runs.FieldError
			if !errors.As(err, &field) || field.Field != "prompt" {
				t.Fatalf("ParseTemplate(%q) = %v, not a FieldError for prompt", text, err)
			}
			return
		}
		out, err := tmpl.Render(payload, h, 4096)
		var re *RenderError
		switch {
		case err != nil && !errors.As(err, &re):
			t.Fatalf("Render(%q) = %v, not a RenderError", text, err)
		case len(out) > 4096:
			t.Fatalf("Render(%q) wrote %d bytes past a 4096-byte limit", text, len(out))
		case strings.Contains(out, "SECRET"):
			t.Fatalf("Render(%q) = %q shows a secret header", text, out)
		}
	})
}

// FuzzCheck: no headers and body proves a delivery without its secret,
// for any verify, and nothing panics. DeliveryID and Event keep their
// bounds.
func FuzzCheck(f *testing.F) {
	now := time.Unix(1_767_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"a":1}`)
	sw, _ := webhooks.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	seeds := [][3][2]string{
		{{"Authorization", "Bearer "}, {"Authorization", "bearer x"}, {"", ""}},
		{{"X-Hub-Signature-256", githubSignature("", body)}, {"", ""}, {"", ""}},
		{{"X-Hub-Signature-256", "sha256=" + strings.Repeat("0", 64)}, {"X-GitHub-Delivery", "d\x00"}, {"X-GitHub-Event", "ping"}},
		{{"webhook-id", "msg_1"}, {"webhook-timestamp", ts}, {"webhook-signature", sw.Sign("msg_1", now, body)}},
		{{"webhook-id", "msg_1"}, {"webhook-timestamp", ts}, {"webhook-signature", "v1,AAAA v2,x v1"}},
		{{"Idempotency-Key", strings.Repeat("k", 201)}, {"Authorization", "Bearer agt_trg_x y"}, {"", ""}},
	}
	for _, s := range seeds {
		f.Add(s[0][0], s[0][1], s[1][0], s[1][1], s[2][0], s[2][1], body)
	}
	secrets := map[Verify]Secrets{}
	for _, v := range []Verify{VerifyToken, VerifyGitHub, VerifyStandardWebhooks} {
		cur, prev := newSecret(f, v), newSecret(f, v)
		if v == VerifyToken {
			cur, prev = HashToken(cur), HashToken(prev)
		}
		secrets[v] = Secrets{Current: cur, Previous: prev, PreviousUntil: now.Add(time.Hour)}
	}
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, n3, v3 string, body []byte) {
		h := http.Header{}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}, {n3, v3}} {
			if kv[0] != "" {
				h.Add(kv[0], kv[1])
			}
		}
		for v, s := range secrets {
			if err := Check(v, s, h, body, now); err != ErrBadProof {
				t.Fatalf("Check(%s, %v) = %v without the secret", v, h, err)
			}
			if err := Check(v, Secrets{}, h, body, now); err != ErrBadProof {
				t.Fatalf("Check(%s, no secrets, %v) = %v", v, h, err)
			}
			id, err := DeliveryID(v, h)
			if err == nil && !boundedText(id) || err != nil && id != "" {
				t.Fatalf("DeliveryID(%s, %v) = %q, %v", v, h, id, err)
			}
		}
		if event := Event(h); !boundedText(event) {
			t.Fatalf("Event(%v) = %q", h, event)
		}
	})
}

// boundedText is what DeliveryID and Event may return.
func boundedText(s string) bool {
	return len(s) <= MaxDeliveryIDBytes && utf8.ValidString(s) && !strings.ContainsFunc(s, isControl)
}
