package triggers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"text/template"

	"github.com/agentgate/agentgate/internal/runs"
)

func mustParse(t *testing.T, text string) *Template {
	t.Helper()
	tmpl, err := ParseTemplate(text)
	if err != nil {
		t.Fatalf("ParseTemplate(%q): %v", text, err)
	}
	return tmpl
}

func decode(t testing.TB, body string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("payload %q: %v", body, err)
	}
	return v
}

// render parses text and renders it over the JSON body with a 64 KiB limit.
func render(t *testing.T, text, body string, h http.Header) (string, error) {
	t.Helper()
	return mustParse(t, text).Render(decode(t, body), h, 64<<10)
}

func TestParseTemplateAccepts(t *testing.T) {
	for _, text := range []string{
		"",
		"plain text",
		"{{.payload.issue.title}}",
		`{{index .headers "X-Github-Event"}}`,
		`{{if eq .payload.action "opened"}}new{{else if ne .payload.action "closed"}}other{{else}}closed{{end}}`,
		`{{if and (gt (len .payload.labels) 0) (not .payload.draft)}}{{end}}`,
		`{{if or (lt .payload.n 1.0) (le .payload.n 2.0) (ge .payload.n 3.0)}}{{end}}`,
		"{{with .payload.issue}}{{.title}}{{else}}none{{end}}",
		"{{with $i := .payload.issue}}{{$i.title}}{{end}}",
		"{{range .payload.labels}}{{.name}} {{end}}",
		"{{range $i, $l := .payload.labels}}{{$i}}={{$l.name}}{{else}}no labels{{end}}",
		"{{$items := .payload.items}}{{range $items}}{{.}}{{end}}",
		"{{range $.payload.items}}{{break}}{{end}}{{range .headers}}{{continue}}{{end}}",
		"{{with .payload.items}}{{range .}}{{.}}{{end}}{{end}}",
		"{{range .payload.a}}{{else}}{{range .payload.b}}{{end}}{{end}}",
		"{{range .payload.a}}{{end}}{{range .payload.b}}{{end}}",
		"{{/* a comment */}}{{- .payload.x -}}",
		"{{json .payload}} {{trunc 100 .payload.body}} {{.payload.body | trunc 5}}",
		`{{(index .payload "a").b}}`,
		"{{$x := .payload.a}}{{$x = .payload.b}}{{range $x}}{{end}}",
		"{{$x := 1}}{{$x = 2}}{{trunc $x .payload.s}}",
	} {
		if _, err := ParseTemplate(text); err != nil {
			t.Errorf("ParseTemplate(%q): %v", text, err)
		}
	}
}

