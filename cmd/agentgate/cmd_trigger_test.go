package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testTrigger = `{"id":"t-1","name":"issues to triage","run":{"agent":"claude","prompt":"Triage {{.payload.issue.title}}"},
	"when_busy":"skip","verify":"github","paused":false,"url":"http://127.0.0.1:8080/v1/triggers/t-1/deliveries","last_run_id":"r-1",
	"last_deliveries":[{"id":"d-2","delivery_id":"gh-2","event":"issues","received_at":"2026-12-06T10:00:20Z","outcome":"skipped_busy","busy_run_id":"r-1"},
		{"id":"d-1","delivery_id":"gh-1","event":"issues","received_at":"2026-12-06T10:00:10Z","outcome":"started","run_id":"r-1"}],
	"created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-02T10:00:00Z"}`

// testTriggerLines are testTrigger as a table; secret, when not empty,
// is the row after the URL.
func testTriggerLines(t *testing.T, secret string) []string {
	lines := []string{"trigger t-1", "name issues to triage", "url http://127.0.0.1:8080/v1/triggers/t-1/deliveries"}
	if secret != "" {
		lines = append(lines, "secret "+secret)
	}
	return append(lines,
		"verify github",
		"run claude: Triage {{.payload.issue.title}}",
		"when busy skip",
		"state active",
		"last run r-1",
		"created "+lt(t, "2026-12-01T10:00:00Z"),
		"updated "+lt(t, "2026-12-02T10:00:00Z"),
		"",
		"RECEIVED OUTCOME EVENT RUN DETAIL",
		lt(t, "2026-12-06T10:00:20Z")+" skipped_busy issues - delivery gh-2; run r-1 still going",
		lt(t, "2026-12-06T10:00:10Z")+" started issues r-1 delivery gh-1",
	)
}

