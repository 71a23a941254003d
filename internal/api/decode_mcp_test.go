package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestDecodeMCPServers(t *testing.T) {
	got, err := decodeMCPServers(json.RawMessage(`{
		"demo": {"command": "/usr/bin/mcp", "args": ["--stdio", ""], "env": {"TOKEN": "s3cret", "_X1": ""}},
		"web-1": {"url": "https://mcp.example.com/v1", "headers": {"Authorization": "Bearer t"}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := got["demo"]; d.Command != "/usr/bin/mcp" || len(d.Args) != 2 || d.Env["TOKEN"] != "s3cret" || d.Remote() {
		t.Errorf("demo = %+v", d)
	}
	if w := got["web-1"]; w.URL != "https://mcp.example.com/v1" || w.Headers["Authorization"] != "Bearer t" || !w.Remote() {
		t.Errorf("web-1 = %+v", w)
	}
	if got, err := decodeMCPServers(nil); got != nil || err != nil {
		t.Errorf("absent: %v %v", got, err)
	}

	many := `{` + strings.Repeat(`"a": {"command": "x"},`, 0)
	for i := range maxMCPServers + 1 {
		many += `"s` + string(rune('a'+i)) + `": {"command": "x"},`
	}
	many = strings.TrimSuffix(many, ",") + `}`
	for _, c := range []struct{ raw, says string }{
		{`[]`, "must be an object"},
		{`"x"`, "must be an object"},
		{`{"bad name": {"command": "x"}}`, "not allowed"},
		{`{"` + strings.Repeat("n", 65) + `": {"command": "x"}}`, "not allowed"},
		{`{"a": {"command": "x"}, "a": {"command": "y"}}`, "more than once"},
		{`{"a": {}}`, "needs a command"},
		{`{"a": {"command": "x", "url": "https://h/"}}`, "both"},
		{`{"a": {"command": "x", "cwd": "/"}}`, "unknown member"},
		{`{"a": {"command": "x", "command": "y"}}`, "more than once"},
		{`{"a": {"command": 1}}`, "must be a string"},
		{`{"a": {"command": ""}}`, "must not be empty"},
		{`{"a": {"command": "-x"}}`, "must not begin"},
		{`{"a": {"command": "x\ny"}}`, "line breaks"},
		{`{"a": {"command": "x", "args": "y"}}`, "array of strings"},
		{`{"a": {"command": "x", "args": [` + strings.TrimSuffix(strings.Repeat(`"a",`, maxMCPArgs+1), ",") + `]}}`, "the limit"},
		{`{"a": {"command": "x", "env": {"1X": "v"}}}`, "not a variable name"},
		{`{"a": {"command": "x", "env": {"X": 1}}}`, "must be a string"},
		{`{"a": {"command": "x", "env": {"X": "a\u0000b"}}}`, "without NUL"},
		{`{"a": {"command": "x", "env": {"X": "v", "X": "w"}}}`, "more than once"},
		{`{"a": {"command": "x", "headers": {"H": "v"}}}`, "headers belong"},
		{`{"a": {"url": "https://h/", "env": {"X": "v"}}}`, "belong to a stdio"},
		{`{"a": {"url": "ftp://h/"}}`, "http or https"},
		{`{"a": {"url": "https://u:p@h/"}}`, "user or password"},
		{`{"a": {"url": "https://h/", "headers": {"Bad Header": "v"}}}`, "not a header name"},
		{`{"a": {"url": "https://h/", "headers": {"H": "v\r\nX: y"}}}`, "line breaks"},
		{many, "the limit"},
	} {
		_, err := decodeMCPServers(json.RawMessage(c.raw))
		var edge *edgeError
		if !errors.As(err, &edge) || edge.code != CodeInvalidField || edge.field != runs.FieldMCPServers || !strings.Contains(edge.msg, c.says) {
			t.Errorf("%s: %v, want invalid_field mcp_servers saying %q", c.raw, err, c.says)
		}
	}
	// A secret is never quoted back.
	_, err = decodeMCPServers(json.RawMessage(`{"a": {"command": "x", "env": {"X": "hunter2-secret\n"}}}`))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error quotes the value: %v", err)
	}
}

func FuzzDecodeMCPServers(f *testing.F) {
	for _, s := range []string{
		`{"demo": {"command": "/bin/x", "args": ["a"], "env": {"K": "v"}}}`,
		`{"w": {"url": "https://h:1/p", "headers": {"A": "b"}}}`,
		`{}`, `null`, `[]`, `{"a": {}}`, `{"a": {"command": "x", "env": {"K": "\u0000"}}}`, `{"a":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeMCPServers(json.RawMessage(b))
		if err != nil {
			var edge *edgeError
			if !errors.As(err, &edge) || edge.status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if len(got) > maxMCPServers {
			t.Fatalf("%d servers", len(got))
		}
		for name, m := range got {
			if !mcpServerName.MatchString(name) || (m.Command == "") == (m.URL == "") {
				t.Fatalf("accepted %q: %+v", name, m)
			}
		}
	})
}

func TestMCPPolicyErrorsAre400s(t *testing.T) {
	s := &server{}
	for _, code := range []string{runs.CodeMCPCommandNotAllowed, runs.CodeMCPURLNotAllowed} {
		err := fmt.Errorf("submit: %w", &runs.FieldError{Field: runs.FieldMCPServers, Kind: runs.ErrInvalid, Code: code,
			Reason: `server "x": the command "/bin/sh" is not allowed`})
		p := s.problem(err)
		if p.status != 400 || p.detail.Code != code || p.detail.Field != runs.FieldMCPServers || !strings.Contains(p.detail.Message, "/bin/sh") {
			t.Errorf("%s: %+v", code, p)
		}
	}
}

// TestDecodeMCPServerErrors holds the exact answer to each way one server
// can be wrong, and which fault wins when a server has several.
func TestDecodeMCPServerErrors(t *testing.T) {
	long := strings.Repeat("x", maxMCPCommandLen+1)
	cases := []struct{ server, msg string }{
		{`[]`, "must be an object with command (and args, env) or url (and headers)"},
		{`{"cwd": "/", "command": 1}`, `unknown member "cwd"; a server has command, args, env, url, headers`},
		{`{"url": 1, "url": 2}`, `member "url" appears more than once`},
		{`{"command": 1, "url": 2}`, "command must be a string"},
		{`{"command": "` + long + `"}`, "command must be at most 4096 bytes"},
		{`{"command": "x\u0000"}`, "command must be UTF-8 without NUL or line breaks"},
		{`{"command": "x", "url": ""}`, "url must not be empty"},
		{`{"url": null, "command": null}`, "needs a command (a stdio server) or a url (a remote one)"},
		{`{"command": "x", "url": "https://h/"}`, "has both command and url; give one"},
		{`{"command": "-x", "headers": {"H": "v"}, "args": 1}`, "headers belong to a remote server (url), not a command"},
		{`{"command": "-x", "args": 1}`, "command must not begin with '-'"},
		{`{"command": "x", "args": [1], "env": 1}`, "args must be an array of strings"},
		{`{"command": "x", "args": [` + strings.TrimSuffix(strings.Repeat(`"a",`, maxMCPArgs+1), ",") + `]}`, "has 65 args; the limit is 64"},
		{`{"command": "x", "args": ["", "a\u0000"]}`, "args[1] must be UTF-8 without NUL or line breaks"},
		{`{"command": "x", "env": []}`, "env must be an object of strings"},
		{`{"command": "x", "env": {"1X": "v"}}`, `env has "1X", which is not a variable name`},
		{`{"command": "x", "env": {"X": "v", "X": "w"}}`, `env has "X" more than once`},
		{`{"command": "x", "env": {"X": 1}}`, `env "X" must be a string`},
		{`{"command": "x", "env": {"X": "a\nb"}}`, `env "X" must be at most 8192 bytes of UTF-8 without NUL or line breaks`},
		{`{"url": "ftp://h/", "args": [], "headers": 1}`, "args and env belong to a stdio server (command), not a url"},
		{`{"url": "ftp://h/", "env": {}}`, "args and env belong to a stdio server (command), not a url"},
		{`{"url": "https:///p"}`, "url must be an http or https URL"},
		{`{"url": "https://u@h/", "headers": 1}`, "url must not carry a user or password; send credentials in headers"},
		{`{"url": "https://h/", "headers": {"Bad Header": "v"}}`, `headers has "Bad Header", which is not a header name`},
	}
	for _, c := range cases {
		_, err := decodeMCPServers(json.RawMessage(`{"a": ` + c.server + `}`))
		var e *edgeError
		if !errors.As(err, &e) {
			t.Errorf("%.80s: error %v, want an edge error", c.server, err)
			continue
		}
		want := `field "mcp_servers": server "a": ` + c.msg
		if e.status != 400 || e.code != CodeInvalidField || e.field != runs.FieldMCPServers || e.msg != want {
			t.Errorf("%.80s: %d %s %s %q, want 400 invalid_field mcp_servers %q", c.server, e.status, e.code, e.field, e.msg, want)
		}
	}
}
