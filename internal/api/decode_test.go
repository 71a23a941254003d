package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
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

// TestDecodeRunRequestErrors holds the exact answer to each way a field
// can be wrong, and which error wins when several are: a member that is
// unknown or repeated first, in body order, then the values in the order
// of the request's fields, whatever their order in the body.
func TestDecodeRunRequestErrors(t *testing.T) {
	ok := `"agent":"claude","prompt":"hi"`
	const modelRule = `must start with a letter or digit and contain only letters, digits and "-._:/@[]" (at most 128 bytes)`
	cases := []struct{ body, code, field, msg string }{
		{`{"agent":7,"prompt":"hi"}`, CodeInvalidField, "agent", "must be a string"},
		{`{"agent":"a\u0000","prompt":"hi"}`, CodeInvalidField, "agent", "must not contain NUL characters"},
		{`{"prompt":"hi"}`, CodeInvalidField, "agent", "is required"},
		{`{"agent":"` + strings.Repeat("a", 65) + `","prompt":"hi"}`, CodeInvalidField, "agent", "must be at most 64 bytes"},
		{`{"agent":"claude","prompt":1}`, CodeInvalidField, "prompt", "must be a string"},
		{`{"agent":"claude","prompt":" "}`, CodeInvalidField, "prompt", "is required and must not be blank"},
		{`{"agent":"claude","prompt":"` + strings.Repeat("x", maxPromptBytes+1) + `"}`, CodeInvalidField, "prompt", "must be at most 524288 bytes"},
		{`{` + ok + `,"system_prompt":1}`, CodeInvalidField, "system_prompt", "must be a string"},
		{`{` + ok + `,"system_prompt":"` + strings.Repeat("x", maxSystemPromptBytes+1) + `"}`, CodeInvalidField, "system_prompt", "must be at most 131072 bytes"},
		{`{` + ok + `,"model":"-x"}`, CodeInvalidField, "model", modelRule},
		{`{` + ok + `,"model":"` + strings.Repeat("m", maxIdentBytes+1) + `"}`, CodeInvalidField, "model", modelRule},
		{`{` + ok + `,"model":1}`, CodeInvalidField, "model", "must be a string"},
		{`{` + ok + `,"effort":1}`, CodeInvalidField, "effort", "must be a string"},
		{`{` + ok + `,"effort":""}`, CodeInvalidField, "effort", "must be one of low, medium, high"},
		{`{` + ok + `,"max_turns":0}`, CodeInvalidField, "max_turns", "must be an integer from 1 to 1000"},
		{`{` + ok + `,"timeout_seconds":604801}`, CodeInvalidField, "timeout_seconds", "must be an integer from 1 to 604800"},
		{`{` + ok + `,"max_budget_usd":"1"}`, CodeInvalidField, "max_budget_usd", "must be a number greater than 0"},
		{`{` + ok + `,"output_schema":[]}`, CodeInvalidField, "output_schema", "must be a JSON Schema object"},
		{`{` + ok + `,"resume_session_id":"a/b"}`, CodeInvalidField, "resume_session_id",
			`must start with a letter or digit and contain only letters, digits and "-._:" (at most 128 bytes)`},
		{`{` + ok + `,"keep_session":1}`, CodeInvalidField, "keep_session", "must be true or false"},
		{`{` + ok + `,"metadata":[]}`, CodeInvalidField, "metadata", "must be an object whose values are strings"},
		{`{` + ok + `,"metadata":{"":"v"}}`, CodeInvalidField, "metadata", "keys must be 1 to 64 bytes"},
		{`{` + ok + `,"metadata":{"a\u0000":"v"}}`, CodeInvalidField, "metadata", "keys must not contain NUL characters"},
		{`{` + ok + `,"metadata":{"k":"a","k":"b"}}`, CodeInvalidField, "metadata", `key "k" appears more than once`},
		{`{` + ok + `,"metadata":{"k":1}}`, CodeInvalidField, "metadata", `value of "k" must be a string`},
		{`{` + ok + `,"cwd":1}`, CodeInvalidField, "cwd", "must be a string"},
		{`{` + ok + `,"workspace":[]}`, CodeInvalidField, "workspace", `must be an object with one of "git", "archive" or "from_run"`},
		{`{` + ok + `,"workspace":{}}`, CodeInvalidField, "workspace", `must have exactly one of "git", "archive" or "from_run" (it has 0)`},
		{`{` + ok + `,"workspace":{"git":{"url":"https://h/r"},"archive":"x"}}`, CodeInvalidField, "workspace", `must have exactly one of "git", "archive" or "from_run" (it has 2)`},
		{`{` + ok + `,"workspace":{"gti":{}}}`, CodeUnknownField, "workspace.gti", `unknown field "workspace.gti" (did you mean "workspace.git"?)`},
		{`{` + ok + `,"workspace":{"git":{"url":"https://h/r","rf":"main"}}}`, CodeUnknownField, "workspace.git.rf", `unknown field "workspace.git.rf" (did you mean "workspace.git.ref"?)`},
		{`{` + ok + `,"workspace":{"git":{"ref":"main"}}}`, CodeInvalidField, "workspace.git.url", "is required"},
		{`{` + ok + `,"workspace":{"git":{"url":"https://h/` + strings.Repeat("r", runs.MaxGitURLBytes) + `"}}}`, CodeInvalidField, "workspace.git.url", "must be at most 2048 bytes"},
		{`{` + ok + `,"workspace":{"git":{"url":1}}}`, CodeInvalidField, "workspace.git.url", "must be a string"},
		{`{` + ok + `,"workspace":{"git":"https://h/r"}}`, CodeInvalidField, "workspace.git", `must be an object: {"url": …, "ref": …, "credential": …}`},
		{`{` + ok + `,"workspace":{"archive":"nope"}}`, CodeInvalidField, "workspace.archive", "must be the id of an uploaded file (POST /v1/files)"},
		{`{` + ok + `,"workspace":{"from_run":"nope"}}`, CodeInvalidField, "workspace.from_run", "must be a run's id"},
		{`{` + ok + `,"workspace":{"git":{"url":"https://h/r"}},"push":{}}`, CodeInvalidField, "push.branch", "is required"},
		{`{` + ok + `,"workspace":{"git":{"url":"https://h/r"}},"push":{"branch":"b","force":true}}`, CodeUnknownField, "push.force", `unknown field "push.force"`},
		{`{` + ok + `,"push":"b"}`, CodeInvalidField, "push", `must be an object: {"branch": …, "message": …}`},
		{`{` + ok + `,"cwd":"` + strings.Repeat("d", maxCwdBytes+1) + `"}`, CodeInvalidField, "cwd", "must be a relative path that stays inside the workspace"},
		{`{` + ok + `,"permission":""}`, CodeInvalidField, "permission", "must be one of read_only, workspace_write, full"},
		{`{` + ok + `,"network":"internet"}`, CodeInvalidField, "network", "must be one of model, allow, open, none"},
		{`{` + ok + `,"network":1}`, CodeInvalidField, "network", "must be a string"},
		{`{` + ok + `,"network":"allow","allow_hosts":"a.example.com"}`, CodeInvalidField, "allow_hosts", "must be an array of strings"},
		{`{` + ok + `,"network":"allow","allow_hosts":[1]}`, CodeInvalidField, "allow_hosts", "must be an array of strings"},
		{`{` + ok + `,"network":"allow","allow_hosts":["` + strings.Repeat("h", 261) + `"]}`, CodeInvalidField, "allow_hosts", "entry 0 is longer than 260 bytes"},
		{`{` + ok + `,"network":"allow","allow_hosts":[` + strings.Repeat(`"h.example.com",`, 64) + `"x"]}`, CodeInvalidField, "allow_hosts", "must have at most 64 entries"},
		{`{` + ok + `,"approvals":1}`, CodeInvalidField, "approvals", "must be a string"},
		{`{` + ok + `,"approvals":"always"}`, CodeInvalidField, "approvals", "must be one of never, ask"},
		{`{` + ok + `,"approval_timeout_seconds":86401}`, CodeInvalidField, "approval_timeout_seconds", "must be an integer from 1 to 86400"},
		{`{` + ok + `,"interactive":"yes"}`, CodeInvalidField, "interactive", "must be true or false"},
		{`{` + ok + `,"idle_timeout_seconds":0}`, CodeInvalidField, "idle_timeout_seconds", "must be an integer from 1 to 2592000"},
		{`{` + ok + `,"hibernate_after_seconds":4}`, CodeInvalidField, "hibernate_after_seconds", "must be an integer from 5 to 2592000"},
		{`{` + ok + `,"max_total_tokens":1099511627777}`, CodeInvalidField, "max_total_tokens", "must be an integer from 1 to 1099511627776"},
		{`{` + ok + `,"mcp_servers":[]}`, CodeInvalidField, "mcp_servers", "must be an object from a server's name to its command or url"},
		{`{` + ok + `,"attachments":{}}`, CodeInvalidField, "attachments", `must be an array of {"file_id": …} or {"media_type": …, "data": base64}`},
		{`{` + ok + `,"webhook_url":1}`, CodeInvalidField, "webhook_url", "must be a string"},
		{`{` + ok + `,"webhook_url":""}`, CodeInvalidField, "webhook_url", "must be an https URL of at most 2048 bytes"},
		{`{` + ok + `,"webhook_url":"https://` + strings.Repeat("h", 2048) + `"}`, CodeInvalidField, "webhook_url", "must be an https URL of at most 2048 bytes"},
		// Several faults: the first field in request order is reported.
		{`{"webhook_url":"","max_turns":0,` + ok + `}`, CodeInvalidField, "max_turns", "must be an integer from 1 to 1000"},
		{`{"max_turns":0,"model":"-x",` + ok + `}`, CodeInvalidField, "model", modelRule},
		{`{"permission":"root","cwd":"/etc",` + ok + `}`, CodeInvalidField, "cwd", "must be a relative path that stays inside the workspace"},
		{`{"prompt":"","agent":""}`, CodeInvalidField, "agent", "is required"},
		{`{"idle_timeout_seconds":0,"interactive":1,"approvals":"x",` + ok + `}`, CodeInvalidField, "approvals", "must be one of never, ask"},
		// A member's name is checked before any value.
		{`{"agent":"","colour":"red"}`, CodeUnknownField, "colour", `unknown field "colour"`},
		{`{"agent":"","agent":"x","colour":"red"}`, CodeInvalidField, "agent", "appears more than once"},
	}
	for _, c := range cases {
		_, err := decodeRunRequest([]byte(c.body))
		var e *edgeError
		if !errors.As(err, &e) {
			t.Errorf("%.80s: error %v, want an edge error", c.body, err)
			continue
		}
		want := c.msg
		if c.code == CodeInvalidField {
			want = `field "` + c.field + `": ` + c.msg
		}
		if e.status != http.StatusBadRequest || e.code != c.code || e.field != c.field || e.msg != want {
			t.Errorf("%.80s: %d %s %s %q, want 400 %s %s %q", c.body, e.status, e.code, e.field, e.msg, c.code, c.field, want)
		}
	}
}

