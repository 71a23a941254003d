// Command fakeclaude stands in for the claude CLI in the benchmarks: it
// writes claude stream-json lines to stdout at a controlled rate, so that
// the gateway's pipeline can be measured without the real CLI's own cost.
//
// With --version it answers like the real CLI, for the gateway's startup
// probe. Otherwise it ignores its arguments and reads its settings, as JSON,
// from stdin, where the gateway puts the run's prompt:
//
//	{"lines": "/abs/file.jsonl", "count": 5000, "interval_ns": 2000000,
//	 "stamp": true, "gate": "/abs/go", "final": "{\"type\":\"result\",…}"}
//
// It writes count lines, cycling through the file's lines, one write(2)
// per line as the CLI does. With interval_ns the n-th line is written at
// start + n×interval; without, as fast as the pipe takes them. With stamp,
// "@STAMP@" in a line becomes the wall-clock time of the write in Unix
// nanoseconds. With gate it waits for that file to exist before the first
// line. final, when set, is written last.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
)

// version is what --version prints: the version the claude adapter was
// verified on, so that the probe finds the CLI compatible.
const version = "2.1.332 (Claude Code)"

// stampMark is replaced by the time of the write.
const stampMark = "@STAMP@"

type settings struct {
	Lines      string `json:"lines"`
	Count      int    `json:"count"`
	IntervalNS int64  `json:"interval_ns"`
	Stamp      bool   `json:"stamp"`
	Gate       string `json:"gate"`
	Final      string `json:"final"`
}

func main() {
	for _, a := range os.Args[1:] {
		if a == "--version" {
			fmt.Println(version)
			return
		}
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		os.Exit(2)
	}
}

func run() error {
	// The settings are the first line of stdin: the prompt itself, or,
	// as the gateway drives Claude Code, a stream-json user line whose
	// content is the prompt. Stdin may stay open after it.
	in, err := bufio.NewReaderSize(os.Stdin, 1<<20).ReadBytes('\n')
	if err != nil && len(in) == 0 {
		return fmt.Errorf("settings on stdin: %w", err)
	}
	var user struct {
		Type    string `json:"type"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(in, &user) == nil && user.Type == "user" {
		var text string
		if err := json.Unmarshal(user.Message.Content, &text); err != nil {
			var blocks []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(user.Message.Content, &blocks); err != nil || len(blocks) == 0 {
				return fmt.Errorf("a user line without a text prompt: %s", in)
			}
			text = blocks[0].Text
		}
		in = []byte(text)
	}
	var s settings
	if err := json.Unmarshal(in, &s); err != nil {
		return fmt.Errorf("settings on stdin: %w", err)
	}
	raw, err := os.ReadFile(s.Lines)
	if err != nil {
		return err
	}
	var lines [][]byte
	for _, l := range bytes.Split(raw, []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, append(l, '\n'))
		}
	}
	if len(lines) == 0 && s.Count > 0 {
		return fmt.Errorf("%s has no lines", s.Lines)
	}
	if s.Gate != "" {
		if err := waitFor(s.Gate, 2*time.Minute); err != nil {
			return err
		}
	}
	interval := time.Duration(s.IntervalNS)
	buf := make([]byte, 0, 64<<10)
	start := time.Now()
	for i := range s.Count {
		if interval > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		}
		l := lines[i%len(lines)]
		if s.Stamp {
			if at := bytes.Index(l, []byte(stampMark)); at >= 0 {
				buf = append(buf[:0], l[:at]...)
				buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
				l = append(buf, l[at+len(stampMark):]...)
			}
		}
		if _, err := os.Stdout.Write(l); err != nil {
			return err
		}
	}
	if s.Final != "" {
		if _, err := os.Stdout.WriteString(s.Final + "\n"); err != nil {
			return err
		}
	}
	return nil
}

// waitFor polls until path exists. The poll backs off to 20 ms: a
// benchmark may start hundreds of these at once, and a poll every
// millisecond each would take the machine the gateway is measured on.
// Only the time the first line is written matters, and a stamp carries it.
func waitFor(path string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gate %s did not open within %s", path, within)
		}
		time.Sleep(wait)
	}
}
