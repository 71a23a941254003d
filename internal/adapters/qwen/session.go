package qwen

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// Qwen Code's own JSON-RPC methods beyond ACP that 0.24.4 uses with every
// client.
const (
	// methodDrainQueue is the request the CLI sends after each tool
	// call's result, before its next model request, for messages the
	// user queued meanwhile: it adds them to that request, inside the
	// running turn. It waits 2 s for the answer, and after an error
	// answer stops asking for the rest of the session.
	methodDrainQueue = "craft/drainMidTurnQueue"
	// methodModeNotice is a notification of the mode session/set_mode
	// set; the set_mode answer says as much.
	methodModeNotice = "qwen/notify/session/mode-update"
	// methodPermission is ACP's permission request.
	methodPermission = "session/request_permission"
	// projectRuleOption is the permission option that allows the command
	// from now on by a rule the CLI writes into the run's directory
	// (.qwen/settings.json there): a file in the user's workspace. The
	// other allow_always option, proceed_always_user, writes the rule
	// into the run's home, which the gateway owns.
	projectRuleOption = "proceed_always_project"
)

// maxSteered bounds the messages waiting for the next tool boundary.
const maxSteered = runs.MaxQueuedMessages

// session is the ACP client of a run: acp.Decoder, with Qwen Code's
// mid-turn queue as the way to steer. A steered message waits in the
// adapter until the CLI asks for queued messages (methodDrainQueue), at
// the next tool boundary of the running turn, and goes to the model in
// that turn's next request. A message still waiting when the turn ends
// never reached the model: a warning says so.
type session struct {
	*acp.Decoder
	inv runs.Invocation

	mu      sync.Mutex
	steered []string     // waiting for the next drain
	out     bytes.Buffer // the adapter's own answers, written first
}

var _ runs.Session = (*session)(nil)

// newSession returns the ACP client of the run inv.
func newSession(inv runs.Invocation) *session {
	return &session{Decoder: acp.NewDecoder(inv, sessionProfile(inv, newTally())), inv: inv}
}

// line is what the wrapper reads of a line from the CLI.
type line struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// drainAnswer is the answer to methodDrainQueue: the messages queued since
// the last drain, each non-empty; hasQueuedPrompt false says no further
// prompt waits for the end of the turn.
type drainAnswer struct {
	Messages        []string `json:"messages"`
	HasQueuedPrompt bool     `json:"hasQueuedPrompt"`
}

// Decode implements runs.Decoder.
func (s *session) Decode(raw []byte) []runs.Event {
	var l line
	if json.Unmarshal(raw, &l) == nil {
		switch {
		case l.Method == methodModeNotice && len(l.ID) == 0:
			return nil
		case l.Method == methodDrainQueue && len(l.ID) > 0:
			s.drain(l.ID)
			return nil
		case l.Method == methodPermission && len(l.ID) > 0:
			raw = withoutOption(raw, projectRuleOption)
		case l.Method == "" && bytes.Contains(raw, []byte(`"currentModelId":"$runtime|`)):
			raw = withPlainModel(raw)
		case l.Method == "session/update" && bytes.Contains(raw, []byte(`"shell_result"`)):
			raw = withShellOutput(raw)
		}
	}
	evs := s.Decoder.Decode(raw)
	for _, ev := range evs {
		if ev.Type == runs.EventTurnCompleted {
			return append(s.undelivered(), evs...)
		}
	}
	return evs
}

// drain answers the CLI's request for queued messages with the steered
// ones.
func (s *session) drain(id json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := s.steered
	s.steered = nil
	if msgs == nil {
		msgs = []string{}
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  drainAnswer     `json:"result"`
	}{"2.0", id, drainAnswer{Messages: msgs}})
	if err != nil {
		return // a RawMessage from a line that parsed always marshals
	}
	s.out.Write(append(b, '\n'))
}