func TestTriggerCommands(t *testing.T) {
	runFile := filepath.Join(t.TempDir(), "run.json")
	const runJSON = `{"agent":"codex","prompt":"{{if eq .payload.action \"opened\"}}Triage {{.payload.issue.title}}{{end}}"}`
	if err := os.WriteFile(runFile, []byte(runJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	withSecret := `{"id":"t-1","name":"issues to triage","run":{"agent":"claude","prompt":"Triage {{.payload.issue.title}}"},
		"when_busy":"skip","verify":"github","paused":false,"url":"http://127.0.0.1:8080/v1/triggers/t-1/deliveries","secret":"s3cret",
		"created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-02T10:00:00Z"}`
	created := []string{"trigger t-1", "name issues to triage", "url http://127.0.0.1:8080/v1/triggers/t-1/deliveries", "secret s3cret",
		"verify github", "run claude: Triage {{.payload.issue.title}}", "when busy skip", "state active", "last run -",
		"created " + lt(t, "2026-12-01T10:00:00Z"), "updated " + lt(t, "2026-12-02T10:00:00Z")}
	const shownOnce = "The secret is shown only this once: keep it now (agentgate trigger rotate t-1 makes a new one); " +
		"set it as the GitHub webhook's secret, with content type application/json.\n"
	for _, tc := range []apiCase{
		{
			name: "create from run's flags",
			args: []string{"trigger", "create", "--name", "issues to triage", "--verify", "github", "--when-busy", "queue",
				"--permission", "read_only", "Triage {{.payload.issue.title}}"},
			want: sentRequest{Method: "POST", Path: "/v1/triggers", Body: `{"name":"issues to triage","verify":"github","when_busy":"queue",
				"run":{"agent":"claude","prompt":"Triage {{.payload.issue.title}}","permission":"read_only"}}`},
			status: 201, answer: withSecret, code: exitOK, stdout: created, stderr: shownOnce,
		},
		{
			name:   "create from a run file",
			args:   []string{"trigger", "create", "--name", "issues to triage", "--verify", "github", "--run", runFile},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers", Body: `{"name":"issues to triage","verify":"github","run":` + runJSON + `}`},
			status: 201, answer: withSecret, code: exitOK, stdout: created, stderr: shownOnce,
		},
		{
			name:   "create --json prints only the answer",
			args:   []string{"trigger", "create", "--json", "--name", "n", "--verify", "token", "--run", "-"},
			stdin:  runJSON,
			want:   sentRequest{Method: "POST", Path: "/v1/triggers", Body: `{"name":"n","verify":"token","run":` + runJSON + `}`},
			status: 201, answer: `{"id":"t-2","secret":"tok"}`, code: exitOK, stdout: []string{`{"id":"t-2","secret":"tok"}`},
		},
		{
			name:   "create of a token trigger says how to send the secret",
			args:   []string{"trigger", "create", "--name", "n", "--verify", "token", "hi"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers", Body: `{"name":"n","verify":"token","run":{"agent":"claude","prompt":"hi"}}`},
			status: 201, answer: `{"id":"t-2","name":"n","verify":"token","url":"http://h/v1/triggers/t-2/deliveries","secret":"tok",
				"run":{"agent":"claude","prompt":"hi"},"when_busy":"skip","created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-01T10:00:00Z"}`,
			code: exitOK,
			stdout: []string{"trigger t-2", "name n", "url http://h/v1/triggers/t-2/deliveries", "secret tok", "verify token", "run claude: hi",
				"when busy skip", "state active", "last run -", "created " + lt(t, "2026-12-01T10:00:00Z"), "updated " + lt(t, "2026-12-01T10:00:00Z")},
			stderr: "The secret is shown only this once: keep it now (agentgate trigger rotate t-2 makes a new one); " +
				"the sender sends it as Authorization: Bearer SECRET.\n",
		},
		{
			name:   "ls",
			args:   []string{"trigger", "ls"},
			want:   sentRequest{Method: "GET", Path: "/v1/triggers"},
			status: 200, answer: `{"triggers":[` + testTrigger + `,{"id":"t-2","name":"n","verify":"token","paused":true,"when_busy":"queue"}]}`,
			code:   exitOK,
			stdout: []string{"ID NAME VERIFY STATE WHEN BUSY LAST RUN", "t-1 issues to triage github active skip r-1", "t-2 n token paused queue -"},
		},
		{
			name:   "get",
			args:   []string{"trigger", "get", "t-1"},
			want:   sentRequest{Method: "GET", Path: "/v1/triggers/t-1"},
			status: 200, answer: testTrigger, code: exitOK, stdout: testTriggerLines(t, ""),
		},
		{
			name:   "deliveries",
			args:   []string{"trigger", "deliveries", "--limit", "3", "t-1"},
			want:   sentRequest{Method: "GET", Path: "/v1/triggers/t-1/deliveries", Query: "limit=3"},
			status: 200, answer: `{"deliveries":[
				{"id":"d-3","received_at":"2026-12-06T10:00:30Z","outcome":"refused","error":{"code":"quota_exceeded","message":"spent"}},
				{"id":"d-2","event":"ping","received_at":"2026-12-06T10:00:20Z","outcome":"ignored"}]}`,
			code: exitOK,
			stdout: []string{"RECEIVED OUTCOME EVENT RUN DETAIL",
				lt(t, "2026-12-06T10:00:30Z") + " refused - - quota_exceeded: spent",
				lt(t, "2026-12-06T10:00:20Z") + " ignored ping - -"},
		},
		{
			name:   "pause",
			args:   []string{"trigger", "pause", "t-1"},
			want:   sentRequest{Method: "PATCH", Path: "/v1/triggers/t-1", Body: `{"paused":true}`},
			status: 200, answer: `{"id":"t-1","paused":true}`, code: exitOK, stdout: []string{"trigger t-1: paused"},
		},
		{
			name:   "resume",
			args:   []string{"trigger", "resume", "t-1"},
			want:   sentRequest{Method: "PATCH", Path: "/v1/triggers/t-1", Body: `{"paused":false}`},
			status: 200, answer: `{"id":"t-1","paused":false}`, code: exitOK, stdout: []string{"trigger t-1: resumed"},
		},
		{
			name:   "rotate keeping the old secret",
			args:   []string{"trigger", "rotate", "t-1", "--keep-previous", "90m"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers/t-1/rotate", Body: `{"keep_previous_seconds":5400}`},
			status: 200, answer: `{"id":"t-1","verify":"github","secret":"n3w","previous_secret_expires_at":"2026-12-06T11:30:00Z"}`,
			code:   exitOK,
			stdout: []string{"trigger t-1", "secret n3w", "previous secret accepted until " + lt(t, "2026-12-06T11:30:00Z")},
			stderr: shownOnce,
		},
		{
			name:   "rotate ending the old secret at once",
			args:   []string{"trigger", "rotate", "--keep-previous", "0", "t-1"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers/t-1/rotate", Body: `{"keep_previous_seconds":0}`},
			status: 200, answer: `{"id":"t-1","verify":"github","secret":"n3w"}`,
			code: exitOK, stdout: []string{"trigger t-1", "secret n3w", "previous secret no longer accepted"}, stderr: shownOnce,
		},
		{
			name:   "rotate with the gateway's default sends no body",
			args:   []string{"trigger", "rotate", "t-1"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers/t-1/rotate"},
			status: 200, answer: `{"id":"t-1","verify":"github","secret":"n3w","previous_secret_expires_at":"2026-12-07T10:00:00Z"}`,
			code:   exitOK,
			stdout: []string{"trigger t-1", "secret n3w", "previous secret accepted until " + lt(t, "2026-12-07T10:00:00Z")},
			stderr: shownOnce,
		},
		{
			name:   "rm",
			args:   []string{"trigger", "rm", "t-1"},
			want:   sentRequest{Method: "DELETE", Path: "/v1/triggers/t-1"},
			status: 204, code: exitOK, stdout: []string{"trigger t-1: deleted"},
		},
		{
			name:   "too many",
			args:   []string{"trigger", "create", "--name", "n", "--verify", "token", "hi"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers", Body: `{"name":"n","verify":"token","run":{"agent":"claude","prompt":"hi"}}`},
			status: 429, answer: `{"error":{"code":"too_many_triggers","message":"at most 100 triggers"}}`,
			code: exitAPIError, stderr: "error: too_many_triggers: at most 100 triggers\n",
		},
		{
			name:   "a bad verify",
			args:   []string{"trigger", "create", "--name", "n", "--verify", "hmac", "hi"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers", Body: `{"name":"n","verify":"hmac","run":{"agent":"claude","prompt":"hi"}}`},
			status: 400, answer: `{"error":{"code":"invalid_request","message":"verify: want token, github or standard_webhooks","field":"verify"}}`,
			code: exitAPIError, stderr: "error: invalid_request: verify: want token, github or standard_webhooks\n",
		},
		{
			name:   "a rotate of another tenant's trigger",
			args:   []string{"trigger", "rotate", "t-x"},
			want:   sentRequest{Method: "POST", Path: "/v1/triggers/t-x/rotate"},
			status: 404, answer: `{"error":{"code":"not_found","message":"no trigger t-x"}}`,
			code: exitAPIError, stderr: "error: not_found: no trigger t-x\n",
		},
	} {
		t.Run(tc.name, tc.check)
	}
}

func TestTriggerCommandLineErrors(t *testing.T) {
	checkUsageCases(t, []usageCase{
		{args: []string{"trigger"}, stderr: "Commands:"},
		{args: []string{"trigger", "set", "t-1"}, stderr: `agentgate trigger: unknown command "set"`},
		{args: []string{"trigger", "create", "--verify", "token", "hi"}, stderr: "trigger create: --name is needed"},
		{args: []string{"trigger", "create", "--name", "n", "hi"}, stderr: "--verify is needed"},
		{args: []string{"trigger", "create", "--name", "n", "--verify", "token"}, stderr: "a run is needed"},
		{args: []string{"trigger", "create", "--name", "n", "--verify", "token", "--run", "-", "hi"}, stderr: "not both"},
		{args: []string{"trigger", "create", "--name", "n", "--verify", "token", "--run", "-"}, stdin: "{", stderr: "not a JSON object"},
		{args: []string{"trigger", "ls", "x"}, stderr: `unexpected argument "x"`},
		{args: []string{"trigger", "get"}, stderr: "trigger get: want one trigger ID"},
		{args: []string{"trigger", "deliveries"}, stderr: "trigger deliveries: want one trigger ID"},
		{args: []string{"trigger", "pause"}, stderr: "trigger pause: want one trigger ID"},
		{args: []string{"trigger", "resume"}, stderr: "trigger resume: want one trigger ID"},
		{args: []string{"trigger", "rotate"}, stderr: "trigger rotate: want one trigger ID"},
		{args: []string{"trigger", "rotate", "--keep-previous", "-1s", "t-1"}, stderr: "want a duration"},
		{args: []string{"trigger", "rotate", "--keep-previous", "3600", "t-1"}, stderr: "want a duration"},
		{args: []string{"trigger", "rm", "a", "b"}, stderr: "trigger rm: want one trigger ID"},
	})
}

func TestTriggerHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "trigger"}, "trigger rotate [--keep-previous DUR] ID"},
		{[]string{"trigger", "--help"}, "Authorization: Bearer SECRET"},
		{[]string{"help", "trigger", "create"}, "--verify method"},
		{[]string{"trigger", "rotate", "-h"}, "--keep-previous duration"},
	} {
		if res := runCLI(t, map[string]string{}, tc.args...); res.code != exitOK || !strings.Contains(res.stdout, tc.want) {
			t.Errorf("agentgate %v: %s\nwant exit 0 and stdout with %q", tc.args, res, tc.want)
		}
	}
}
