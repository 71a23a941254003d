package acpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// The JSON-RPC 2.0 error codes the bridge answers with.
const (
	CodeParseError     = -32700 // the line is not JSON
	CodeInvalidRequest = -32600 // JSON, but no request, notification or response
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeGatewayError is a request the gateway refused, or a turn that
	// failed: the error's data carries the gateway's own code.
	CodeGatewayError = -32000
)

// MaxLineBytes bounds one line read from the editor. A prompt with images
// travels as base64 in one line; the gateway takes at most 8 images of a
// few MiB each, so a line larger than this could not become a run anyway.
const MaxLineBytes = 48 << 20

// Error is a JSON-RPC error object: what a handler returns to answer a
// request with an error, and what a call of the editor's returns when the
// editor answered with one.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// message is one line of the wire, decoded as far as dispatch needs.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// The kinds of a well-formed message.
type kind int

const (
	kindRequest kind = iota + 1
	kindNotification
	kindResponse
)

// parseLine reads one line of the wire. It returns the message and its
// kind, or an *Error with the code to answer it with (-32700 for a line
// that is not JSON, -32600 for JSON that is no message) and the message's
// id when it had a usable one (else nil: the answer's id is null).
func parseLine(line []byte) (message, kind, json.RawMessage, *Error) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return message{}, 0, nil, &Error{Code: CodeParseError, Message: "parse error: the line is not JSON"}
	}
	if len(line) == 0 || line[0] != '{' {
		// A batch, or any other value: ACP sends one object a line.
		return message{}, 0, nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: want one JSON-RPC object a line (no batches)"}
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, 0, nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: " + err.Error()}
	}
	id := m.ID
	if !validID(id) {
		return message{}, 0, nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: id must be a string, a number or null"}
	}
	if isNull(id) {
		id = nil
	}
	if m.JSONRPC != "2.0" {
		return message{}, 0, id, &Error{Code: CodeInvalidRequest, Message: `invalid request: jsonrpc must be "2.0"`}
	}
	switch {
	case m.Method != "" && (m.Result != nil || m.Error != nil):
		return message{}, 0, id, &Error{Code: CodeInvalidRequest, Message: "invalid request: a method with a result or an error"}
	case m.Method != "" && m.ID == nil:
		return m, kindNotification, nil, nil
	case m.Method != "":
		if id == nil {
			return message{}, 0, nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: a request's id must not be null"}
		}
		return m, kindRequest, id, nil
	case id != nil && (m.Result != nil) != (m.Error != nil):
		return m, kindResponse, id, nil
	}
	return message{}, 0, id, &Error{Code: CodeInvalidRequest, Message: "invalid request: neither a request, a notification nor a response"}
}

