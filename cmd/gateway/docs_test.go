package main

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/doccheck"
)

// documents are the files whose command lines must work as written.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, "../../README.md", "../../openapi.yaml")
}

// TestReadmeGatewayCommands: every command of the gateway that the
// README, docs/ and openapi.yaml show is one the gateway has, as written:
// its command table takes it with -h.
func TestReadmeGatewayCommands(t *testing.T) {
	cmds, err := doccheck.Find(documents(t)...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cmds {
		words := doccheck.Subcommand(c.Args)
		if c.Program != doccheck.Gateway || len(words) == 0 {
			continue
		}
		n++
		cmd, ok := lookupCommand(words[0])
		if !ok {
			t.Errorf("%s: the gateway has no command %q", c, words[0])
			continue
		}
		if code := cmd.run(append(words[1:], "-h"), io.Discard, io.Discard); code != 0 {
			t.Errorf("%s: gateway %v -h exits %d", c, words, code)
		}
	}
	if n == 0 {
		t.Fatal("found no command of the gateway in the documentation")
	}
}