// TestDecodeRunRequestAllFields checks that each field lands in its place
// in the spec.
func TestDecodeRunRequestAllFields(t *testing.T) {
	body := `{"agent":"claude","prompt":"fix it","system_prompt":"be brief","model":"m-1","effort":"high",
		"max_turns":3,"timeout_seconds":60,"max_budget_usd":0.5,"output_schema":{"type":"object"},
		"resume_session_id":"s-1","keep_session":true,"metadata":{"k":"v"},"cwd":"a/b","permission":"read_only",
		"approvals":"ask","approval_timeout_seconds":30,"interactive":true,"idle_timeout_seconds":40,
		"hibernate_after_seconds":60,"max_total_tokens":1099511627776,"mcp_servers":{"m":{"url":"https://h/"}},
		"attachments":[{"file_id":"file-0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"}],"webhook_url":"https://hook/x",
		"network":"allow","allow_hosts":["registry.npmjs.org:443","10.0.0.0/8"]}`
	got, err := decodeRunRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := runs.Spec{Agent: "claude", Prompt: "fix it", SystemPrompt: "be brief", Model: "m-1", Effort: "high",
		MaxTurns: 3, TimeoutSeconds: 60, MaxBudgetUSD: 0.5, OutputSchema: json.RawMessage(`{"type":"object"}`),
		ResumeSessionID: "s-1", KeepSession: true, Metadata: map[string]string{"k": "v"}, Cwd: "a/b",
		Permission: runs.ReadOnly, Approvals: runs.ApprovalsAsk, ApprovalTimeoutSeconds: 30, Interactive: true,
		IdleTimeoutSeconds: 40, HibernateAfterSeconds: 60, MaxTotalTokens: 1 << 40, MCPServers: map[string]runs.MCPServer{"m": {URL: "https://h/"}},
		Attachments: []runs.Attachment{{FileID: "file-0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"}}, WebhookURL: "https://hook/x",
		Network: runs.NetworkAllow, AllowHosts: []string{"registry.npmjs.org:443", "10.0.0.0/8"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec\n%+v, want\n%+v", got, want)
	}
}
