package adapterkit

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/agentgate/agentgate/internal/clip"
)

// VersionParser reads the version out of what a CLI prints for its
// version flag.
type VersionParser struct {
	// Command names what was run, for the error: "codex --version".
	Command string
	// Pattern matches the whole (trimmed) output, or its first line; its
	// first submatch is the version.
	Pattern *regexp.Regexp
	// FirstLineOnly matches Pattern against the first line alone, for a
	// CLI that prints more after the version.
	FirstLineOnly bool
}

// Parse returns the version in output, or an error that quotes the
// output (clipped) when Pattern does not match it.
func (p VersionParser) Parse(output []byte) (string, error) {
	text := bytes.TrimSpace(output)
	if p.FirstLineOnly {
		first, _, _ := bytes.Cut(text, []byte("\n"))
		text = bytes.TrimSpace(first)
	}
	m := p.Pattern.FindSubmatch(text)
	if len(m) < 2 {
		return "", fmt.Errorf("%s: unrecognised output %q", p.Command, clip.Text(string(output), 80))
	}
	return string(m[1]), nil
}

// VersionHint is the hint of a run whose CLI rejected the arguments the
// adapter built. It names the installed version (installed, empty when
// unknown) and the one the adapter was verified with: a rejected flag
// usually means the CLI changed, and install is how to get the verified
// one.
func VersionHint(cli, installed, verified, install string) string {
	if installed == "" {
		installed = "of unknown version"
	}
	if installed == verified {
		return fmt.Sprintf("%s %s rejected the arguments the adapter built for it; check the request's values", cli, installed)
	}
	return fmt.Sprintf("the installed %s is %s but the adapter was verified with %s; install it with `%s`", cli, installed, verified, install)
}