// validID: absent, null, a string or a number.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || isNull(id) {
		return true
	}
	switch id[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// Handler answers one request: its result, or an error (an *Error is sent
// as it is; any other becomes -32603 with its text).
type Handler func(ctx context.Context, params json.RawMessage) (any, error)

// NotificationHandler takes one notification.
type NotificationHandler func(ctx context.Context, params json.RawMessage)

// Conn is one JSON-RPC 2.0 connection over newline-delimited JSON: it
// reads requests, notifications and responses from r and writes its
// answers, notifications and requests to w, one object a line.
// Requests are answered each in a goroutine of its own, so that a
// request that waits (a prompt until its turn ends) lets the connection
// go on reading; notifications are taken in order, on the reading
// goroutine.
type Conn struct {
	r   io.Reader
	w   io.Writer
	log func(format string, args ...any)
	// maxLine bounds a line: MaxLineBytes, smaller in tests.
	maxLine int

	requests      map[string]Handler
	notifications map[string]NotificationHandler

	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	waiting map[string]chan message // our calls, by the id's JSON
	closed  bool

	handlers sync.WaitGroup
}

// NewConn returns a connection over r and w. log receives what goes
// wrong on the wire (never on w, which is the protocol's).
func NewConn(r io.Reader, w io.Writer, log func(format string, args ...any)) *Conn {
	return &Conn{
		r: r, w: w, log: log, maxLine: MaxLineBytes,
		requests:      map[string]Handler{},
		notifications: map[string]NotificationHandler{},
		waiting:       map[string]chan message{},
	}
}

// Handle registers the handler of a request method; call before Serve.
func (c *Conn) Handle(method string, h Handler) { c.requests[method] = h }

// HandleNotification registers the handler of a notification; call
// before Serve.
func (c *Conn) HandleNotification(method string, h NotificationHandler) { c.notifications[method] = h }

// errLineTooLong is a line larger than MaxLineBytes.
var errLineTooLong = errors.New("line too long")

// Serve reads the connection until r ends or ctx ends, and returns once
// every request handler has returned; ctx, cancelled when Serve returns,
// is the one the handlers get. It returns nil at the end of r, and the
// read error otherwise. Calls still waiting for the editor's answer
// then fail.
func (c *Conn) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.handlers.Wait()
	}()
	defer c.failCalls()
	rd := bufio.NewReaderSize(c.r, 64<<10)
	for {
		line, err := readLine(rd, c.maxLine)
		if errors.Is(err, errLineTooLong) {
			c.log("acp: a line longer than %d bytes was dropped", c.maxLine)
			c.answerError(nil, &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("invalid request: a line longer than %d bytes", c.maxLine)})
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(ctx, line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// readLine returns the next line without its end; a last line without
// one comes with io.EOF. A line longer than max is read to its end and
// dropped (errLineTooLong), so that the next one is read whole.
func readLine(rd *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := rd.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// dispatch takes one line.
func (c *Conn) dispatch(ctx context.Context, line []byte) {
	m, k, id, perr := parseLine(line)
	if perr != nil {
		c.answerError(id, perr)
		return
	}
	switch k {
	case kindResponse:
		c.deliverResponse(m)
	case kindNotification:
		if h, ok := c.notifications[m.Method]; ok {
			h(ctx, m.Params)
		}
		// An unknown notification is ignored, as JSON-RPC has it: it
		// has no answer to carry an error.
	case kindRequest:
		h, ok := c.requests[m.Method]
		if !ok {
			c.answerError(id, &Error{Code: CodeMethodNotFound, Message: "method not found: " + m.Method})
			return
		}
		c.handlers.Add(1)
		go func() {
			defer c.handlers.Done()
			res, err := h(ctx, m.Params)
			if err != nil {
				var re *Error
				if !errors.As(err, &re) {
					re = &Error{Code: CodeInternalError, Message: err.Error()}
				}
				c.answerError(id, re)
				return
			}
			c.answer(id, res)
		}()
	}
}

func (c *Conn) answer(id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		c.answerError(id, &Error{Code: CodeInternalError, Message: "encode the result: " + err.Error()})
		return
	}
	c.write(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, b})
}

func (c *Conn) answerError(id json.RawMessage, e *Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	c.write(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *Error          `json:"error"`
	}{"2.0", id, e})
}

// write sends one object as one line.
func (c *Conn) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.log("acp: encode a message: %v", err)
		return
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.log("acp: write: %v", err)
	}
}

// Notify sends a notification to the editor.
func (c *Conn) Notify(method string, params any) {
	c.write(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
}

// errConnClosed is a call whose answer cannot come: the connection ended.
var errConnClosed = errors.New("the editor's connection ended")

// Call sends a request to the editor and waits for its answer: the
// result, an *Error the editor answered with, the context's error (the
// editor is then sent $/cancel_request), or errConnClosed once the
// connection has ended.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errConnClosed
	}
	c.nextID++
	id := json.RawMessage(strconv.FormatInt(c.nextID, 10))
	ch := make(chan message, 1)
	c.waiting[string(id)] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, string(id))
		c.mu.Unlock()
	}()
	c.write(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params"`
	}{"2.0", id, method, params})
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errConnClosed
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		// Tell the editor the question is moot, so that it can take
		// its dialog down (ACP's $/cancel_request).
		c.Notify("$/cancel_request", map[string]json.RawMessage{"requestId": id})
		return nil, ctx.Err()
	}
}

// deliverResponse hands an answer to the call waiting for it.
func (c *Conn) deliverResponse(m message) {
	c.mu.Lock()
	ch, ok := c.waiting[string(bytes.TrimSpace(m.ID))]
	delete(c.waiting, string(bytes.TrimSpace(m.ID)))
	c.mu.Unlock()
	if !ok {
		c.log("acp: an answer to no request of ours (id %s)", m.ID)
		return
	}
	ch <- m
}

// failCalls ends every call still waiting: no answer will come.
func (c *Conn) failCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, ch := range c.waiting {
		close(ch)
		delete(c.waiting, id)
	}
}
