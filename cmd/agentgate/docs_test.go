package main

import (
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/doccheck"
)

// TestReadmeClientCommands: every command of the client that the README,
// docs/ and openapi.yaml show is in its command table.
func TestReadmeClientCommands(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccheck.Find(append(docs, "../../README.md", "../../openapi.yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cmds {
		words := doccheck.Subcommand(c.Args, "url", "api-key")
		if c.Program != doccheck.Client || len(words) == 0 {
			continue
		}
		n++
		if _, ok := lookupCommand(words[0]); !ok {
			t.Errorf("%s: the client has no command %q", c, words[0])
		}
	}
	if n < 10 {
		t.Fatalf("found only %d commands of the client in the documentation", n)
	}
}
