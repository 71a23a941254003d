package doccheck

import (
	"reflect"
	"testing"
)

func TestFind(t *testing.T) {
	doc := "Make one with `agentgate keys new --tenant a` and `agentgate-data`.\n" +
		"```sh\n" +
		"AGENTGATE_API_KEYS_FILE=/k go run ./cmd/gateway   # on :8080\n" +
		"agentgate interrupt RUN; agentgate close RUN\n" +
		"agentgate --json watch RUN | jq .type # NDJSON; agentgate bogus\n" +
		"ID=$(./agentgate-gateway keys check FILE)\n" +
		"```\n" +
		"`curl localhost`\n"
	var got []string
	for _, c := range find("d.md", doc) {
		got = append(got, c.Where+" "+string(c.Program)+" "+c.Text)
	}
	want := []string{
		"d.md:1 client agentgate keys new --tenant a",
		"d.md:3 gateway go run ./cmd/gateway",
		"d.md:4 client agentgate interrupt RUN",
		"d.md:4 client agentgate close RUN",
		"d.md:5 client agentgate --json watch RUN",
		"d.md:6 gateway ./agentgate-gateway keys check FILE)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("found\n%q\nwant\n%q", got, want)
	}
}

func TestSubcommand(t *testing.T) {
	for _, c := range []struct {
		args, want []string
	}{
		{[]string{"--json", "watch", "RUN"}, []string{"watch"}},
		{[]string{"--url", "http://x", "get", "ID"}, []string{"get"}},
		{[]string{"keys", "new", "--tenant", "acme"}, []string{"keys", "new"}},
		{[]string{"&"}, nil},
		{[]string{"…"}, nil},
	} {
		if got := Subcommand(c.args, "url", "api-key"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Subcommand(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