func TestParseTemplateRefuses(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{strings.Repeat("a", MaxTemplateBytes+1), "may be at most 65536"},
		{"{{.payload.a", "is not a valid template"},
		{"{{end}}", "is not a valid template"},
		{"{{$undeclared}}", "is not a valid template"},
		{`{{define "x"}}a{{end}}`, "defines a template"},
		{`{{define "prompt"}}a{{end}}`, "defines a template"},
		{`{{block "x" .}}a{{end}}`, "defines a template"},
		{`{{template "x"}}`, "calls a template"},
		{`{{printf "%s" .payload.a}}`, `calls "printf"`},
		{`{{.payload.a | printf "%s"}}`, `calls "printf"`},
		{`{{if (print 1)}}{{end}}`, `calls "print"`},
		{`{{println}}`, `calls "println"`},
		{`{{html .payload}}`, `calls "html"`},
		{`{{js .payload}}`, `calls "js"`},
		{`{{urlquery .payload}}`, `calls "urlquery"`},
		{`{{call .payload.f}}`, `calls "call"`},
		{`{{slice .payload.s 1}}`, `calls "slice"`},
		{`{{show .payload}}`, `calls "show"`},
		{`{{nosuch}}`, `calls "nosuch"`},
		{"{{range .payload.a}}{{range .b}}{{end}}{{end}}", "a range inside a range"},
		{"{{range .payload.a}}{{with .b}}{{if .}}{{range .}}{{end}}{{end}}{{end}}{{end}}", "a range inside a range"},
		{"{{range 1000000000}}{{end}}", "ranges over something other"},
		{"{{$n := 1000000000}}{{range $n}}{{end}}", "ranges over something other"},
		{"{{with 5}}{{range .}}{{end}}{{end}}", "ranges over something other"},
		{"{{with $n := 5}}{{range $n}}{{end}}{{end}}", "ranges over something other"},
		{"{{range len .payload.a}}{{end}}", "ranges over something other"},
		{"{{range (.payload.a)}}{{end}}", "ranges over something other"},
		{`{{range index .payload "a"}}{{end}}`, "ranges over something other"},
		{"{{$ := 5}}{{range $}}{{end}}", "ranges over something other"},
		// An assignment on some path takes away "holds data" for good.
		{"{{$x := .payload.a}}{{if .payload.b}}{{$x = 100}}{{end}}{{range $x}}{{end}}", "ranges over something other"},
		{"{{$x := .payload.a}}{{len ($x = 7)}}{{range $x}}{{end}}", "ranges over something other"},
		{"{{$i := .payload.a}}{{$e := 0}}{{range $i, $e = .payload.b}}{{end}}{{range $i}}{{end}}", "ranges over something other"},
		// A variable declared in an if's list is gone in its else.
		{"{{if .payload.a}}{{$x := .payload.a}}{{else}}{{range $x}}{{end}}{{end}}", ""},
	} {
		_, err := ParseTemplate(tc.text)
		var field *runs.FieldError
		if !errors.As(err, &field) || field.Field != "prompt" || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("ParseTemplate(%.60q) = %v, want a FieldError for prompt", tc.text, err)
			continue
		}
		if !strings.Contains(field.Reason, tc.want) {
			t.Errorf("ParseTemplate(%.60q) = %q, want it to say %q", tc.text, field.Reason, tc.want)
		}
	}
}

func TestParseTemplateSaysWhere(t *testing.T) {
	_, err := ParseTemplate("line one\n{{.payload.a}} {{printf \"x\"}}")
	if err == nil || !strings.Contains(err.Error(), "(at 2:") || !strings.Contains(err.Error(), "index, len, eq") {
		t.Errorf("ParseTemplate = %v, want the place and the allowed functions", err)
	}
}

func TestRenderFieldsAndHeaders(t *testing.T) {
	h := header("X-GitHub-Event", "issues", "User-Agent", "GitHub-Hookshot/1")
	got, err := render(t, `{{index .headers "X-Github-Event"}}: {{.payload.issue.title}} by {{index .headers "User-Agent"}}`,
		`{"issue":{"title":"Crash on start"}}`, h)
	if err != nil || got != "issues: Crash on start by GitHub-Hookshot/1" {
		t.Errorf("Render = %q, %v", got, err)
	}
}

func TestRenderHidesSecretHeaders(t *testing.T) {
	h := header(
		"Authorization", "Bearer agt_trg_secret1",
		"Proxy-Authorization", "Basic secret2",
		"Cookie", "session=secret3",
		"X-Hub-Signature", "sha1=secret4",
		"X-Hub-Signature-256", "sha256=secret5",
		"webhook-signature", "v1,secret6",
		"X-Gitlab-Token", "secret7",
		"x-github-event", "push",
		"Webhook-Id", "msg_1",
	)
	got, err := render(t, `{{json .headers}}|{{.headers.Authorization}}|{{.headers.Cookie}}`, `{}`, h)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "secret") {
		t.Errorf("the prompt shows a secret header: %s", got)
	}
	if want := `{"Webhook-Id":"msg_1","X-Github-Event":"push"}||`; got != want {
		t.Errorf("Render = %s, want %s", got, want)
	}
}

func TestRenderHeadersCanonicalSpellingWins(t *testing.T) {
	h := http.Header{"X-Github-Event": {"issues"}, "x-github-event": {"other"}, "X-Empty": {}}
	for range 20 { // map order is random: the same answer every time
		got, err := render(t, `{{json .headers}}`, `{}`, h)
		if err != nil || got != `{"X-Github-Event":"issues"}` {
			t.Fatalf("Render = %s, %v", got, err)
		}
	}
}

