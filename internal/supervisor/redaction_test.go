package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
)

// leakAdapter runs a shell script as its agent: the script prints the
// credentials it was given everywhere a CLI could (its JSON output, a
// line that is not JSON, two halves of one streamed message, stderr).
type leakAdapter struct{}

// leakedToken is a fixed credential of the adapter's command, with
// characters that JSON escapes.
const leakedToken = `tok/en"with\quote-0123456789`

func (leakAdapter) Name() string { return "leak" }
func (leakAdapter) Describe() runs.Description {
	return runs.Description{Name: "leak", DefaultBin: "/bin/sh", VerifiedVersion: "1.0.0", VersionArgs: []string{"-c", "echo 1.0.0"},
		CredentialEnv: []string{"LEAK_KEY"}}
}
func (leakAdapter) ParseVersion(b []byte) (string, error) { return strings.TrimSpace(string(b)), nil }
func (leakAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	script := `
half=$(printf %s "$LEAK_KEY" | cut -c1-12)
rest=$(printf %s "$LEAK_KEY" | cut -c13-)
printf '{"text":"my key is %s"}\n' "$LEAK_KEY"
printf '{"tool":"printenv: %s %s %s"}\n' "$LEAK_KEY" "$LEAK_AUTH_TOKEN" "$LEAK_MODE"
printf '{"delta":"the key: %s"}\n' "$half"
printf '{"delta":"%s, said twice"}\n' "$rest"
printf '{"text":"done"}\n'
echo "starting with $LEAK_KEY" >&2
echo "fatal: invalid api key $LEAK_KEY" >&2
exit ` + inv.Spec.Prompt
	return runs.Command{
		Args:    []string{"-c", script},
		Env:     []string{"LEAK_AUTH_TOKEN=" + leakedToken, "LEAK_MODE=plain-value-not-secret"},
		PassEnv: []string{"LEAK_KEY"},
	}, nil
}
func (leakAdapter) NewDecoder(runs.Invocation) runs.Decoder { return &leakDecoder{} }

type leakDecoder struct{ last string }

func (d *leakDecoder) Decode(line []byte) []runs.Event {
	var v struct {
		Text   *string `json:"text"`
		Delta  *string `json:"delta"`
		Output *string `json:"output"`
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Text == nil && v.Delta == nil && v.Output == nil {
		return []runs.Event{runs.NewEvent(runs.EventAgentUnparsed, runs.UnparsedData{Line: string(line), Bytes: len(line), Reason: "not leak json"})}
	}
	if v.Output != nil {
		return []runs.Event{runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "t1", Output: *v.Output})}
	}
	if v.Delta != nil {
		return []runs.Event{runs.NewEvent(runs.EventMessageDelta, runs.MessageData{MessageID: "m1", Text: *v.Delta})}
	}
	if d.last == "" {
		d.last = *v.Text
	}
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: "m0", Text: *v.Text})}
}

func (d *leakDecoder) Finish(exit runs.Exit, tail []byte) runs.Outcome {
	if exit.Code != 0 {
		return runs.Outcome{Status: runs.Failed, Error: runs.NewRunError(runs.NotAuthenticated, fmt.Sprintf("exit %d: %s", exit.Code, lastLine(tail)),
			"the key was "+strings.Fields(string(tail))[2])}
	}
	return runs.Outcome{Status: runs.Succeeded, Result: d.last}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestCredentialsNeverStored(t *testing.T) {
	for _, exit := range []string{"3", "0"} {
		t.Run("exit="+exit, func(t *testing.T) { testCredentialsNeverStored(t, exit) })
	}
}

func testCredentialsNeverStored(t *testing.T, exit string) {
	key := "leak-" + randomHex(t, 16) // no built-in pattern knows it: the literal finds it
	base, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	store := newMemStore()
	cfg := Config{
		WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 300 * time.Millisecond, StoreRetry: 500 * time.Millisecond,
		Getenv: func(name string) string {
			if name == "LEAK_KEY" {
				return key
			}
			return ""
		},
		Redact: base,
	}
	agent := &Agent{Adapter: leakAdapter{}, Bin: "/bin/sh", Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zap.New(core))
	startSupervisor(t, sup)
	r, err := sup.Submit(context.Background(), runs.Spec{Agent: "leak", Prompt: exit})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{sup: sup, store: store}
	done := h.wait(t, r.ID, 30*time.Second)
	// The record is terminal before run.completed is stored: read the
	// events once the last is there.
	h.waitFor(t, r.ID, runs.EventRunCompleted, "")

	secrets := []string{key, leakedToken, key[:12], `tok\/en`, `tok/en`}
	leaks := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q: %s", where, s, text)
			}
		}
	}
	var all, deltas strings.Builder
	for _, e := range store.eventsOf(r.ID) {
		leaks(fmt.Sprintf("event %d (%s)", e.Seq, e.Type), string(e.JSON))
		if !json.Valid(e.JSON) {
			t.Errorf("event %d is not JSON: %s", e.Seq, e.JSON)
		}
		all.Write(e.JSON)
		if e.Type == runs.EventMessageDelta {
			var ev struct{ Data runs.MessageData }
			if err := json.Unmarshal(e.JSON, &ev); err != nil {
				t.Fatal(err)
			}
			deltas.WriteString(ev.Data.Text)
		}
	}
	if n := strings.Count(all.String(), redact.Mark); n < 5 {
		t.Errorf("%d marks in the events, want at least 5: %s", n, all.String())
	}
	if want := "the key: " + redact.Mark + ", said twice"; deltas.String() != want {
		t.Errorf("the deltas say %q, want %q", deltas.String(), want)
	}
	if !strings.Contains(all.String(), "plain-value-not-secret") {
		t.Error("a variable that is not a credential was redacted")
	}
	rec, err := json.Marshal(done)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the run record", string(rec))
	leaks("the run record's spec", done.Spec.Prompt)
	switch exit {
	case "3":
		if done.Status != runs.Failed || done.Error == nil {
			t.Fatalf("run = %+v", done)
		}
		if want := "exit 3: fatal: invalid api key " + redact.Mark; done.Error.Message != want {
			t.Errorf("error.message %q, want %q", done.Error.Message, want)
		}
		if want := "the key was " + redact.Mark; done.Error.Hint != want {
			t.Errorf("error.hint %q, want %q", done.Error.Hint, want)
		}
	case "0":
		if done.Status != runs.Succeeded || done.Result != "my key is "+redact.Mark {
			t.Errorf("run = %+v", done)
		}
	}
	var logged strings.Builder
	for _, e := range logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		fmt.Fprintf(&logged, "%s %s %s\n", e.Level, e.Message, b)
		if e.Level >= zapcore.InfoLevel && strings.Contains(e.Message+string(b), "fatal:") {
			t.Errorf("the agent's stderr is logged at %s: %s %s", e.Level, e.Message, b)
		}
	}
	leaks("the log", logged.String())
	if !strings.Contains(logged.String(), "fatal: invalid api key "+redact.Mark) {
		t.Errorf("the debug log has no redacted stderr:\n%s", logged.String())
	}
}

