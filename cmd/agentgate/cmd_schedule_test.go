package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/doccheck"
)

// sentRequest is what a command sent to the gateway.
type sentRequest struct {
	Method string
	Path   string // escaped
	Query  string
	Body   string // JSON, compared by value; "" for none
}

// apiFake is a gateway that answers every request with one answer and
// records each request and its headers.
type apiFake struct {
	srv    *httptest.Server
	status int
	answer string

	mu      sync.Mutex
	sent    []sentRequest
	headers []http.Header
}

// newAPIFake serves on 127.0.0.1 until the test ends.
func newAPIFake(t *testing.T, status int, answer string) *apiFake {
	t.Helper()
	f := &apiFake{status: status, answer: answer}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	if !strings.HasPrefix(f.srv.URL, "http://127.0.0.1:") {
		t.Fatalf("the fake listens on %s, not on loopback", f.srv.URL)
	}
	return f
}

func (f *apiFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.sent = append(f.sent, sentRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(b)})
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	if f.answer != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(f.status)
	io.WriteString(w, f.answer)
}

func (f *apiFake) requests() ([]sentRequest, []http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentRequest(nil), f.sent...), append([]http.Header(nil), f.headers...)
}

// apiCase is one command against the fake: the request it must send,
// the answer it gets and what it must print.
type apiCase struct {
	name   string
	args   []string
	stdin  string
	want   sentRequest
	status int
	answer string
	code   int
	stdout []string // its lines, each run of spaces made one
	stderr string   // exactly
}

const testAPIKey = "agk_test-key"

func (tc apiCase) check(t *testing.T) {
	t.Helper()
	fake := newAPIFake(t, tc.status, tc.answer)
	res := runCLIWithStdin(t, map[string]string{"AGENTGATE_URL": fake.srv.URL, "AGENTGATE_API_KEY": testAPIKey}, tc.stdin, tc.args...)
	sent, headers := fake.requests()
	if len(sent) != 1 {
		t.Fatalf("agentgate %s sent %d requests, want 1: %+v\n%s", strings.Join(tc.args, " "), len(sent), sent, res)
	}
	got := sent[0]
	if got.Method != tc.want.Method || got.Path != tc.want.Path || got.Query != tc.want.Query || !sameJSON(got.Body, tc.want.Body) {
		t.Errorf("agentgate %s sent\n%+v\nwant\n%+v", strings.Join(tc.args, " "), got, tc.want)
	}
	if auth := headers[0].Get("Authorization"); auth != "Bearer "+testAPIKey {
		t.Errorf("Authorization = %q", auth)
	}
	if ct := headers[0].Get("Content-Type"); (tc.want.Body != "") != (ct == "application/json") {
		t.Errorf("Content-Type = %q with a body of %q", ct, got.Body)
	}
	if res.code != tc.code || !reflect.DeepEqual(squeezeLines(res.stdout), tc.stdout) || res.stderr != tc.stderr {
		t.Errorf("agentgate %s: %s\nwant exit %d, stdout lines\n%s\nstderr %q", strings.Join(tc.args, " "), res, tc.code,
			strings.Join(tc.stdout, "\n"), tc.stderr)
	}
}

// sameJSON reports whether a and b hold the same JSON value, or are both
// empty.
func sameJSON(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// squeezeLines splits output into lines, each run of spaces made one,
// so that a table is compared by its cells, not by its padding.
func squeezeLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return lines
}

// lt is how the commands show a time of the gateway's: local.
func lt(t *testing.T, rfc3339 string) string {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		t.Fatal(err)
	}
	return localTime(tm)
}

const testSchedule = `{"id":"s-1","name":"nightly deps","cron":"0 3 * * *","timezone":"Europe/Paris",
	"run":{"agent":"codex","prompt":"update\nthe deps"},"when_busy":"queue","catch_up":"once","paused":false,
	"next_fire_at":"2026-12-07T02:00:00Z","last_run_id":"r-9",
	"last_fires":[{"fire_time":"2026-12-06T02:00:00Z","outcome":"started","run_id":"r-9"},
		{"fire_time":"2026-12-05T02:00:00Z","outcome":"skipped_busy","busy_run_id":"r-8","manual":true},
		{"fire_time":"2026-12-04T02:00:00Z","outcome":"refused","error":{"code":"quota_exceeded","message":"the tenant's quota is spent"}}],
	"created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-02T10:00:00Z"}`

