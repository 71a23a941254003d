package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/runs"
)

const (
	openAPIPath      = "../../openapi.yaml"
	eventsSchemaPath = "../../events.schema.json"
)

// loadOpenAPI returns openapi.yaml as JSON-shaped values.
func loadOpenAPI(t testing.TB) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	// Round-trip through JSON so numbers and maps have the shapes the
	// schema compiler expects.
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("openapi.yaml is not JSON-compatible: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatal("openapi.yaml is not a mapping")
	}
	return m
}

var (
	openAPIOnce    sync.Once
	openAPISchemas map[string]*jsonschema.Schema
	openAPIErr     error
)

// validateOpenAPI fails the test unless body validates against the named
// schema of openapi.yaml's components, so that the document describes
// what the handlers really send.
func validateOpenAPI(t testing.TB, name string, body []byte) {
	t.Helper()
	openAPIOnce.Do(func() {
		openAPISchemas, openAPIErr = compileOpenAPI(t)
	})
	if openAPIErr != nil {
		t.Fatalf("compile openapi.yaml schemas: %v", openAPIErr)
	}
	sch, ok := openAPISchemas[name]
	if !ok {
		t.Fatalf("openapi.yaml has no schema %q", name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("body does not match openapi.yaml %s: %v\nbody: %s", name, err, body)
	}
}

func compileOpenAPI(t testing.TB) (map[string]*jsonschema.Schema, error) {
	doc := loadOpenAPI(t)
	ev := loadEventsSchemaDoc(t)
	apiPath, _ := filepath.Abs(openAPIPath)
	evPath, _ := filepath.Abs(eventsSchemaPath)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(apiPath, doc); err != nil {
		return nil, err
	}
	if err := c.AddResource(evPath, ev); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name := range comps {
		sch, err := c.Compile(apiPath + "#/components/schemas/" + name)
		if err != nil {
			return nil, err
		}
		out[name] = sch
	}
	// The NDJSON stream's lines, by reference to events.schema.json.
	sch, err := c.Compile(apiPath + "#/paths/~1v1~1runs~1{id}~1events/get/responses/200/content/application~1x-ndjson/schema")
	if err != nil {
		return nil, err
	}
	out["ndjson-line"] = sch
	return out, nil
}

// TestOpenAPIRoutes fails when the router and openapi.yaml disagree about
// the routes, in either direction.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	var spec []string
	for path, item := range doc["paths"].(map[string]any) {
		for key := range item.(map[string]any) {
			switch key {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				spec = append(spec, strings.ToUpper(key)+" "+path)
			}
		}
	}
	var routes []string
	h := New(Config{}, &fakeService{}, nil, nil, nil)
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		// chi's catch-all is the spec's {path} parameter.
		routes = append(routes, method+" "+strings.Replace(route, "/*", "/{path}", 1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(spec)
	sort.Strings(routes)
	if len(routes) < 9 {
		t.Fatalf("walked only %d routes: %v", len(routes), routes)
	}
	for _, r := range routes {
		if !slices.Contains(spec, r) {
			t.Errorf("route %s is served but not in openapi.yaml", r)
		}
	}
	for _, s := range spec {
		if !slices.Contains(routes, s) {
			t.Errorf("openapi.yaml documents %s, which is not served", s)
		}
	}
}

func schemaAt(t *testing.T, doc map[string]any, name string) map[string]any {
	t.Helper()
	s, ok := doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("openapi.yaml has no schema %s", name)
	}
	return s
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFields returns the JSON names of t's fields, and those without
// omitempty, which are therefore always present.
func jsonFields(t reflect.Type) (all, required []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	sort.Strings(all)
	sort.Strings(required)
	return all, required
}

// TestOpenAPIMatchesGo fails when a schema of openapi.yaml and the Go type
// it documents disagree: field names, required fields, enums.
func TestOpenAPIMatchesGo(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, typ := range map[string]reflect.Type{
		"Run":       reflect.TypeFor[runs.Run](),
		"Usage":     reflect.TypeFor[runs.Usage](),
		"RunError":  reflect.TypeFor[runs.RunError](),
		"Exit":      reflect.TypeFor[runs.Exit](),
		"AgentInfo": reflect.TypeFor[runs.AgentInfo](),
		"RunList":   reflect.TypeFor[runList](),
	} {
		s := schemaAt(t, doc, name)
		all, required := jsonFields(typ)
		if got := keys(s["properties"].(map[string]any)); !slices.Equal(got, all) {
			t.Errorf("%s properties = %v, Go has %v", name, got, all)
		}
		if got := strs(s["required"]); !slices.Equal(got, required) {
			t.Errorf("%s required = %v, Go always sends %v", name, got, required)
		}
	}

	req := schemaAt(t, doc, "RunRequest")
	if req["additionalProperties"] != false {
		t.Error("RunRequest must have additionalProperties: false")
	}
	want := slices.Clone(requestFields)
	sort.Strings(want)
	if got := keys(req["properties"].(map[string]any)); !slices.Equal(got, want) {
		t.Errorf("RunRequest properties = %v, the decoder knows %v", got, want)
	}
	if got := strs(req["required"]); !slices.Equal(got, []string{"agent", "prompt"}) {
		t.Errorf("RunRequest required = %v", got)
	}

	enum := func(s map[string]any) []string { return strs(s["enum"]) }
	var states, classes []string
	for _, st := range runs.States {
		states = append(states, string(st))
	}
	for _, c := range runs.Classes {
		classes = append(classes, string(c))
	}
	sort.Strings(states)
	sort.Strings(classes)
	if got := enum(schemaAt(t, doc, "Status")); !slices.Equal(got, states) {
		t.Errorf("Status enum = %v, runs.States = %v", got, states)
	}
	runErr := schemaAt(t, doc, "RunError")["properties"].(map[string]any)
	if got := enum(runErr["class"].(map[string]any)); !slices.Equal(got, classes) {
		t.Errorf("RunError.class enum = %v, runs.Classes = %v", got, classes)
	}
	props := req["properties"].(map[string]any)
	if got, want := enum(props["permission"].(map[string]any)), []string{"full", "read_only", "workspace_write"}; !slices.Equal(got, want) {
		t.Errorf("permission enum = %v", got)
	}
	if got := enum(props["effort"].(map[string]any)); !slices.Equal(got, []string{"high", "low", "medium"}) {
		t.Errorf("effort enum = %v", got)
	}
	compat := []string{runs.CompatMissing, runs.CompatNewer, runs.CompatOlder, runs.CompatUnrecognized, runs.CompatUnverified, runs.CompatVerified}
	agent := schemaAt(t, doc, "AgentInfo")["properties"].(map[string]any)
	if got := enum(agent["compatibility"].(map[string]any)); !slices.Equal(got, compat) {
		t.Errorf("AgentInfo.compatibility enum = %v, want %v", got, compat)
	}

	codes := slices.Clone(allCodes)
	sort.Strings(codes)
	if got := enum(schemaAt(t, doc, "ErrorCode")); !slices.Equal(got, codes) {
		t.Errorf("ErrorCode enum = %v, the API has %v", got, codes)
	}
	desc := schemaAt(t, doc, "ErrorCode")["description"].(string)
	for _, c := range codes {
		if !strings.Contains(desc, "`"+c+"`") {
			t.Errorf("ErrorCode description does not explain %s", c)
		}
	}
}

// allCodes is every error code the API sends.
var allCodes = []string{
	CodeInvalidJSON, CodeUnknownField, CodeInvalidField, CodeUnsupportedOption, CodeUnknownAgent,
	CodeAgentNotInstalled, CodeNotFound, CodeMethodNotAllowed, CodeBodyTooLarge,
	CodeUnsupportedMediaType, CodeQueueFull, CodeShuttingDown, CodeNotReady, CodeInternal,
	CodeOwnerUnavailable, CodeApprovalResolved, CodeNotInteractive, CodeRunEnded, CodeNoTurnRunning,
	CodeMessageQueueFull, CodeSessionClosing, CodeRunNotStarted, CodeIdempotencyMismatch, CodeInvalidHeader, CodeDiskFull,
	CodeRunNotFinished, CodeUnauthenticated, CodeInvalidAuthorization, CodeInvalidToken, CodeForbidden,
	CodeOriginNotAllowed, CodeHostNotAllowed, CodeInvalidQuery, CodeBodyTimeout, CodeRequestTimeout, CodeRateLimited,
	CodeTooManyRunning, CodeTooManyQueued, CodeTooManyOpen, CodeDailyBudgetExceeded, CodeTooManyStreams,
	runs.ConflictHibernated, CodeInvalidAttachment, CodeAttachmentFileNotFound, CodeFileTooLarge, CodeTooManyFiles, CodeNotAnArchive,
	runs.CodeMCPCommandNotAllowed, runs.CodeMCPURLNotAllowed,
	runs.CodeWebhooksDisabled, runs.CodeWebhookURLRefused,
	CodeInvalidPath, CodeWorkspaceExpired, CodeWorkspaceOnOtherReplica, CodeArchiveTooLarge,
	CodeNoGitWorkspace, CodeSessionBusy, CodeTooManySchedules, CodeTooManyTriggers, CodeInvalidPayload, CodeDeliveryInProgress,
	gitrepo.CodeGitURLRefused, gitrepo.CodeUnknownCredential, gitrepo.CodeCredentialNotForURL,
	// Written by the listener (internal/netguard) before any request is
	// read, or for one the HTTP server cannot parse, in the same shape.
	"too_many_connections", "bad_request", "headers_too_large", "expectation_failed", "not_implemented",
	"http_version_not_supported",
}

// TestOpenAPIRejects shows the response schemas are not vacuous: they
// refuse bodies that break them.
func TestOpenAPIRejects(t *testing.T) {
	openAPIOnce.Do(func() { openAPISchemas, openAPIErr = compileOpenAPI(t) })
	if openAPIErr != nil {
		t.Fatal(openAPIErr)
	}
	for _, c := range []struct{ schema, body string }{
		{"Error", `{"error":{"code":"nope","message":"x"}}`},
		{"Error", `{"error":{"code":"internal"}}`},
		{"Run", `{"id":"x","agent":"claude","status":"running","created_at":"2025-05-01T12:00:00Z"}`},
		{"Run", `{"id":"x","agent":"claude","status":"paused","created_at":"2025-05-01T12:00:00Z","usage":{"input_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"output_tokens":0,"reasoning_tokens":0}}`},
		{"RunRequest", `{"agent":"claude","prompt":"x","max_turn":3}`},
		{"RunRequest", `{"agent":"claude"}`},
		{"ndjson-line", `{"v":1}`},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if openAPISchemas[c.schema].Validate(v) == nil {
			t.Errorf("%s accepted %s", c.schema, c.body)
		}
	}
}

// TestOpenAPINoSchemaDefaults: no schema of the spec carries `default`; a
// default is written in the description instead. openapi-typescript 7,
// the generator most TypeScript clients use, makes a property with a
// default required (its defaultNonNullable, on by default), also in
// request bodies, so a client would have to send every optional field of
// RunRequest (cmd/gateway's TestGeneratedClientDrivesARun generates one).
// Parameters are exempt: generators leave those optional.
func TestOpenAPINoSchemaDefaults(t *testing.T) {
	doc := loadOpenAPI(t)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if k == "default" && !strings.HasSuffix(path, "/properties") {
					t.Errorf("%s has a default (%v): say it in the description", path, child)
				}
				walk(path+"/"+k, child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s/%d", path, i), child)
			}
		}
	}
	components := doc["components"].(map[string]any)
	walk("#/components/schemas", components["schemas"])
	for p, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if m, ok := op.(map[string]any); ok {
				walk("#/paths/"+p+"/"+method+"/requestBody", m["requestBody"])
			}
		}
	}
}
