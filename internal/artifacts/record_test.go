package artifacts

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestRecordedFilesBounded(t *testing.T) {
	var changes []Change
	for i := range MaxRecordedFiles + 10 {
		changes = append(changes, Change{Path: fmt.Sprintf("f%04d", i), Kind: runs.ChangeAdd})
	}
	if files, cut := recordedFiles(changes); len(files) != MaxRecordedFiles || !cut {
		t.Errorf("%d files, cut %v", len(files), cut)
	}
	long := []Change{{Path: strings.Repeat("p", 40<<10)}, {Path: strings.Repeat("q", 40<<10)}}
	if files, cut := recordedFiles(long); len(files) != 1 || !cut {
		t.Errorf("long paths: %d files, cut %v", len(files), cut)
	}
}
