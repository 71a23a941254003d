package main

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/api"
)

// configFields are the fields of the gateway's configuration that
// envconfig reads, by their variable, with their default.
func configFields(t *testing.T) map[string]string {
	t.Helper()
	fields := map[string]string{}
	for _, typ := range []reflect.Type{reflect.TypeFor[config](), reflect.TypeFor[api.Config]()} {
		for f := range typ.Fields() {
			tag := f.Tag.Get("envconfig")
			if tag == "" {
				continue
			}
			if f.Tag.Get("desc") == "" {
				t.Errorf("%s.%s (AGENTGATE_%s) has no desc tag: gateway help would not say what it does", typ, f.Name, tag)
			}
			fields["AGENTGATE_"+tag] = f.Tag.Get("default")
		}
	}
	if len(fields) < 50 {
		t.Fatalf("found only %d settings", len(fields))
	}
	return fields
}

// checkHelp fails unless help names every setting with its default and
// a line saying what it does.
func checkHelp(t *testing.T, help string) {
	t.Helper()
	lines := strings.Split(help, "\n")
	for name, def := range configFields(t) {
		if def == "" {
			def = "(none)"
		}
		want := "  " + name + "  default " + def
		i := slicesIndex(lines, want)
		if i < 0 || i+1 >= len(lines) || len(strings.TrimSpace(lines[i+1])) < 10 {
			t.Errorf("help lacks %q followed by a description", want)
		}
	}
	for _, agent := range agentNames() {
		if !strings.Contains(help, strings.ToUpper(agent)) {
			t.Errorf("help does not name the per-agent settings of %s", agent)
		}
	}
}

func slicesIndex(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}

// TestHelpListsEverySetting: gateway -h, -help, --help and help print
// every setting the configuration reads, with its default and what it
// does, and succeed, both through run and through the command table main
// dispatches on.
func TestHelpListsEverySetting(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		t.Run(arg, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), []string{arg}, func(string) string { return "" }, &out)
			if code := exitCode(err, &out); code != 0 {
				t.Fatalf("run %s: exit %d: %s", arg, code, out.String())
			}
			checkHelp(t, out.String())
			c, ok := lookupCommand(arg)
			if !ok {
				t.Fatalf("%s is not a command main dispatches", arg)
			}
			var cmdOut, cmdErr bytes.Buffer
			if code := c.run(nil, &cmdOut, &cmdErr); code != 0 || cmdOut.String() != out.String() {
				t.Errorf("command %s: exit %d, stderr %q; output differs from run's: %v", arg, code, cmdErr.String(), cmdOut.String() != out.String())
			}
		})
	}
}

// TestHelpUnknownArgument: an argument the gateway does not take is a
// usage error, exit 2, that says where the settings are listed.
func TestHelpUnknownArgument(t *testing.T) {
	for _, args := range [][]string{{"--port", "1"}, {"serve"}, {"-h", "extra"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, &out)
		if code := exitCode(err, &errOut); code != 2 || !strings.Contains(errOut.String(), "AGENTGATE_") || !strings.Contains(errOut.String(), "gateway help") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("%q: printed %q on stdout", args, out.String())
		}
	}
	c, _ := lookupCommand("help")
	var out, errOut bytes.Buffer
	if code := c.run([]string{"extra"}, &out, &errOut); code != 2 || out.Len() != 0 {
		t.Errorf("help extra: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// TestReadmeSettings holds docs/operations.md's table of settings (moved
// there from the README) to the
// configuration: every setting is in it, everything in it is a setting,
// and a default the configuration gives (other than zero) is the one it
// shows.
func TestReadmeSettings(t *testing.T) {
	rows := readmeSettings(t)
	fields := configFields(t)
	for name, def := range fields {
		short := strings.TrimPrefix(name, "AGENTGATE_")
		cell, ok := rows[short]
		if !ok {
			t.Errorf("docs/operations.md's Configuration table lacks %s", short)
			continue
		}
		if def != "" && def != "0" && def != "false" && !strings.Contains(cell, def) {
			t.Errorf("docs/operations.md's Configuration table gives %s the default %q, the configuration %q", short, cell, def)
		}
	}
	for short := range rows {
		if _, ok := fields["AGENTGATE_"+short]; !ok && !strings.HasPrefix(short, "<AGENT>") {
			t.Errorf("docs/operations.md's Configuration table lists %s, which the gateway does not read", short)
		}
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readmeSettings returns the rows of docs/operations.md's Configuration table: each
// variable of the first column, with its row's default column.
func readmeSettings(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		t.Fatal("docs/operations.md has no Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = cells[2]
		}
	}
	if len(rows) < 40 {
		t.Fatalf("read only %d settings from docs/operations.md's Configuration table", len(rows))
	}
	return rows
}
