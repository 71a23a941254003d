// Package doccheck finds the command lines the documentation shows, so
// that tests can hold each to the command table of the binary it names.
package doccheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Program is a binary of this module, as the documentation names it.
type Program string

// The binaries: the client CLI (cmd/agentgate) and the gateway
// (cmd/gateway).
const (
	Client  Program = "client"
	Gateway Program = "gateway"
)

// Command is one command line of a document.
type Command struct {
	Where   string // file:line
	Text    string // the command line as written
	Program Program
	Args    []string // what follows the program's name
}

func (c Command) String() string { return fmt.Sprintf("%s: %s", c.Where, c.Text) }

// Names of a program in the documentation: as installed or built, and
// run from a checkout. The gateway's image installs it as agentgate too,
// but the documentation runs the image by docker, not by that name.
var programs = map[string]Program{
	"agentgate":              Client,
	"go run ./cmd/agentgate": Client,
	"gateway":                Gateway,
	"agentgate-gateway":      Gateway,
	"./agentgate-gateway":    Gateway,
	"go run ./cmd/gateway":   Gateway,
}

var (
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	// separators split a shell line into the commands it runs.
	separators = regexp.MustCompile(`;|&&|\|\||\||\$\(`)
	envAssign  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)
)

// Find returns the command lines of the files' code blocks and inline
// code spans that run one of the module's programs.
func Find(paths ...string) ([]Command, error) {
	var out []Command
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, find(path, string(b))...)
	}
	return out, nil
}

func find(path, text string) []Command {
	var out []Command
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		where := fmt.Sprintf("%s:%d", path, i+1)
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		var snippets []string
		if fenced {
			code, _, _ := strings.Cut(line, " #")
			snippets = append(snippets, code)
		} else {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				snippets = append(snippets, m[1])
			}
		}
		for _, s := range snippets {
			for _, part := range separators.Split(s, -1) {
				if c, ok := parse(part); ok {
					c.Where = where
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// parse reads one command: environment assignments, then a program's
// name and its arguments.
func parse(s string) (Command, bool) {
	words := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s), "$ "))
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		words = words[1:]
	}
	for n := 3; n >= 1; n-- {
		if len(words) < n {
			continue
		}
		if p, ok := programs[strings.Join(words[:n], " ")]; ok {
			return Command{Text: strings.Join(words, " "), Program: p, Args: words[n:]}, true
		}
	}
	return Command{}, false
}

// word matches a subcommand's name, as opposed to a placeholder (ID,
// FILE, …), a path or a shell operator.
var word = regexp.MustCompile(`^[a-z][a-z-]*$`)

// Subcommand returns the leading words of args that name a command and
// its subcommands, skipping the flags given before them (flagsWithValue
// take the next argument).
func Subcommand(args []string, flagsWithValue ...string) []string {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name := strings.TrimLeft(args[0], "-")
		args = args[1:]
		for _, f := range flagsWithValue {
			if name == f && len(args) > 0 {
				args = args[1:]
			}
		}
	}
	var words []string
	for _, a := range args {
		if !word.MatchString(a) {
			break
		}
		words = append(words, a)
	}
	return words
}
