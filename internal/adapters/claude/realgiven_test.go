package claude

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// The real-CLI tests of what a run is given: its MCP servers (the test
// binary serves as the mcptest server) and its images.

// reverseInput is what the mock has reverse_text called with.
const reverseInput = `{"text":"hello mcp"}`

// givenRun is one one-shot run of the real CLI, decoded.
type givenRun struct {
	inv     runs.Invocation
	events  []runs.Event
	outcome runs.Outcome
	ledger  anthropic.Ledger
	// tmp is the run's TMPDIR, which the supervisor gives every run.
	tmp    string
	stdout [][]byte
	stderr string
}

// runGiven runs the real CLI once with the adapter's Command for spec and
// images, against a mock playing sc, as the supervisor would: its own
// HOME, directory and TMPDIR.
func runGiven(t *testing.T, sc anthropic.Scenario, spec runs.Spec, images []runs.Image) *givenRun {
	t.Helper()
	r := runGivenAny(t, sc, spec, images)
	if r.outcome.Status != runs.Succeeded {
		for _, l := range r.stdout[max(len(r.stdout)-3, 0):] {
			t.Logf("stdout ends with: %s", tail(string(l), 400))
		}
		t.Fatalf("run %s: %+v (stderr %q)", r.outcome.Status, r.outcome.Error, tail(r.stderr, 300))
	}
	return r
}

// runGivenAny is runGiven for a run that may fail.
func runGivenAny(t *testing.T, sc anthropic.Scenario, spec runs.Spec, images []runs.Image) *givenRun {
	t.Helper()
	bin := agenttest.ClaudeBin(t)
	srv, err := anthropic.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	home, dir, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: VerifiedVersion, Images: images}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	env = append(env, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY="+testKey, "TMPDIR="+tmp)
	p := agenttest.Start(t, bin, cmd.Args, env, dir, cmd.Stdin)
	deadline := time.AfterFunc(runDeadline, p.Kill)
	defer deadline.Stop()
	res := p.Wait()
	r := &givenRun{inv: inv, ledger: srv.Ledger(), tmp: tmp, stdout: res.Stdout, stderr: string(res.Stderr)}
	dec := a.NewDecoder(inv)
	for _, l := range res.Stdout {
		r.events = append(r.events, dec.Decode(l)...)
	}
	r.outcome = dec.Finish(res.Exit, res.Stderr)
	r.events = append(r.events, r.outcome.Events...)
	for _, ev := range r.events {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed line: %+v", ev.Data)
		}
	}
	return r
}

// demoServer is the mcptest server as the run's "demo".
func demoServer(t *testing.T, token string) map[string]runs.MCPServer {
	t.Helper()
	m, err := mcptest.Server(token)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]runs.MCPServer{mcptest.Name: m}
}

// wantMCPCall checks the events of a run whose model called tool of the
// demo server: tool_call.started names the server and the tool, and
// tool_call.completed holds output.
func wantMCPCall(t *testing.T, evs []runs.Event, tool, output string) {
	t.Helper()
	var id string
	for _, ev := range evs {
		if ev.Type == runs.EventToolCallStarted {
			d := ev.Data.(runs.ToolCallStartedData)
			if d.Name != anthropic.MCPToolName(mcptest.Name, tool) || d.MCPServer != mcptest.Name || d.MCPTool != tool {
				t.Errorf("tool_call.started = %+v, want %s of server %s", d, tool, mcptest.Name)
			}
			id = d.ID
		}
	}
	if id == "" {
		t.Fatalf("no tool_call.started: %v", collapse(evs))
	}
	for _, ev := range evs {
		if ev.Type == runs.EventToolCallCompleted {
			d := ev.Data.(runs.ToolCallCompletedData)
			if d.ID != id || d.IsError || !strings.Contains(d.Output, output) {
				t.Errorf("tool_call.completed = %+v, want %q from %s", d, output, id)
			}
			return
		}
	}
	t.Errorf("no tool_call.completed: %v", collapse(evs))
}

