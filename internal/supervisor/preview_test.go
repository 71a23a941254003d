package supervisor

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestPromptPreview(t *testing.T) {
	long := "Fix   the\n\tbug " + strings.Repeat("é", 5000)
	for _, c := range []struct{ prompt, want string }{
		{"", ""},
		{"  Write hello\nto out.txt  ", "Write hello to out.txt"},
		{long, "Fix the bug " + strings.Repeat("é", MaxPromptPreview-len("Fix the bug ")-1) + "…"},
		{strings.Repeat(" ", 3000) + "x", "…"},
	} {
		got := promptPreview(c.prompt)
		if got != c.want || !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxPromptPreview {
			t.Errorf("promptPreview(%.40q…) = %q, want %q", c.prompt, got, c.want)
		}
	}
}

// TestStoredRecordHasPromptPreview: the record a client lists carries the
// start of its prompt, from the run's first record on.
func TestStoredRecordHasPromptPreview(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:hello\nand more")
	rec := h.waitRecord(t, r.ID, "stored", func(runs.Run) bool { return true })
	if rec.PromptPreview != "mode:hello and more" {
		t.Fatalf("stored prompt_preview %q", rec.PromptPreview)
	}
	if done := h.wait(t, r.ID, 20*time.Second); done.PromptPreview != "mode:hello and more" {
		t.Fatalf("finished record's prompt_preview %q", done.PromptPreview)
	}
}
