package acpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		name   string
		line   string
		kind   kind
		code   int
		wantID string
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, kindRequest, 0, "1"},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"x"}`, kindRequest, 0, `"a"`},
		{"notification", `{"jsonrpc":"2.0","method":"session/cancel","params":{}}`, kindNotification, 0, ""},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{"outcome":{}}}`, kindResponse, 0, "3"},
		{"error response", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no"}}`, kindResponse, 0, "3"},
		{"not json", `{"jsonrpc":`, 0, CodeParseError, ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, 0, CodeInvalidRequest, ""},
		{"a number", `42`, 0, CodeInvalidRequest, ""},
		{"wrong version", `{"jsonrpc":"1.0","id":7,"method":"x"}`, 0, CodeInvalidRequest, "7"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"x"}`, 0, CodeInvalidRequest, ""},
		{"null id request", `{"jsonrpc":"2.0","id":null,"method":"x"}`, 0, CodeInvalidRequest, ""},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"x","result":1}`, 0, CodeInvalidRequest, "1"},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}`, 0, CodeInvalidRequest, "1"},
		{"nothing", `{"jsonrpc":"2.0"}`, 0, CodeInvalidRequest, ""},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, 0, CodeInvalidRequest, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, k, id, err := parseLine([]byte(c.line))
			if c.code != 0 {
				if err == nil || err.Code != c.code {
					t.Fatalf("error %v, want code %d", err, c.code)
				}
			} else if err != nil || k != c.kind {
				t.Fatalf("kind %d error %v, want kind %d", k, err, c.kind)
			}
			if string(id) != c.wantID {
				t.Fatalf("id %s, want %q", id, c.wantID)
			}
		})
	}
}

// wire is an editor's end of a Conn: it writes lines and reads the
// answers one at a time.
type wire struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Reader
}

func (w *wire) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.t.Fatal(err)
	}
}

// next reads the next line the Conn wrote, decoded.
func (w *wire) next() map[string]any {
	w.t.Helper()
	line, err := w.out.ReadBytes('\n')
	if err != nil {
		w.t.Fatalf("read the connection's output: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		w.t.Fatalf("the connection wrote %q: %v", line, err)
	}
	return m
}

// startConn serves a Conn with setup's handlers; the returned function
// closes its input and waits for Serve.
func startConn(t *testing.T, maxLine int, setup func(c *Conn)) (*wire, func() error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewConn(inR, outW, func(string, ...any) {})
	if maxLine > 0 {
		c.maxLine = maxLine
	}
	setup(c)
	done := make(chan error, 1)
	go func() {
		done <- c.Serve(context.Background())
		outW.Close()
	}()
	stop := func() error {
		inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("Serve did not return at the end of its input")
			return nil
		}
	}
	return &wire{t: t, in: inW, out: bufio.NewReader(outR)}, stop
}

func errorCode(t *testing.T, m map[string]any) float64 {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error in %v", m)
	}
	return e["code"].(float64)
}

func TestConnAnswersBadLinesAndGoesOn(t *testing.T) {
	w, stop := startConn(t, 256, func(c *Conn) {
		c.Handle("echo", func(_ context.Context, p json.RawMessage) (any, error) { return p, nil })
		c.Handle("fail", func(context.Context, json.RawMessage) (any, error) {
			return nil, &Error{Code: CodeGatewayError, Message: "refused", Data: map[string]string{"code": "queue_full"}}
		})
	})
	w.send(`not json`)
	if m := w.next(); errorCode(t, m) != CodeParseError || m["id"] != nil {
		t.Fatalf("not JSON answered %v", m)
	}
	w.send(`[1,2]`)
	if m := w.next(); errorCode(t, m) != CodeInvalidRequest {
		t.Fatalf("a batch answered %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":"x","method":"session/load","params":{}}`)
	if m := w.next(); errorCode(t, m) != CodeMethodNotFound || m["id"] != "x" {
		t.Fatalf("an unknown method answered %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"s":"` + strings.Repeat("a", 300) + `"}}`)
	if m := w.next(); errorCode(t, m) != CodeInvalidRequest || m["id"] != nil {
		t.Fatalf("a line over the bound answered %v", m)
	}
	w.send(`{"jsonrpc":"2.0","method":"unknown/notification"}`) // no answer
	w.send(`{"jsonrpc":"2.0","id":2,"method":"fail"}`)
	m := w.next()
	if errorCode(t, m) != CodeGatewayError || m["id"] != float64(2) {
		t.Fatalf("a handler's error answered %v", m)
	}
	if data := m["error"].(map[string]any)["data"].(map[string]any); data["code"] != "queue_full" {
		t.Fatalf("the error's data = %v", data)
	}
	w.send(`{"jsonrpc":"2.0","id":3,"method":"echo","params":{"s":"b"}}`)
	if m := w.next(); m["id"] != float64(3) || m["result"].(map[string]any)["s"] != "b" {
		t.Fatalf("after the bad lines, echo answered %v", m)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve at the end of input: %v", err)
	}
}

func TestCallGetsTheEditorsAnswer(t *testing.T) {
	got := make(chan string, 1)
	w, stop := startConn(t, 0, func(c *Conn) {
		c.Handle("ask", func(ctx context.Context, _ json.RawMessage) (any, error) {
			res, err := c.Call(ctx, "session/request_permission", map[string]string{"q": "may I?"})
			if err != nil {
				got <- "error: " + err.Error()
				return nil, err
			}
			got <- string(res)
			return "asked", nil
		})
	})
	w.send(`{"jsonrpc":"2.0","id":1,"method":"ask"}`)
	req := w.next()
	if req["method"] != "session/request_permission" || req["id"] == nil {
		t.Fatalf("the editor got %v", req)
	}
	id, _ := json.Marshal(req["id"])
	w.send(`{"jsonrpc":"2.0","id":99,"result":{}}`) // an answer to nothing is dropped
	w.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
	if s := <-got; s != `{"outcome":{"outcome":"cancelled"}}` {
		t.Fatalf("Call returned %s", s)
	}
	if m := w.next(); m["result"] != "asked" {
		t.Fatalf("ask answered %v", m)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestCallFailsWhenTheEditorGoes(t *testing.T) {
	got := make(chan error, 1)
	w, stop := startConn(t, 0, func(c *Conn) {
		c.Handle("ask", func(ctx context.Context, _ json.RawMessage) (any, error) {
			_, err := c.Call(context.WithoutCancel(ctx), "session/request_permission", nil)
			got <- err
			return nil, err
		})
	})
	w.send(`{"jsonrpc":"2.0","id":1,"method":"ask"}`)
	w.next() // the request, never answered
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != errConnClosed {
		t.Fatalf("Call after the end = %v, want errConnClosed", err)
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"agentgate-1"}}`,
		`{"jsonrpc":"2.0","id":"7","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}`,
		`[]`, `null`, `{}`, `{"id":{}}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, k, id, err := parseLine(line)
		if err != nil {
			if err.Code != CodeParseError && err.Code != CodeInvalidRequest {
				t.Fatalf("error code %d", err.Code)
			}
			if id != nil && !json.Valid(id) {
				t.Fatalf("an answer's id %q is not JSON", id)
			}
			return
		}
		switch k {
		case kindRequest:
			if m.Method == "" || len(id) == 0 {
				t.Fatalf("a request without a method or id: %+v", m)
			}
		case kindNotification:
			if m.Method == "" || id != nil {
				t.Fatalf("a notification %+v with id %s", m, id)
			}
		case kindResponse:
			if m.Method != "" || len(id) == 0 {
				t.Fatalf("a response %+v with id %s", m, id)
			}
		default:
			t.Fatalf("no kind and no error for %q", line)
		}
		// The answer to it must encode.
		if _, err := json.Marshal(struct {
			ID json.RawMessage `json:"id"`
		}{id}); err != nil && id != nil {
			t.Fatalf("id %q does not encode: %v", id, err)
		}
	})
}
