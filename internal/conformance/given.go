package conformance

import (
	"os"
	"testing"
)

// testBinary is the running test binary, which serves as the suite's MCP
// server (mcptest.Server): every kit's TestMain calls mcptest.Main.
func testBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
