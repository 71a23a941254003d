package adapterkit

import (
	"bytes"
	"fmt"
	"regexp"
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
		return "", fmt.Errorf("%s: unrecognised output %q", p.Command, Clip(string(output), 80))
	}
	return string(m[1]), nil
}