// testScheduleLines are testSchedule as a table.
func testScheduleLines(t *testing.T) []string {
	return []string{
		"schedule s-1",
		"name nightly deps",
		"when 0 3 * * * Europe/Paris",
		"run codex: update the deps",
		"when busy queue",
		"catch up once",
		"next fire " + lt(t, "2026-12-07T02:00:00Z"),
		"last run r-9",
		"created " + lt(t, "2026-12-01T10:00:00Z"),
		"updated " + lt(t, "2026-12-02T10:00:00Z"),
		"",
		"FIRED OUTCOME RUN DETAIL",
		lt(t, "2026-12-06T02:00:00Z") + " started r-9 -",
		lt(t, "2026-12-05T02:00:00Z") + " skipped_busy - manual; run r-8 still going",
		lt(t, "2026-12-04T02:00:00Z") + " refused - quota_exceeded: the tenant's quota is spent",
	}
}

func TestScheduleCommands(t *testing.T) {
	runFile := filepath.Join(t.TempDir(), "run.json")
	const runJSON = `{"agent":"claude","prompt":"check the links","permission":"read_only"}`
	if err := os.WriteFile(runFile, []byte(runJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	pausedEvery := `{"id":"s-2","name":"poll","every":"10m","run":{"agent":"claude","prompt":"poll"},"when_busy":"skip","catch_up":"none","paused":true,
		"created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-01T10:00:00Z"}`
	schedule := testScheduleLines(t)
	for _, tc := range []apiCase{
		{
			name: "create from run's flags",
			args: []string{"schedule", "create", "--name", "nightly deps", "--cron", "0 3 * * *", "--timezone", "Europe/Paris",
				"--when-busy", "queue", "--catch-up", "once", "-a", "codex", "--max-turns", "5", "--timeout", "15m", "update", "the deps"},
			want: sentRequest{Method: "POST", Path: "/v1/schedules", Body: `{"name":"nightly deps","cron":"0 3 * * *","timezone":"Europe/Paris",
				"run":{"agent":"codex","prompt":"update the deps","max_turns":5,"timeout_seconds":900},"when_busy":"queue","catch_up":"once"}`},
			status: 201, answer: testSchedule, code: exitOK, stdout: schedule,
		},
		{
			name:   "create from a run file, paused",
			args:   []string{"schedule", "create", "--name", "poll", "--every", "10m", "--paused", "--run", runFile},
			want:   sentRequest{Method: "POST", Path: "/v1/schedules", Body: `{"name":"poll","every":"10m","paused":true,"run":` + runJSON + `}`},
			status: 201, answer: pausedEvery, code: exitOK,
			stdout: []string{"schedule s-2", "name poll", "when every 10m", "run claude: poll", "when busy skip", "catch up none",
				"next fire paused", "last run -", "created " + lt(t, "2026-12-01T10:00:00Z"), "updated " + lt(t, "2026-12-01T10:00:00Z")},
		},
		{
			name:   "create from a run on stdin",
			args:   []string{"schedule", "create", "--name", "poll", "--every", "10m", "--run", "-"},
			stdin:  runJSON,
			want:   sentRequest{Method: "POST", Path: "/v1/schedules", Body: `{"name":"poll","every":"10m","run":` + runJSON + `}`},
			status: 201, answer: pausedEvery, code: exitOK,
			stdout: []string{"schedule s-2", "name poll", "when every 10m", "run claude: poll", "when busy skip", "catch up none",
				"next fire paused", "last run -", "created " + lt(t, "2026-12-01T10:00:00Z"), "updated " + lt(t, "2026-12-01T10:00:00Z")},
		},
		{
			name:   "create with the prompt on stdin, JSON out",
			args:   []string{"--json", "schedule", "create", "--name", "poll", "--every", "10m", "-"},
			stdin:  "poll\nthe feed",
			want:   sentRequest{Method: "POST", Path: "/v1/schedules", Body: `{"name":"poll","every":"10m","run":{"agent":"claude","prompt":"poll\nthe feed"}}`},
			status: 201, answer: `{"id":"s-2"}`, code: exitOK, stdout: []string{`{"id":"s-2"}`},
		},
		{
			name:   "ls",
			args:   []string{"schedule", "ls"},
			want:   sentRequest{Method: "GET", Path: "/v1/schedules"},
			status: 200, answer: `{"schedules":[` + testSchedule + `,` + pausedEvery + `]}`, code: exitOK,
			stdout: []string{
				"ID NAME WHEN NEXT FIRE WHEN BUSY LAST RUN",
				"s-1 nightly deps 0 3 * * * Europe/Paris " + lt(t, "2026-12-07T02:00:00Z") + " queue r-9",
				"s-2 poll every 10m paused skip -",
			},
		},
		{
			name:   "get, a global flag before the subcommand",
			args:   []string{"schedule", "--json", "get", "s-1"},
			want:   sentRequest{Method: "GET", Path: "/v1/schedules/s-1"},
			status: 200, answer: `{"id":"s-1"}`, code: exitOK, stdout: []string{`{"id":"s-1"}`},
		},
		{
			name:   "get escapes the ID",
			args:   []string{"schedule", "get", "a/b?c"},
			want:   sentRequest{Method: "GET", Path: "/v1/schedules/a%2Fb%3Fc"},
			status: 200, answer: testSchedule, code: exitOK, stdout: schedule,
		},
		{
			name:   "get --json prints the answer",
			args:   []string{"schedule", "get", "--json", "s-1"},
			want:   sentRequest{Method: "GET", Path: "/v1/schedules/s-1"},
			status: 200, answer: `{"id":"s-1","name":"nightly deps"}`, code: exitOK, stdout: []string{`{"id":"s-1","name":"nightly deps"}`},
		},
		{
			name:   "fires",
			args:   []string{"schedule", "fires", "s-1", "--limit", "2"},
			want:   sentRequest{Method: "GET", Path: "/v1/schedules/s-1/fires", Query: "limit=2"},
			status: 200, answer: `{"fires":[{"fire_time":"2026-12-06T10:00:10Z","outcome":"queued","busy_run_id":"r-3"},
				{"fire_time":"2026-12-06T10:00:00Z","outcome":"missed","error":{"code":"no_replica","message":"no gateway ran"}}]}`,
			code: exitOK,
			stdout: []string{
				"FIRED OUTCOME RUN DETAIL",
				lt(t, "2026-12-06T10:00:10Z") + " queued - run r-3 still going",
				lt(t, "2026-12-06T10:00:00Z") + " missed - no_replica: no gateway ran",
			},
		},
		{
			name:   "pause",
			args:   []string{"schedule", "pause", "s-1"},
			want:   sentRequest{Method: "PATCH", Path: "/v1/schedules/s-1", Body: `{"paused":true}`},
			status: 200, answer: `{"id":"s-1","paused":true}`, code: exitOK, stdout: []string{"schedule s-1: paused"},
		},
		{
			name:   "resume",
			args:   []string{"schedule", "resume", "s-1"},
			want:   sentRequest{Method: "PATCH", Path: "/v1/schedules/s-1", Body: `{"paused":false}`},
			status: 200, answer: `{"id":"s-1","paused":false,"next_fire_at":"2026-12-07T02:00:00Z"}`, code: exitOK,
			stdout: []string{"schedule s-1: resumed, next fire " + lt(t, "2026-12-07T02:00:00Z")},
		},
		{
			name:   "fire starts a run",
			args:   []string{"schedule", "fire", "s-1"},
			want:   sentRequest{Method: "POST", Path: "/v1/schedules/s-1/run"},
			status: 201, answer: `{"fire_time":"2026-12-06T10:00:10Z","outcome":"started","run_id":"r-10","manual":true}`,
			code: exitOK, stdout: []string{"started: run r-10"},
		},
		{
			name:   "fire while busy",
			args:   []string{"schedule", "fire", "s-1"},
			want:   sentRequest{Method: "POST", Path: "/v1/schedules/s-1/run"},
			status: 200, answer: `{"fire_time":"2026-12-06T10:00:10Z","outcome":"skipped_busy","busy_run_id":"r-9","manual":true}`,
			code: exitOK, stdout: []string{"skipped_busy (run r-9 still going)"},
		},
		{
			name:   "fire refused",
			args:   []string{"schedule", "fire", "s-1"},
			want:   sentRequest{Method: "POST", Path: "/v1/schedules/s-1/run"},
			status: 200, answer: `{"fire_time":"2026-12-06T10:00:10Z","outcome":"refused","error":{"code":"quota_exceeded","message":"spent"},"manual":true}`,
			code: exitOK, stdout: []string{"refused (quota_exceeded: spent)"},
		},
		{
			name:   "set sends only the flags given",
			args:   []string{"schedule", "set", "s-1", "--every", "1h", "--when-busy", "cancel_previous", "--name", ""},
			want:   sentRequest{Method: "PATCH", Path: "/v1/schedules/s-1", Body: `{"every":"1h","when_busy":"cancel_previous","name":""}`},
			status: 200, answer: testSchedule, code: exitOK, stdout: schedule,
		},
		{
			name:   "set a time zone alone",
			args:   []string{"schedule", "set", "--timezone", "UTC", "s-1"},
			want:   sentRequest{Method: "PATCH", Path: "/v1/schedules/s-1", Body: `{"timezone":"UTC"}`},
			status: 200, answer: testSchedule, code: exitOK, stdout: schedule,
		},
		{
			name:   "rm",
			args:   []string{"schedule", "rm", "s-1"},
			want:   sentRequest{Method: "DELETE", Path: "/v1/schedules/s-1"},
			status: 204, code: exitOK, stdout: []string{"schedule s-1: deleted"},
		},
		{
			name:   "rm --json prints nothing",
			args:   []string{"--json", "schedule", "rm", "s-1"},
			want:   sentRequest{Method: "DELETE", Path: "/v1/schedules/s-1"},
			status: 204, code: exitOK,
		},
		{
			name:   "not found",
			args:   []string{"schedule", "get", "s-404"},
			want:   sentRequest{Method: "GET", Path: "/v1/schedules/s-404"},
			status: 404, answer: `{"error":{"code":"not_found","message":"no schedule s-404"}}`,
			code: exitAPIError, stderr: "error: not_found: no schedule s-404\n",
		},
		{
			name:   "a bad field",
			args:   []string{"schedule", "create", "--name", "x", "--cron", "61 * * * *", "hi"},
			want:   sentRequest{Method: "POST", Path: "/v1/schedules", Body: `{"name":"x","cron":"61 * * * *","run":{"agent":"claude","prompt":"hi"}}`},
			status: 400, answer: `{"error":{"code":"invalid_request","message":"minute 61 is out of range","field":"cron"}}`,
			code: exitAPIError, stderr: "error: invalid_request: minute 61 is out of range\n",
		},
		{
			name:   "too many",
			args:   []string{"schedule", "create", "--name", "x", "--every", "1h", "hi"},
			want:   sentRequest{Method: "POST", Path: "/v1/schedules", Body: `{"name":"x","every":"1h","run":{"agent":"claude","prompt":"hi"}}`},
			status: 429, answer: `{"error":{"code":"too_many_schedules","message":"at most 100 schedules"}}`,
			code: exitAPIError, stderr: "error: too_many_schedules: at most 100 schedules\n",
		},
		{
			name:   "a pause of another tenant's schedule",
			args:   []string{"schedule", "pause", "s-x"},
			want:   sentRequest{Method: "PATCH", Path: "/v1/schedules/s-x", Body: `{"paused":true}`},
			status: 404, answer: `{"error":{"code":"not_found","message":"no schedule s-x"}}`,
			code: exitAPIError, stderr: "error: not_found: no schedule s-x\n",
		},
	} {
		t.Run(tc.name, tc.check)
	}
}

// usageCase is a command line that must fail before any request.
type usageCase struct {
	args   []string
	stdin  string
	stderr string // a part of it
}

func checkUsageCases(t *testing.T, cases []usageCase) {
	t.Helper()
	fake := newAPIFake(t, 500, `{"error":{"code":"internal","message":"no request was expected"}}`)
	for _, tc := range cases {
		res := runCLIWithStdin(t, map[string]string{"AGENTGATE_URL": fake.srv.URL}, tc.stdin, tc.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.stderr) || res.stdout != "" {
			t.Errorf("agentgate %s: %s\nwant exit %d and stderr with %q", strings.Join(tc.args, " "), res, exitUsage, tc.stderr)
		}
	}
	if sent, _ := fake.requests(); len(sent) != 0 {
		t.Errorf("bad command lines sent %+v", sent)
	}
}

func TestScheduleCommandLineErrors(t *testing.T) {
	dir := t.TempDir()
	notObject := filepath.Join(dir, "list.json")
	if err := os.WriteFile(notObject, []byte(`["agent"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	checkUsageCases(t, []usageCase{
		{args: []string{"schedule"}, stderr: "Commands:"},
		{args: []string{"schedule", "frobnicate"}, stderr: `agentgate schedule: unknown command "frobnicate"`},
		{args: []string{"schedule", "--bogus", "ls"}, stderr: "agentgate schedule: flag provided but not defined"},
		{args: []string{"schedule", "create", "--every", "1h", "hi"}, stderr: "schedule create: --name is needed"},
		{args: []string{"schedule", "create", "--name", "x", "hi"}, stderr: "--cron EXPR or --every DUR"},
		{args: []string{"schedule", "create", "--name", "x", "--timezone", "UTC", "hi"}, stderr: "--cron EXPR or --every DUR"},
		{args: []string{"schedule", "create", "--name", "x", "--cron", "@daily", "--every", "1h", "hi"}, stderr: "not both"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--timezone", "UTC", "hi"}, stderr: "--timezone goes with --cron"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h"}, stderr: "a run is needed"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--agent", "codex"}, stderr: "a run is needed"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--run", notObject, "hi"}, stderr: "not both"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--run", notObject, "-m", "opus"}, stderr: "not both"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--run", notObject}, stderr: "not a JSON object"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--run", "-"}, stdin: "null", stderr: "not a JSON object"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--run", filepath.Join(dir, "none.json")}, stderr: "--run: open"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "-"}, stdin: strings.Repeat("x", maxStdinBytes+1), stderr: "more than"},
		{args: []string{"schedule", "create", "--name", "x", "--every", "1h", "--max-turns", "many", "hi"}, stderr: "max-turns"},
		{args: []string{"schedule", "ls", "x"}, stderr: `unexpected argument "x"`},
		{args: []string{"schedule", "get"}, stderr: "schedule get: want one schedule ID"},
		{args: []string{"schedule", "fires", "a", "b"}, stderr: "want one schedule ID"},
		{args: []string{"schedule", "fires", "--limit", "x", "a"}, stderr: "limit"},
		{args: []string{"schedule", "pause"}, stderr: "schedule pause: want one schedule ID"},
		{args: []string{"schedule", "resume", "a", "b"}, stderr: "schedule resume: want one schedule ID"},
		{args: []string{"schedule", "fire"}, stderr: "schedule fire: want one schedule ID"},
		{args: []string{"schedule", "set", "s-1"}, stderr: "nothing to change"},
		{args: []string{"schedule", "set", "s-1", "--cron", "@daily", "--every", "1h"}, stderr: "not both"},
		{args: []string{"schedule", "set", "--name", "x"}, stderr: "schedule set: want one schedule ID"},
		{args: []string{"schedule", "rm"}, stderr: "schedule rm: want one schedule ID"},
		{args: []string{"help", "schedule", "frobnicate"}, stderr: `unknown command "schedule frobnicate"`},
		{args: []string{"help", "schedule", "get", "x"}, stderr: "at most one of its subcommands"},
	})
}

func TestScheduleHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // parts of stdout
	}{
		{[]string{"help"}, []string{"\n  schedule ", "\n  trigger "}},
		{[]string{"help", "schedule"}, []string{"Usage: agentgate schedule COMMAND", "schedule fires [--limit N] ID", "schedule rm ID"}},
		{[]string{"schedule", "-h"}, []string{"Usage: agentgate schedule COMMAND", "schedule set ID"}},
		{[]string{"help", "schedule", "create"}, []string{"Usage: agentgate schedule create --name NAME", "--cron expression", "--run file", "-a, --agent agent"}},
		{[]string{"schedule", "fire", "--help"}, []string{"Usage: agentgate schedule fire ID"}},
		{[]string{"schedule", "set", "-h"}, []string{"--catch-up mode"}},
	} {
		res := runCLI(t, map[string]string{}, tc.args...)
		for _, w := range tc.want {
			if res.code != exitOK || !strings.Contains(res.stdout, w) {
				t.Errorf("agentgate %s: %s\nwant exit 0 and stdout with %q", strings.Join(tc.args, " "), res, w)
			}
		}
	}
	// A subcommand's flags are not the group's, nor another's.
	if res := runCLI(t, map[string]string{}, "help", "schedule", "get"); strings.Contains(res.stdout, "--cron") {
		t.Errorf("help schedule get shows create's flags:\n%s", res.stdout)
	}
}

// TestDocumentedSubcommands: every schedule and trigger command the
// documentation shows is one the client has, with flags it takes, and
// the documentation shows each of them.
func TestDocumentedSubcommands(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccheck.Find(append(docs, "../../README.md")...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		words := doccheck.Subcommand(c.Args, "url", "api-key")
		if c.Program != doccheck.Client || len(words) == 0 {
			continue
		}
		group, ok := lookupCommand(words[0])
		if !ok || group.subcommands == nil {
			continue
		}
		if len(words) < 2 {
			t.Errorf("%s: %s without its subcommand", c, words[0])
			continue
		}
		if _, ok := lookupSubcommand(group, words[1]); !ok {
			t.Errorf("%s: the client has no command %q", c, words[0]+" "+words[1])
			continue
		}
		seen[words[0]+" "+words[1]] = true
		// Its flags as written: a flag the command lacks fails before -h.
		if res := runCLI(t, map[string]string{}, append(c.Args, "-h")...); res.code != exitOK {
			t.Errorf("%s: with -h: %s", c, res)
		}
	}
	for _, group := range []string{"schedule", "trigger"} {
		cmd, _ := lookupCommand(group)
		for _, sub := range cmd.subcommands {
			if !seen[group+" "+sub.name] {
				t.Errorf("the documentation never shows %s %s", group, sub.name)
			}
		}
	}
}
