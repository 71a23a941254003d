package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// toolSummary is a short form of a tool call's input: its command, path,
// pattern, URL or query when it has one, else its JSON, on one line.
func toolSummary(input json.RawMessage) string {
	if len(input) == 0 || string(input) == "null" {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "filePath", "notebook_path", "pattern", "path", "url", "query", "description", "prompt"} {
			raw, ok := m[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				return oneLine(s, 120)
			}
			var argv []string
			if json.Unmarshal(raw, &argv) == nil && len(argv) > 0 {
				return oneLine(strings.Join(argv, " "), 120)
			}
		}
	}
	return oneLine(string(input), 120)
}

// outputSummary is ": " and the first line of a tool's output, with how
// many lines follow.
func outputSummary(out string) string {
	out = strings.TrimSpace(out)
	if out == "" {
		return ""
	}
	first, rest, _ := strings.Cut(out, "\n")
	s := ": " + oneLine(first, 160)
	if n := strings.Count(rest, "\n") + 1; rest != "" {
		s += fmt.Sprintf(" (+%d more %s)", n, pluralWord(n, "line"))
	}
	return s
}

// oneLine makes s one line of at most max runes: every run of white
// space (line breaks included) becomes one space and control characters
// go, so that nothing the agent wrote can move the cursor.
func oneLine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case isControl(r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return truncateRunes(b.String(), max)
}

// firstLine is the first non-empty line of s, made one line of at most
// max runes.
func firstLine(s string, max int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return oneLine(l, max)
		}
	}
	return ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// escapeSequence matches the terminal sequences text could carry: CSI
// (colours, cursor moves), OSC (titles, links) and two-byte escapes.
var escapeSequence = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?|\x1b[@-Z\\-_]`)

// stripControls removes terminal sequences and the control characters of
// s but line feeds and tabs, for the agent's text written to a terminal:
// nothing it prints can move the cursor or recolour the screen.
func stripControls(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return isControl(r) && r != '\n' && r != '\t' }) {
		return s
	}
	s = escapeSequence.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if isControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s)
}

// truncateRunes cuts s to max runes, the last of them an ellipsis.
func truncateRunes(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	rs := []rune(s)
	return string(rs[:max-1]) + "…"
}

// formatTokens is a compact count: 999, 24.5k, 1.2M.
func formatTokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

// groupDigits writes n with thousands separators: 24,535.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatCost is US dollars, with four decimals below one dollar.
func formatCost(usd float64) string {
	if usd < 1 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// formatDuration is 850ms, 4.2s, 3m05s or 1h02m.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// formatElapsed is whole seconds: 7s, 3m05s, 1h02m.
func formatElapsed(d time.Duration) string {
	d = d.Truncate(time.Second)
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + "s"
	}
	return formatDuration(d)
}

func plural(n int, word string) string { return strconv.Itoa(n) + " " + pluralWord(n, word) }

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
