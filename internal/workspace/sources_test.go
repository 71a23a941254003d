package workspace

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/unpack"
)

// A kept directory that cannot be unpacked is the run's, not an upload's:
// the error names the run it came from.
func TestPrepareErrorNamesTheSourceOfWhatCouldNotBeUnpacked(t *testing.T) {
	refused := fmt.Errorf("unpack workspace snapshot: %w", &unpack.Error{Code: unpack.CodeRatio, Message: "too packed"})
	for _, c := range []struct {
		src  runs.WorkspaceSource
		says string
	}{
		{runs.WorkspaceSource{FromRun: "01a24815-a657-7a2b-ab76-94e787e449af"}, "the workspace of run 01a24815-a657-7a2b-ab76-94e787e449af could not be restored"},
		{runs.WorkspaceSource{Archive: "f1"}, "the uploaded archive is not safe to unpack"},
	} {
		got := prepareError(c.src, refused)
		if got.Class != runs.WorkspaceFailed || !strings.Contains(got.Message, c.says) || !strings.Contains(got.Message, "too packed") {
			t.Errorf("source %+v: %+v, want workspace_failed saying %q", c.src, got, c.says)
		}
	}
	if got := prepareError(runs.WorkspaceSource{FromRun: "r"}, errors.New("x")); got.Class != runs.WorkspaceFailed {
		t.Errorf("another failure of a from_run: %+v", got)
	}
}
