package cline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// mcpSettingsEnv names the MCP settings file Cline 3.0.65 reads, in
// place of $HOME/.cline/data/settings/cline_mcp_settings.json: both
// `cline --json` and `cline --acp` start the stdio servers it lists and
// offer their tools (verified). session/new's mcpServers are not used:
// 3.0.65 keeps them with the session and never reads them again.
const mcpSettingsEnv = "CLINE_MCP_SETTINGS_PATH"

// mcpSettingsPath is the MCP settings file of run runID in home: a file
// of the run's own, so that runs sharing a home never see each other's
// servers, and the operator's file stays as it is.
func mcpSettingsPath(home, runID string) string {
	return filepath.Join(settingsDir(home), "agentgate-mcp-"+runID+".json")
}

// mcpEnv points Cline at the run's MCP settings file, when it names
// servers.
func mcpEnv(inv runs.Invocation) []string {
	if len(inv.Spec.MCPServers) == 0 {
		return nil
	}
	return []string{mcpSettingsEnv + "=" + mcpSettingsPath(inv.Home, inv.RunID)}
}

// mcpEntry is one server of Cline's MCP settings file: a command it
// starts (stdio), or a URL it reaches over streamable HTTP.
type mcpEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// mcpSettings is the MCP settings file of a run's servers.
func mcpSettings(servers map[string]runs.MCPServer) []byte {
	entries := make(map[string]mcpEntry, len(servers))
	for name, m := range servers {
		if m.Remote() {
			entries[name] = mcpEntry{Type: "streamableHttp", URL: m.URL, Headers: m.Headers}
			continue
		}
		entries[name] = mcpEntry{Type: "stdio", Command: m.Command, Args: m.Args, Env: m.Env}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": entries})
	return append(b, '\n')
}

// writeMCPSettings writes the run's MCP settings file, readable by its
// owner alone, when the run names servers.
func writeMCPSettings(inv runs.Invocation) error {
	if len(inv.Spec.MCPServers) == 0 {
		return nil
	}
	if inv.Home == "" {
		return errors.New("the run has no home")
	}
	if err := os.MkdirAll(settingsDir(inv.Home), 0o700); err != nil {
		return err
	}
	return adapterkit.WriteFileAtomic(mcpSettingsPath(inv.Home, inv.RunID), mcpSettings(inv.Spec.MCPServers))
}

// removeMCPSettings removes the run's MCP settings file once the run
// ended: it holds the servers' env and header values. A file that cannot
// be removed is a warning.
func removeMCPSettings(inv runs.Invocation) []runs.Event {
	if len(inv.Spec.MCPServers) == 0 || inv.Home == "" {
		return nil
	}
	err := inv.FilesOrNone().Remove(mcpSettingsPath(inv.Home, inv.RunID))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return []runs.Event{runs.Warning("mcp_settings_kept", "cannot remove cline's MCP settings file of the run: "+err.Error())}
}

// mcpToolName splits Cline's name of an MCP tool, "<server>__<tool>"
// (verified: "demo__reverse_text"), into the run's server and the
// tool's own name; ok is false for a built-in tool.
func mcpToolName(name string, servers map[string]runs.MCPServer) (server, tool string, ok bool) {
	return acp.SplitMCPName(name, "", "__", servers)
}

// sessionImagesRefusal says why `cline --acp` takes no images: 3.0.65
// announces promptCapabilities.image but keeps only the text blocks of a
// session/prompt, and does not read a file mentioned in its text there.
const sessionImagesRefusal = "cline drops the images of an interactive run, one with approvals or one that resumes a session " +
	"(over ACP it keeps only a prompt's text); a new one-shot run takes them"

// checkImagePaths checks that each image's file can be mentioned: an
// absolute path without a quote or a line break, which would end
// Cline's @"…" early.
func checkImagePaths(images []runs.Image) error {
	for i, im := range images {
		if !filepath.IsAbs(im.Path) || strings.ContainsAny(im.Path, "\"\r\n") {
			return fmt.Errorf("cline: attachment %d cannot be named in the prompt (%q)", i, im.Path)
		}
	}
	return nil
}

// imageMentions is the prompt with each image named as `cline --json`
// takes a file: @"<absolute path>" (the path is the supervisor's file
// under the run's TMPDIR). Cline reads a mentioned image into the
// message, as an image_url part for the OpenAI-compatible provider
// whatever the model (verified with mock-model), and puts
// "[image: <file name>]" in the mention's place.
func imageMentions(prompt string, images []runs.Image) string {
	if len(images) == 0 {
		return prompt
	}
	var b strings.Builder
	b.WriteString(prompt)
	b.WriteString("\n")
	for _, im := range images {
		b.WriteString("\n@\"" + im.Path + "\"")
	}
	return b.String()
}
