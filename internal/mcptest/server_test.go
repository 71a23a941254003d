package mcptest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// TestServerAsProcess starts the test binary as the server, the way a CLI
// would, and speaks to it.
func TestServerAsProcess(t *testing.T) {
	srv, err := Server("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(srv.Command, srv.Args...)
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"reverse_text","arguments":{"text":"hello mcp"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"show_token","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"server/discover"}`,
		`not json`,
	}, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 6 {
		t.Fatalf("got %d answers, want 6:\n%s", len(lines), out)
	}
	if v := lines[0]["result"].(map[string]any)["protocolVersion"]; v != "2025-11-25" {
		t.Errorf("initialize echoed %v", v)
	}
	if s := string(out); !strings.Contains(s, `"reversed:pcm olleh"`) || !strings.Contains(s, `"token:s3cret"`) {
		t.Errorf("tool results missing:\n%s", out)
	}
	if e := lines[4]["error"].(map[string]any)["code"]; e != float64(-32601) {
		t.Errorf("unknown method answered %v", lines[4])
	}
	if e := lines[5]["error"].(map[string]any)["code"]; e != float64(-32700) {
		t.Errorf("bad line answered %v", lines[5])
	}
}

func TestMainReturnsWhenNotServing(t *testing.T) {
	t.Setenv(ServeEnv, "")
	Main() // must return
	if Reversed("ab") != "reversed:ba" {
		t.Fatal(Reversed("ab"))
	}
}