func TestRenderMissingAndNullPrintNothing(t *testing.T) {
	for _, text := range []string{
		"{{.payload.missing}}",
		"{{.payload.null}}",
		`{{index .payload "missing"}}`,
		"{{.headers.Missing}}",
		`{{index .headers "Missing"}}`,
		"{{$x := .payload.missing}}{{$x}}",
		"{{trunc 5 .payload.null}}",
	} {
		got, err := render(t, "["+text+"]", `{"null":null}`, nil)
		if err != nil || got != "[]" {
			t.Errorf("%s rendered %q, %v; want []", text, got, err)
		}
	}
}

func TestRenderPrintsValuesAsJSON(t *testing.T) {
	body := `{"id":1234567891,"half":0.5,"big":1e21,"ok":true,"labels":["bug","<p1>"],"user":{"login":"ada"},"s":"a&b"}`
	got, err := render(t, "{{.payload.id}} {{.payload.half}} {{.payload.big}} {{.payload.ok}} {{.payload.labels}} {{.payload.user}} {{.payload.s}}", body, nil)
	want := `1234567891 0.5 1e+21 true ["bug","<p1>"] {"login":"ada"} a&b`
	if err != nil || got != want {
		t.Errorf("Render = %q, %v; want %q", got, err, want)
	}
	got, err = render(t, "{{json .payload.user}}{{json .payload.s}}{{json .payload.missing}}", body, nil)
	if err != nil || got != `{"login":"ada"}"a&b"null` {
		t.Errorf("json = %q, %v", got, err)
	}
}

func TestRenderJSONNumbersPrintAsSent(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(`{"id":12345678901234567890,"f":1.50}`))
	dec.UseNumber()
	var payload any
	if err := dec.Decode(&payload); err != nil {
		t.Fatal(err)
	}
	got, err := mustParse(t, "{{.payload.id}} {{.payload.f}} {{json .payload}}").Render(payload, nil, 1000)
	if want := `12345678901234567890 1.50 {"f":1.50,"id":12345678901234567890}`; err != nil || got != want {
		t.Errorf("Render = %q, %v; want %q", got, err, want)
	}
}