// undelivered reports the steered messages a turn ended without.
func (s *session) undelivered() []runs.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steered) == 0 {
		return nil
	}
	n := len(s.steered)
	s.steered = nil
	return []runs.Event{runs.Warning("steer_undelivered",
		"the turn ended before its next tool call: "+plural(n, "steered message")+" did not reach the model; send it again")}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Send implements runs.Session. A steered message (the supervisor sends
// one only during a turn) waits for the CLI's next drain; every other
// message is a session/prompt, the core's.
func (s *session) Send(text string, images []runs.Image, steer bool) error {
	if !steer {
		if err := checkImages(s.inv, len(images)); err != nil {
			return err
		}
		return s.Decoder.Send(text, images, false)
	}
	if len(images) > 0 {
		return runs.Unsupported(Name, runs.FieldAttachments, "a steered message cannot carry images; queue it instead")
	}
	if text == "" {
		return runs.Invalid("text", "a steered message must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steered) >= maxSteered {
		return runs.Conflict(runs.ConflictQueueFull, strconv.Itoa(maxSteered)+" steered messages already wait for the next tool call")
	}
	s.steered = append(s.steered, text)
	return nil
}

// Pending implements runs.Conversation: the adapter's answers first, then
// the core's.
func (s *session) Pending() ([]byte, bool) {
	out, done := s.Decoder.Pending()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out.Len() > 0 {
		out = append(bytes.Clone(s.out.Bytes()), out...)
		s.out.Reset()
	}
	return out, done
}

// withoutOption returns the permission request raw without the option
// optionID, or raw as it is when it cannot be read or lacks that option.
func withoutOption(raw []byte, optionID string) []byte {
	var req map[string]json.RawMessage
	var params map[string]json.RawMessage
	var opts []map[string]json.RawMessage
	if json.Unmarshal(raw, &req) != nil || json.Unmarshal(req["params"], &params) != nil ||
		json.Unmarshal(params["options"], &opts) != nil {
		return raw
	}
	kept := opts[:0:0]
	for _, o := range opts {
		var id string
		if json.Unmarshal(o["optionId"], &id) == nil && id == optionID {
			continue
		}
		kept = append(kept, o)
	}
	if len(kept) == len(opts) {
		return raw
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return raw
	}
	params["options"] = b
	if req["params"], err = json.Marshal(params); err != nil {
		return raw
	}
	out, err := json.Marshal(req)
	if err != nil {
		return raw
	}
	return out
}

// runtimeModelID is how 0.24.4 names the model of a session in
// session/new's models.currentModelId: "$runtime|openai|mock-model(openai)",
// the auth type, the model, and the auth type again.
var runtimeModelID = regexp.MustCompile(`^\$runtime\|[^|]+\|(.+)\([^()]*\)$`)

// withPlainModel returns the session/new answer raw with its
// currentModelId reduced to the model's own name, as a run names it.
func withPlainModel(raw []byte) []byte {
	var resp map[string]json.RawMessage
	var result map[string]json.RawMessage
	var models map[string]json.RawMessage
	var id string
	if json.Unmarshal(raw, &resp) != nil || json.Unmarshal(resp["result"], &result) != nil ||
		json.Unmarshal(result["models"], &models) != nil || json.Unmarshal(models["currentModelId"], &id) != nil {
		return raw
	}
	m := runtimeModelID.FindStringSubmatch(id)
	if m == nil {
		return raw
	}
	var err error
	if models["currentModelId"], err = json.Marshal(m[1]); err != nil {
		return raw
	}
	if result["models"], err = json.Marshal(models); err != nil {
		return raw
	}
	if resp["result"], err = json.Marshal(result); err != nil {
		return raw
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return raw
	}
	return out
}

// shellResult is the rawOutput of a finished shell tool call in 0.24.4.
type shellResult struct {
	Type     string  `json:"type"`
	Output   *string `json:"output"`
	ExitCode *int    `json:"exitCode"`
}

// withShellOutput returns the tool_call_update raw with its content
// replaced by the command's own output, from rawOutput: 0.24.4's content
// is the text the model gets, the output framed by "Command: …",
// "Directory: …", "Output: " and the exit code, signal and process
// group, so that no line of the output starts a line there. A non-zero
// exit code follows the output. Any other line is returned as it is.
func withShellOutput(raw []byte) []byte {
	var msg, params, update map[string]json.RawMessage
	if json.Unmarshal(raw, &msg) != nil || json.Unmarshal(msg["params"], &params) != nil ||
		json.Unmarshal(params["update"], &update) != nil {
		return raw
	}
	var res shellResult
	if json.Unmarshal(update["rawOutput"], &res) != nil || res.Type != "shell_result" || res.Output == nil {
		return raw
	}
	text := *res.Output
	if res.ExitCode != nil && *res.ExitCode != 0 {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "exit code " + strconv.Itoa(*res.ExitCode)
	}
	content, err := json.Marshal([]map[string]any{{"type": "content", "content": map[string]string{"type": "text", "text": text}}})
	if err != nil {
		return raw
	}
	update["content"] = content
	if params["update"], err = json.Marshal(update); err != nil {
		return raw
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return raw
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return raw
	}
	return out
}
