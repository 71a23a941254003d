package acpagent

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"
)

// TestMain checks that the real-CLI tests leave no goroutine behind; the
// conformance suite's network shim and MCP server are this binary.
func TestMain(m *testing.M) {
	netns.Main()
	mcptest.Main()
	goleak.VerifyTestMain(m)
}