// TestRealCLIMCPTool gives a one-shot run the mcptest server as "demo" at
// every permission level, without approvals: the model's call of
// mcp__demo__reverse_text runs unasked, and its result is in the events.
func TestRealCLIMCPTool(t *testing.T) {
	for _, perm := range []runs.Permission{runs.WorkspaceWrite, runs.ReadOnly, runs.Full} {
		t.Run(string(perm), func(t *testing.T) {
			t.Parallel()
			r := runGiven(t, anthropic.MCPCall(mcptest.Name, "reverse_text", json.RawMessage(reverseInput), "The tool answered."),
				runs.Spec{Prompt: "Reverse hello mcp.", Permission: perm, MCPServers: demoServer(t, "unused")}, nil)
			wantMCPCall(t, r.events, "reverse_text", mcptest.Reversed("hello mcp"))
			if r.outcome.Result != "The tool answered." {
				t.Errorf("result = %q", r.outcome.Result)
			}
			// The usage is reported as the model streams it, before the
			// turn's result: usage.updated comes before the tool's
			// result, so that a budget can stop the run mid-turn.
			firstUsage, toolEnd := -1, -1
			for i, ev := range r.events {
				if ev.Type == runs.EventUsageUpdated && firstUsage < 0 {
					firstUsage = i
				}
				if ev.Type == runs.EventToolCallCompleted && toolEnd < 0 {
					toolEnd = i
				}
			}
			if firstUsage < 0 || firstUsage > toolEnd {
				t.Errorf("first usage.updated at %d, tool_call.completed at %d: the usage came only at the end", firstUsage, toolEnd)
			}
			checkUsageUpdates(t, r.events, r.outcome)
			if billed := fromAnthropic(r.ledger.Billed()); r.outcome.Usage != billed {
				t.Errorf("usage = %+v, billed %+v", r.outcome.Usage, billed)
			}
			// The tool is deferred: not offered in the request's tools,
			// but called directly all the same.
			if reqs := r.ledger.Messages(); len(reqs) != 2 || reqs[0].Request.HasTool("mcp__demo__reverse_text") {
				t.Errorf("requests = %d, the first offers %v", len(reqs), reqs[0].Request.Tools)
			}
		})
	}
}

// TestRealCLIImage attaches a PNG to a one-shot run's prompt: the model
// gets its bytes as an image block of the first user message, and the
// CLI's copy of the image lands under the run's own TMPDIR.
func TestRealCLIImage(t *testing.T) {
	t.Parallel()
	r := runGiven(t, anthropic.TextAnswer("A red square."), runs.Spec{Prompt: "What is in this image?"},
		[]runs.Image{{Path: "/nonexistent/1.png", MediaType: "image/png", Data: tinyPNG}})
	b64 := base64.StdEncoding.EncodeToString(tinyPNG)
	if !r.ledger.Messages().ImageSeen(b64) {
		t.Fatal("the model never got the image")
	}
	req := r.ledger.Messages()[0].Request
	if imgs := req.Images(); len(imgs) != 1 || imgs[0].MediaType != "image/png" {
		t.Errorf("images = %+v", imgs)
	}
	if !strings.Contains(req.UserText(), "What is in this image?") {
		t.Errorf("the prompt is not in the request: %q", tail(req.UserText(), 200))
	}
	// The CLI names the copy it keeps in a text block:
	// [Image: source: $TMPDIR/claude-<uid>/<cwd with / as ->/<session>/images/1.png]
	copyDir := filepath.Join(r.tmp, "claude-"+strconv.Itoa(os.Getuid()))
	var copied string
	_ = filepath.Walk(copyDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".png") {
			copied = p
		}
		return nil
	})
	if copied == "" {
		t.Fatalf("no copy of the image under the run's TMPDIR %s", copyDir)
	}
	if b, err := os.ReadFile(copied); err != nil || string(b) != string(tinyPNG) {
		t.Errorf("the copy %s differs from the image (%v)", copied, err)
	}
	if !strings.Contains(req.UserText(), copied) {
		t.Errorf("the request does not name the copy %s", copied)
	}
	// Nothing of the run's went to the shared temporary directory.
	shared := filepath.Join(os.TempDir(), "claude-"+strconv.Itoa(os.Getuid()), strings.ReplaceAll(r.inv.Dir, "/", "-"))
	if _, err := os.Stat(shared); err == nil {
		t.Errorf("the CLI wrote %s outside the run's TMPDIR", shared)
	}
}