func TestRenderTrunc(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{{trunc 3 .payload.s}}`, "hél"},
		{`{{trunc 0 .payload.s}}`, ""},
		{`{{trunc 100 .payload.s}}`, "héllo wörld"},
		{`{{.payload.s | trunc 2}}`, "hé"},
		{`{{trunc 4 .payload.list}}`, `["a"`},
		{`{{trunc 100000 .payload.s}}`, "héllo wörld"},
	} {
		got, err := render(t, tc.text, `{"s":"héllo wörld","list":["a","b"]}`, nil)
		if err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
	for _, text := range []string{`{{trunc 100001 .payload.s}}`, `{{trunc -1 .payload.s}}`} {
		if got, err := render(t, text, `{"s":"x"}`, nil); err == nil || !strings.Contains(err.Error(), "trunc takes a count") {
			t.Errorf("%s = %q, %v; want trunc's bound", text, got, err)
		}
	}
}

func TestRenderFiltersEvents(t *testing.T) {
	text := `{{if eq .payload.action "opened"}}Triage: {{.payload.issue.title}}{{end}}`
	for body, want := range map[string]string{
		`{"action":"opened","issue":{"title":"Crash"}}`: "Triage: Crash",
		`{"action":"closed","issue":{"title":"Crash"}}`: "",
	} {
		if got, err := render(t, text, body, nil); err != nil || got != want {
			t.Errorf("over %s: %q, %v; want %q", body, got, err, want)
		}
	}
}

// The payload is data: template syntax in it is printed, never run.
func TestRenderPayloadTextIsNeverTemplateCode(t *testing.T) {
	evil := `{{.headers}} {{printf "%s" "x"}} {{define "a"}}{{end}} {{range 9999999999}}{{end}}`
	body, _ := json.Marshal(map[string]any{"title": evil, "list": []string{evil}})
	h := header("Authorization", "Bearer agt_trg_secret", "X-GitHub-Event", "issues")
	got, err := render(t, "{{.payload.title}}|{{range .payload.list}}{{.}}{{end}}|{{trunc 1000 .payload.title}}", string(body), h)
	if want := evil + "|" + evil + "|" + evil; err != nil || got != want {
		t.Errorf("Render = %q, %v; want the payload's text verbatim", got, err)
	}
}

func TestRenderAssignmentsPrintNothing(t *testing.T) {
	got, err := render(t, "{{$x := .payload.a}}{{$x = .payload.b}}[{{$x}}]", `{"a":1,"b":2}`, nil)
	if err != nil || got != "[2]" {
		t.Errorf("Render = %q, %v", got, err)
	}
}

func TestRenderBoundsTheOutput(t *testing.T) {
	tmpl := mustParse(t, "{{.payload.s}}")
	payload := decode(t, `{"s":"0123456789"}`)
	if got, err := tmpl.Render(payload, nil, 10); err != nil || got != "0123456789" {
		t.Errorf("exactly at the limit: %q, %v", got, err)
	}
	_, err := tmpl.Render(payload, nil, 9)
	var re *RenderError
	if !errors.As(err, &re) || re.Reason != "the prompt would be longer than 9 bytes" {
		t.Errorf("past the limit: %v", err)
	}
	// A range that would write far past the limit stops at it.
	loop := mustParse(t, "{{range .payload.list}}{{$.payload.s}}{{end}}")
	list := make([]any, 100_000)
	_, err = loop.Render(map[string]any{"list": list, "s": strings.Repeat("x", 1000)}, nil, 4096)
	if err == nil || !strings.Contains(err.Error(), "longer than 4096 bytes") {
		t.Errorf("a long range: %v", err)
	}
}

func TestRenderExecutionErrorsAreClear(t *testing.T) {
	for _, tc := range []struct{ text, body string }{
		{"{{.payload.s.field}}", `{"s":"text"}`},
		{"{{.payload.null.field}}", `{"null":null}`},
		{"{{.payload.missing.field}}", `{}`},
		{"{{index .payload.list 5}}", `{"list":[1]}`},
		{"{{range .payload.s}}{{end}}", `{"s":"text"}`},
		{"{{range .payload.n}}{{end}}", `{"n":1000000000}`},
		{`{{if eq .payload.n 5}}{{end}}`, `{"n":5}`}, // a JSON number is a float64: 5.0
	} {
		got, err := render(t, tc.text, tc.body, nil)
		var re *RenderError
		if !errors.As(err, &re) || !strings.HasPrefix(re.Reason, "the prompt template failed: prompt:1:") {
			t.Errorf("%s over %s = %q, %v; want a clear failure", tc.text, tc.body, got, err)
		}
	}
}

func TestRenderRefusesWhatJSONDoesNotDecodeTo(t *testing.T) {
	tmpl := mustParse(t, "{{range .payload.n}}.{{end}}")
	for _, payload := range []any{map[string]any{"n": 5}, []int{1}, map[string]any{"a": []any{struct{}{}}}} {
		got, err := tmpl.Render(payload, nil, 100)
		var re *RenderError
		if err == nil || errors.As(err, &re) {
			t.Errorf("Render(%#v) = %q, %v; want the caller's error, not the template's", payload, got, err)
		}
	}
}

func TestRenderBoundsRangeSteps(t *testing.T) {
	body := strings.Repeat("{{.}}", 1000) // 2 nodes each
	tmpl := mustParse(t, "{{range .payload.list}}"+body+"{{end}}")
	steps := MaxRangeSteps/2000 + 1
	// The long list is nested: every list or object counts.
	payload := map[string]any{"list": []any{1.0}, "deep": map[string]any{"long": make([]any, steps)}}
	_, err := tmpl.Render(payload, nil, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "steps") {
		t.Errorf("a range over up to %d items of a %d-node body: %v", steps, 2000, err)
	}
	payload["deep"] = map[string]any{"long": make([]any, steps/2)}
	if got, err := tmpl.Render(payload, nil, 1<<20); err != nil || got != strings.Repeat("1", 1000) {
		t.Errorf("half as many items: %.20q, %v", got, err)
	}
}

func TestRenderBoundsComputedBytes(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	tmpl := mustParse(t, `{{range .payload.list}}{{if eq (json $.payload) ""}}{{end}}{{end}}`)
	payload := map[string]any{"big": big, "list": make([]any, 20)}
	_, err := tmpl.Render(payload, nil, 100)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes", MaxComputedBytes)) {
		t.Errorf("json of a MiB, 20 times: %v", err)
	}
	// The count is per rendering, not per template.
	once := mustParse(t, `{{if eq (json .payload) ""}}{{end}}`)
	for i := range 20 {
		if _, err := once.Render(payload, nil, 100); err != nil {
			t.Fatalf("rendering %d of a template that computes 1 MiB: %v", i, err)
		}
	}
}

func TestRenderConcurrently(t *testing.T) {
	tmpl := mustParse(t, `{{range .payload.items}}{{json .}};{{end}}{{trunc 3 .payload.s}}`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			payload := map[string]any{"items": []any{float64(i), "x"}, "s": "abcdef"}
			got, err := tmpl.Render(payload, nil, 100)
			if want := fmt.Sprintf(`%d;"x";abc`, i); err != nil || got != want {
				errs <- fmt.Errorf("goroutine %d: %q, %v; want %q", i, got, err, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The comparisons count their work yet mean what text/template's built-ins
// mean: the same expression over the same data prints the same, or fails
// for the same reason.
func TestRenderComparisonsMatchTheBuiltins(t *testing.T) {
	payload := decode(t, `{"s":"abc","t":"abd","e":"","n":1.5,"m":2,"yes":true,"no":false,
		"null":null,"list":[1,2],"obj":{"a":1},"none":[]}`).(map[string]any)
	payload["num"] = json.Number("2") // as a decoder with UseNumber makes it
	h := header("X-Github-Event", "issues")
	operands := []string{
		".payload.s", ".payload.t", ".payload.e", `"abc"`, ".payload.num", `"2"`,
		".payload.n", ".payload.m", "2.0", "1", "-1", "97", "(len .payload.list)", "(index .payload.s 0)",
		".payload.yes", ".payload.no", "true", "1i", ".payload.null", ".payload.missing",
		".payload.list", ".payload.none", ".payload.obj", ".headers",
	}
	var exprs []string
	for _, fn := range []string{"eq", "ne", "lt", "le", "gt", "ge"} {
		for _, a := range operands {
			for _, b := range operands {
				exprs = append(exprs, fmt.Sprintf("{{%s %s %s}}", fn, a, b))
			}
		}
		exprs = append(exprs, fmt.Sprintf("{{%s}}", fn), fmt.Sprintf("{{%s .payload.s}}", fn),
			fmt.Sprintf("{{%s 1 2 3}}", fn), fmt.Sprintf(`{{.payload.s | %s "abc"}}`, fn))
	}
	exprs = append(exprs,
		`{{eq .payload.s .payload.t "abc"}}`, `{{eq .payload.s .payload.t .payload.e}}`,
		`{{eq .payload.s "abc" .payload.list}}`, `{{eq .payload.s .payload.list "abc"}}`,
		`{{eq .payload.null .payload.s .payload.list .payload.missing}}`, `{{eq .payload.m 1 2 3.0}}`,
	)
	data := map[string]any{"payload": payload, "headers": promptHeaders(h)}
	for _, expr := range exprs {
		ours, err := mustParse(t, expr).Render(payload, h, 1000)
		oursCause := comparisonCause(err)
		var builtin strings.Builder
		err = template.Must(template.New("x").Option("missingkey=zero").Parse(expr)).Execute(&builtin, data)
		if builtinCause := comparisonCause(err); ours != builtin.String() || oursCause != builtinCause {
			t.Errorf("%s: %q, %q; the built-in: %q, %q", expr, ours, oursCause, builtin.String(), builtinCause)
		}
	}
}

// comparisonCause is why a comparison failed, without the template's name
// and the place, which differ between Render and a plain template.
func comparisonCause(err error) string {
	if err == nil {
		return ""
	}
	_, cause, _ := strings.Cut(err.Error(), ">: ")
	return cause
}

// Comparing two long equal strings over and over in a range, or looking
// one up as a key, counts against the same bound as json: it used to take
// seconds of CPU for free.
func TestRenderBoundsComparedBytes(t *testing.T) {
	long := strings.Repeat("x", 450_000)
	body, err := json.Marshal(map[string]any{"s": long, "t": long, "l": make([]int, 50_000)})
	if err != nil {
		t.Fatal(err)
	}
	payload := decode(t, string(body)) // about a MiB, as a delivery's body
	for _, fn := range []string{"eq", "ne", "lt", "le", "gt", "ge", "index"} {
		body := strings.Repeat(fmt.Sprintf("{{if %s $.payload.s $.payload.t}}{{end}}", fn), 12)
		if fn == "index" {
			body = strings.Repeat("{{if index $.payload $.payload.s}}{{end}}", 12)
		}
		_, err := mustParse(t, "{{range .payload.l}}"+body+"{{end}}").Render(payload, nil, 100)
		var re *RenderError
		want := fmt.Sprintf("error calling %s: json, trunc, printing and comparisons would compute more than %d bytes", fn, MaxComputedBytes)
		if !errors.As(err, &re) || !strings.Contains(re.Reason, want) {
			t.Errorf("12 %s of long strings in a range: %v; want %q", fn, err, want)
		}
	}
}

// index counts the keys it looks up yet means what text/template's
// built-in means: the same expression over the same data finds the same
// value, or fails for the same reason.
func TestRenderIndexMatchesTheBuiltin(t *testing.T) {
	payload := decode(t, `{"s":"abc","n":1.5,"null":null,"list":[1,[2,3]],"obj":{"a":{"b":1}},"none":[]}`).(map[string]any)
	payload["num"] = json.Number("1")
	data := map[string]any{"payload": payload, "headers": promptHeaders(header("X-Github-Event", "issues"))}
	items := []string{"$", ".payload", ".payload.list", ".payload.none", ".payload.s", ".payload.obj",
		".headers", ".payload.null", ".payload.missing", ".payload.n", "(index .payload.s 0)"}
	keys := []string{`"s"`, `"a"`, `"missing"`, `"X-Github-Event"`, "0", "1", "2", "3", "-1",
		"(index .payload.s 0)", "1.0", ".payload.null", ".payload.missing", ".payload.num", "true", ".payload.list"}
	var exprs []string
	for _, item := range items {
		exprs = append(exprs, fmt.Sprintf("{{index %s}}", item))
		for _, key := range keys {
			exprs = append(exprs, fmt.Sprintf("{{index %s %s}}", item, key))
		}
	}
	exprs = append(exprs, `{{index .payload "obj" "a" "b"}}`, `{{index .payload "list" 1 0}}`, `{{index $ "payload" "s" 2}}`,
		`{{index .payload "null" "a"}}`, `{{index .payload "missing" 0}}`, `{{index .payload.s 0 0}}`, `{{1 | index .payload.list}}`)
	ours := (&renderFuncs{}).index
	for _, expr := range exprs {
		expr = "{{keep (" + strings.TrimSuffix(strings.TrimPrefix(expr, "{{"), "}}") + ")}}"
		oursValue, oursCause := indexWith(t, expr, data, ours)
		builtinValue, builtinCause := indexWith(t, expr, data, nil)
		if oursValue != builtinValue || oursCause != builtinCause {
			t.Errorf("%s: %s, %q; the built-in: %s, %q", expr, oursValue, oursCause, builtinValue, builtinCause)
		}
	}
}

// indexWith runs expr, which keeps a value, with index as the template's
// index (nil: the built-in) and returns the value kept, with its type, and
// why the run failed.
func indexWith(t *testing.T, expr string, data any, index any) (kept, cause string) {
	t.Helper()
	funcs := template.FuncMap{"keep": func(v reflect.Value) string {
		kept = fmt.Sprintf("%#v", v)
		if v.IsValid() {
			kept += " of type " + v.Type().String()
		}
		return ""
	}}
	if index != nil {
		funcs["index"] = index
	}
	err := template.Must(template.New("x").Funcs(funcs).Option("missingkey=zero").Parse(expr)).Execute(io.Discard, data)
	return kept, comparisonCause(err)
}

// What usual templates compare, over a long list, stays far within the
// bound.
func TestRenderComparesShortValuesFreely(t *testing.T) {
	labels := make([]any, 9_000)
	for i := range labels {
		labels[i] = map[string]any{"name": []string{"bug", "p1", "docs"}[i%3], "n": float64(i)}
	}
	tmpl := mustParse(t, `{{range .payload.labels}}{{if and (eq .name "bug" "p1") (ne .name "p1") (lt .n 9e9) (le .n 9e9) (gt .n -1.0) (ge .n 0.0)}}b{{end}}{{end}}`)
	got, err := tmpl.Render(map[string]any{"labels": labels}, nil, 1<<20)
	if want := strings.Repeat("b", 3_000); err != nil || got != want {
		t.Errorf("Render = %d bytes, %v; want %d", len(got), err, len(want))
	}
}