// shapeLeakAdapter is leakAdapter with a script that prints credentials
// the run was not given, which only the built-in patterns know: an AWS
// secret access key in a tool's output and in two streamed deltas.
type shapeLeakAdapter struct{ leakAdapter }

// awsSecret is the secret access key of AWS's documentation.
const awsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

func (shapeLeakAdapter) Name() string { return "shapeleak" }
func (a shapeLeakAdapter) Describe() runs.Description {
	d := a.leakAdapter.Describe()
	d.Name = "shapeleak"
	return d
}
func (shapeLeakAdapter) Command(runs.Invocation) (runs.Command, error) {
	script := `
printf '{"output":"[default]\\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\\naws_secret_access_key = %s\\n"}\n' "$1"
printf '{"output":"AccessKeyId,SecretAccessKey\\nAKIAIOSFODNN7EXAMPLE,%s\\n"}\n' "$1"
printf '{"delta":"export AWS_SECRET_ACCESS_KEY=%s"}\n' "$(printf %s "$1" | cut -c1-9)"
printf '{"delta":"%s; done"}\n' "$(printf %s "$1" | cut -c10-)"
printf '{"text":"ok"}\n'`
	return runs.Command{Args: []string{"-c", script, "sh", awsSecret}}, nil
}

// TestBuiltinShapesNeverStored: an AWS secret access key that a tool
// prints, which no credential of the run names, is not in the run's
// stored events, whole or split across deltas.
func TestBuiltinShapesNeverStored(t *testing.T) {
	base, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := newMemStore()
	cfg := Config{WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 300 * time.Millisecond,
		StoreRetry: 500 * time.Millisecond, Getenv: func(string) string { return "" }, Redact: base}
	agent := &Agent{Adapter: shapeLeakAdapter{}, Bin: "/bin/sh", Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zap.NewNop())
	startSupervisor(t, sup)
	r, err := sup.Submit(context.Background(), runs.Spec{Agent: "shapeleak", Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{sup: sup, store: store}
	if done := h.wait(t, r.ID, 30*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("run = %+v", done)
	}
	h.waitFor(t, r.ID, runs.EventRunCompleted, "")
	var outputs []string
	var deltas strings.Builder
	for _, e := range store.eventsOf(r.ID) {
		if strings.Contains(string(e.JSON), awsSecret[:9]) || strings.Contains(string(e.JSON), awsSecret[9:]) {
			t.Errorf("event %d (%s) holds the secret: %s", e.Seq, e.Type, e.JSON)
		}
		var ev struct {
			Data struct{ Output, Text string }
		}
		if err := json.Unmarshal(e.JSON, &ev); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case runs.EventToolCallCompleted:
			outputs = append(outputs, ev.Data.Output)
		case runs.EventMessageDelta:
			deltas.WriteString(ev.Data.Text)
		}
	}
	want := []string{
		"[default]\naws_access_key_id = " + redact.Mark + "\naws_secret_access_key = " + redact.Mark + "\n",
		"AccessKeyId,SecretAccessKey\n" + redact.Mark + "," + redact.Mark + "\n",
	}
	if fmt.Sprint(outputs) != fmt.Sprint(want) {
		t.Errorf("tool outputs %q, want %q", outputs, want)
	}
	if want := "export AWS_SECRET_ACCESS_KEY=" + redact.Mark + "; done"; deltas.String() != want {
		t.Errorf("the deltas say %q, want %q", deltas.String(), want)
	}
}
