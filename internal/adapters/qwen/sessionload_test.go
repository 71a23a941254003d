package qwen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// loadWithin bounds one wait for an event of a real-CLI session, against
// a hang only: a loaded machine starts the CLI slowly.
const loadWithin = 3 * time.Minute

// realSession is one real `qwen --acp` run driven through the adapter's
// Session.
type realSession struct {
	*acptest.Driver
	srv  *chat.Server
	home string
}

// startRealSession runs qwen --acp for spec in dir with home (prepared
// here, then given to restore) against a mock playing sc.
func startRealSession(t *testing.T, dir string, spec runs.Spec, sc chat.Scenario, restore func(home string)) *realSession {
	t.Helper()
	bin := agenttest.Bin(t, "qwen")
	srv, err := chat.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if err := New().PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	if restore != nil {
		restore(home)
	}
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	gateway := map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": testKey, "OPENAI_MODEL": chat.DefaultModel}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	sess, ok := a.NewDecoder(inv).(runs.Session)
	if !ok {
		t.Fatal("the decoder is no runs.Session")
	}
	s := &realSession{Driver: acptest.Start(t, bin, cmd.Args, env, dir, sess), srv: srv, home: home}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr …%s", joinLines(s.Stdout()), tailOf(s.Stderr(), 2000))
		}
	})
	return s
}

// close ends the session and waits for the CLI to exit.
func (s *realSession) close(t *testing.T) runs.Outcome {
	t.Helper()
	_ = s.Do(func(x runs.Session) error { x.Close(); return nil })
	o := s.Wait(loadWithin)
	if e := s.Exit(); e.Code != 0 || e.Signal != "" {
		t.Errorf("exit %+v after Close", e)
	}
	for _, ev := range s.Events() {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
	}
	return o
}

// TestSessionLoadResumesKeptSession is a hibernation as the supervisor
// does it: a turn in one process, the session's files (SessionFiles,
// nothing else) kept and restored into a fresh home, and a new process
// resuming the session with session/load, whose model request holds
// what the first turn said.
//
// The resuming run is interactive (a hibernated run woken) or one-shot,
// a session of one turn that loads the session as well.
func TestSessionLoadResumesKeptSession(t *testing.T) {
	t.Parallel()
	for name, interactive := range map[string]bool{"interactive": true, "one_shot": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resumeKeptSession(t, interactive)
		})
	}
}

func resumeKeptSession(t *testing.T, interactive bool) {
	token := "KEPT-" + uuid.NewString()[:8]
	dir := t.TempDir()
	first := startRealSession(t, dir, runs.Spec{Prompt: "Say a token.", Interactive: true}, chat.Turns(token), nil)
	if turn, _ := first.WaitTurn(1, loadWithin); turn.Status != runs.Succeeded || turn.Result != token {
		t.Fatalf("turn 1: %+v (%v)", turn, turn.Error)
	}
	o := first.close(t)
	if o.SessionID == "" {
		t.Fatal("no session id")
	}
	files, err := New().SessionFiles(runs.HostFiles{}, first.home, dir, o.SessionID)
	if err != nil || len(files) == 0 {
		t.Fatalf("SessionFiles = %v, %v", files, err)
	}

	second := startRealSession(t, dir, runs.Spec{Prompt: "What was the token?", Interactive: interactive, ResumeSessionID: o.SessionID},
		chat.Turns("Resumed."), func(home string) {
			copyFiles(t, first.home, home, files)
			// As a hibernated run's home, the first is gone: nothing
			// may be read from it by an absolute path.
			if err := os.RemoveAll(first.home); err != nil {
				t.Fatal(err)
			}
		})
	turn, _ := second.WaitTurn(1, loadWithin)
	if turn.Status != runs.Succeeded || turn.Result != "Resumed." {
		t.Fatalf("resumed turn: %+v (%v)", turn, turn.Error)
	}
	// The second process's server billed only the resumed turn: the
	// earlier turns' usage must not be counted again.
	if own := normalized(second.srv.Ledger().Billed()); turn.Usage != own || own.IsZero() {
		t.Errorf("resumed turn's usage %+v, billed for it %+v", turn.Usage, own)
	}
	t.Logf("replayed while loading: %v", replayed(t, second.Stdout()))
	if !second.srv.Ledger().Seen(token) {
		t.Errorf("the resumed session's model request lacks turn 1's %s", token)
	}
	if !second.srv.Ledger().Seen("What was the token?") {
		t.Error("the resumed turn's prompt never reached the model")
	}
	for _, ev := range second.Events() {
		if ev.Type == runs.EventSessionStarted && ev.Data.(runs.SessionStartedData).SessionID != o.SessionID {
			t.Errorf("session.started %+v, want session %s", ev.Data, o.SessionID)
		}
		if m, ok := ev.Data.(runs.MessageData); ok && strings.Contains(m.Text, token) {
			t.Errorf("the replayed history became an event: %s %+v", ev.Type, m)
		}
	}
	if got := acptest.Of(second.Events(), runs.EventSessionStarted); len(got) != 1 {
		t.Errorf("%d session.started events", len(got))
	}
	if resumed := second.close(t); resumed.SessionID != o.SessionID || resumed.NumTurns != 1 {
		t.Errorf("resumed outcome %+v", resumed)
	}
}

// copyFiles copies the files named relative to home from into to, as a
// hibernated run's home is restored.
func copyFiles(t *testing.T, from, to string, files []string) {
	t.Helper()
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(from, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("session file %s: %d bytes", rel, len(b))
	}
}

// replayed lists the session/update kinds the CLI sent before it
// answered session/load (the client's request id 2).
func replayed(t *testing.T, stdout [][]byte) []string {
	t.Helper()
	var kinds []string
	for _, l := range stdout {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l, &m) != nil {
			continue
		}
		if string(m.ID) == "2" && m.Method == "" {
			return kinds
		}
		if m.Method == "session/update" {
			kinds = append(kinds, m.Params.Update.SessionUpdate)
		}
	}
	t.Error("no answer to session/load")
	return kinds
}

func joinLines(ls [][]byte) string {
	var b strings.Builder
	for _, l := range ls {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func tailOf(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
