package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestReadmeAgentTableMatchesTheAdapters: the README's table of agents
// says of each built-in agent what its adapter does, so that neither
// drifts from the other.
func TestReadmeAgentTableMatchesTheAdapters(t *testing.T) {
	rows := readmeAgentRows(t)
	for _, a := range adapters(func(string) string { return "" }) {
		d := a.Describe()
		row, ok := rows["`"+d.Name+"`"]
		if !ok {
			t.Errorf("the README's agent table has no row for %s", d.Name)
			continue
		}
		caps := runs.Capabilities(d)
		yes := func(b bool) string {
			if b {
				return "yes"
			}
			return "no"
		}
		has := func(f string) string { return yes(slices.Contains(caps, f)) }
		_, keeps := a.(runs.HomeKeeper)
		r := d.Reporting()
		want := []string{d.VerifiedVersion,
			yes(slices.Contains(caps, runs.FieldInteractive) && slices.Contains(caps, runs.FieldApprovals)),
			yes(d.Interaction.Steer), has(runs.FieldMCPServers), has(runs.FieldAttachments), has(runs.FieldResumeSessionID),
			yes(keeps && d.Interaction.ResumesSession && slices.Contains(caps, runs.FieldResumeSessionID)),
			r.Usage, r.Cost, r.ErrorClasses}
		if !slices.Equal(row, want) {
			t.Errorf("README row of %s = %q, want %q", d.Name, row, want)
		}
	}
}

// readmeAgentRows returns the cells after the first of each row of the
// README's agent table, by its first cell.
func readmeAgentRows(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n| agent | verified CLI |")
	if !ok {
		t.Fatal("the README has no agent table")
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = cells[1:]
	}
	return rows
}
