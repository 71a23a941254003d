package gemini

import (
	"encoding/json"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// The auth types of security.auth.selectedType whose hosts differ.
const (
	authVertex = "vertex-ai"
	authGoogle = "oauth-personal"
)

// The CLI's hosts by auth type (0.61.0).
var (
	// apiKeyEndpoint is the Gemini API of "gemini-api-key", the type
	// PrepareHome writes where the operator set none.
	apiKeyEndpoint = "generativelanguage.googleapis.com:443"
	// vertexEndpoint is Vertex AI's global endpoint, which express mode
	// (GOOGLE_API_KEY, no project or location) calls; the adapter passes
	// neither GOOGLE_CLOUD_LOCATION nor GOOGLE_VERTEX_BASE_URL through.
	vertexEndpoint = "aiplatform.googleapis.com:443"
	// googleLoginEndpoints are what "Login with Google" needs: Code
	// Assist serves the model, the login's access token is refreshed at
	// oauth2.googleapis.com/token, and the account is read from
	// www.googleapis.com/oauth2/v2/userinfo.
	googleLoginEndpoints = []string{"cloudcode-pa.googleapis.com:443", "oauth2.googleapis.com:443", "www.googleapis.com:443"}
)

// ModelEndpoints implements runs.NetworkNeeds, by the auth type the
// settings in home select: for an API key, GOOGLE_GEMINI_BASE_URL's host,
// else the Gemini API's; Vertex AI's or Google's login hosts for those
// types.
func (*Adapter) ModelEndpoints(getenv func(string) string, home string) []string {
	var e adapterkit.Endpoints
	switch authType(home) {
	case authVertex:
		e.Add(vertexEndpoint)
	case authGoogle:
		e.Add(googleLoginEndpoints...)
	default:
		if !e.AddURL(getenv("GOOGLE_GEMINI_BASE_URL")) {
			e.Add(apiKeyEndpoint)
		}
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds. The CLI, the commands its shell
// tool runs and its MCP clients use HTTP_PROXY and HTTPS_PROXY as they
// are (see doc.go and TestProxyRealCLI).
func (*Adapter) ProxyEnv(string) []string { return nil }

// authType reads security.auth.selectedType from the settings in home,
// "" when there is none to read.
func authType(home string) string {
	if home == "" {
		return ""
	}
	b, err := runs.HostFiles{}.ReadFile(settingsPath(home))
	if err != nil {
		return ""
	}
	var s struct {
		Security struct {
			Auth struct {
				SelectedType string `json:"selectedType"`
			} `json:"auth"`
		} `json:"security"`
	}
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	return s.Security.Auth.SelectedType
}
