package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// checkSpec reports what is wrong with a spec the decoder accepted,
// restating the edge rules independently of the decoder's code.
func checkSpec(s runs.Spec) string {
	ident := func(v, extra string) bool {
		if v == "" {
			return true
		}
		if len(v) > 256 {
			return false
		}
		for i, c := range []byte(v) {
			ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || i > 0 && strings.IndexByte(extra, c) >= 0
			if !ok {
				return false
			}
		}
		return true
	}
	switch {
	case s.Agent == "" || len(s.Agent) > 64:
		return "agent"
	case strings.TrimSpace(s.Prompt) == "" || len(s.Prompt) > runs.MaxPromptBytes:
		return "prompt"
	case len(s.SystemPrompt) > runs.MaxSystemPromptBytes:
		return "system_prompt"
	case strings.ContainsRune(s.Agent+s.Prompt+s.SystemPrompt+s.Cwd, 0):
		return "NUL"
	case !ident(s.Model, "-._:/@[]") || strings.HasPrefix(s.Model, "-"):
		return "model"
	case !ident(s.ResumeSessionID, "-._:") || strings.Contains(s.ResumeSessionID, "/"):
		return "resume_session_id"
	case s.Effort != "" && !slices.Contains([]string{"low", "medium", "high"}, s.Effort):
		return "effort"
	case s.MaxTurns != 0 && (s.MaxTurns < 1 || s.MaxTurns > 1000):
		return "max_turns"
	case s.TimeoutSeconds != 0 && (s.TimeoutSeconds < 1 || s.TimeoutSeconds > 7*86400):
		return "timeout_seconds"
	case s.MaxBudgetUSD < 0 || math.IsInf(s.MaxBudgetUSD, 0) || math.IsNaN(s.MaxBudgetUSD):
		return "max_budget_usd"
	case s.OutputSchema != nil && (!json.Valid(s.OutputSchema) || s.OutputSchema[0] != '{'):
		return "output_schema"
	case len(s.Metadata) > 16:
		return "metadata"
	case s.Cwd != "" && (filepath.IsAbs(s.Cwd) || !filepath.IsLocal(s.Cwd)):
		return "cwd"
	case !slices.Contains([]runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full}, s.Permission):
		return "permission"
	}
	for k, v := range s.Metadata {
		if k == "" || len(k) > 64 || len(v) > 512 {
			return "metadata"
		}
	}
	return ""
}

var decodeSeeds = []string{
	`{"agent":"claude","prompt":"hi"}`,
	`{"agent":"claude","prompt":"fix it","system_prompt":"s","model":"claude-sonnet-4-5[1m]","effort":"low",` +
		`"max_turns":1000,"timeout_seconds":1,"max_budget_usd":0.01,"output_schema":{"type":"object","properties":{}},` +
		`"resume_session_id":"a1b2-c3","metadata":{"k":"v","":"x"},"cwd":"a/b","permission":"full"}`,
	`{"agent":"claude","prompt":"hi","metadata":{"a":"1","a":"2"}}`,
	`{"agent":"claude","prompt":"hi","model":null,"cwd":null,"permission":null}`,
	`{"agent":"claude","prompt":"hi","max_turns":1.0}`,
	`{"agent":"claude","prompt":"hi","max_budget_usd":1e-300}`,
	`{"agent":"claude","prompt":"hi","cwd":"./x/../y"}`,
	`{"agent":"claude","prompt":"hi","promt":"x"}`,
	`{"agent":"claude","prompt":"\u0000"}`,
	`{"agent":"claude","prompt":"\ud800"}`,
	`{"agent":"claude","prompt":"hi"}{}`,
	`{"agent":"claude","prompt":"hi",}`,
	`{"agent":["claude"],"prompt":{"a":1}}`,
	`[]`, `""`, `null`, `{`, ``, "\xff\xfe", `{"a":` + strings.Repeat("[", 10000),
}

// FuzzDecodeRunRequest feeds arbitrary bodies to the decoder: it never
// panics; an accepted body yields a valid spec that openapi.yaml's
// RunRequest also accepts; a refused one is a 400 with a documented code
// that names the field when one is at fault.
func FuzzDecodeRunRequest(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := decodeRunRequest(body)
		if err != nil {
			var e *edgeError
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an edge error", err)
			}
			if e.status != http.StatusBadRequest || !slices.Contains(allCodes, e.code) || e.msg == "" {
				t.Fatalf("error %+v", e)
			}
			// A field is named, except an unknown one spelled "".
			if e.code == CodeInvalidField && e.field == "" ||
				e.code == CodeUnknownField && e.field == "" && !strings.HasPrefix(e.msg, `unknown field ""`) {
				t.Fatalf("%s without a field: %v", e.code, err)
			}
			return
		}
		if what := checkSpec(spec); what != "" {
			t.Fatalf("accepted %q with invalid %s: %+v", body, what, spec)
		}
		validateOpenAPI(t, "RunRequest", body)
	})
}
