package runs

// Remote reports whether the server is reached by URL rather than started.
func (m MCPServer) Remote() bool { return m.URL != "" }

// The codes of an MCP server the operator's allow-lists refuse, in the
// FieldError's Code.
const (
	CodeMCPCommandNotAllowed = "mcp_command_not_allowed"
	CodeMCPURLNotAllowed     = "mcp_url_not_allowed"
)

// MCPServer is one MCP server a run is given: a stdio server the agent
// starts (Command, Args, Env), or a remote one it connects to (URL,
// Headers). Exactly one of Command and URL is set.
//
// Env and Headers often hold credentials. They are never encoded with the
// spec: the supervisor seals them into Sealed when the run is submitted and
// opens them on the replica that executes the run, so that the stored
// record and the queue hold only ciphertext.
type MCPServer struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"-"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"-"`
	// EnvNames and HeaderNames list the keys of Env and Headers, so that
	// a record says what was given without the values.
	EnvNames    []string `json:"env_names,omitempty"`
	HeaderNames []string `json:"header_names,omitempty"`
	// Sealed is Env and Headers, encrypted by the gateway.
	Sealed []byte `json:"sealed,omitempty"`
}