// TestSessionMCPAsk asks for the MCP tool's call with approvals: ask; it
// runs once allowed.
func TestSessionMCPAsk(t *testing.T) {
	t.Parallel()
	spec := askSpec("Reverse hello mcp.")
	spec.MCPServers = demoServer(t, "unused")
	d := startSession(t, anthropic.MCPCall(mcptest.Name, "reverse_text", json.RawMessage(reverseInput), "The tool answered."), spec)
	a := d.approval()
	if a.Tool != "mcp__demo__reverse_text" || a.MCPServer != mcptest.Name || !strings.Contains(string(a.Input), "hello mcp") || a.ToolCallID == "" {
		t.Errorf("approval = %+v", a)
	}
	if err := d.answer(a.ID, runs.Allow, ""); err != nil {
		t.Fatal(err)
	}
	turn := d.turn()
	if turn.Status != runs.Succeeded || turn.Result != "The tool answered." {
		t.Errorf("turn = %+v", turn)
	}
	o := d.close()
	if o.Status != runs.Succeeded {
		t.Errorf("outcome %+v", o)
	}
	wantMCPCall(t, d.events, "reverse_text", mcptest.Reversed("hello mcp"))
}

// TestSessionMCPReadOnlyAsk: read_only with approvals ask asks nothing
// (dontAsk), so the MCP tool's call is refused without a question, like
// every call the level does not allow.
func TestSessionMCPReadOnlyAsk(t *testing.T) {
	t.Parallel()
	spec := askSpec("Reverse hello mcp.")
	spec.Permission, spec.MCPServers = runs.ReadOnly, demoServer(t, "unused")
	d := startSession(t, anthropic.MCPCall(mcptest.Name, "reverse_text", json.RawMessage(reverseInput), "Refused."), spec)
	if turn := d.turn(); turn.Status != runs.Succeeded {
		t.Errorf("turn = %+v", turn)
	}
	d.close()
	if n := d.count(runs.EventApprovalRequested); n != 0 {
		t.Errorf("%d approvals asked", n)
	}
	for _, ev := range d.events {
		if ev.Type == runs.EventToolCallCompleted {
			if c := ev.Data.(runs.ToolCallCompletedData); !c.IsError || strings.Contains(c.Output, "reversed:") {
				t.Errorf("tool_call.completed = %+v, want the refusal", c)
			}
		}
	}
}

// TestRealCLISchemaMismatch: with output_schema the CLI offers its
// StructuredOutput tool and validates the model's input against the
// schema; a model that gives up after the CLI refused it ends in a
// "success" without structured_output, which is a schema_mismatch with
// the CLI's own reason.
func TestRealCLISchemaMismatch(t *testing.T) {
	t.Parallel()
	const schema = `{"type":"object","properties":{"city":{"type":"string"},"visits":{"type":"integer"}},"required":["city","visits"]}`
	r := runGivenAny(t, anthropic.StructuredMismatch(map[string]string{"city": "Paris"}, 2),
		runs.Spec{Prompt: "Where did you go?", OutputSchema: json.RawMessage(schema)}, nil)
	o := r.outcome
	if o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.SchemaMismatch || !strings.Contains(o.Error.Message, "visits") {
		t.Fatalf("outcome %s, error %+v; want schema_mismatch naming visits", o.Status, o.Error)
	}
	if len(o.StructuredOutput) != 0 {
		t.Errorf("structured output %s", o.StructuredOutput)
	}
	refused := 0
	for _, ev := range r.events {
		if ev.Type == runs.EventToolCallCompleted && ev.Data.(runs.ToolCallCompletedData).IsError {
			refused++
		}
	}
	if refused < 2 {
		t.Errorf("%d refused StructuredOutput calls, want 2", refused)
	}
}
