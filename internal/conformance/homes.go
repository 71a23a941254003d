package conformance

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs"
)

// What the home_isolation case plants and looks for.
const (
	// plantedFile is the file tenant alpha's run leaves in its home.
	plantedFile = "planted-by-alpha"
	// plantHere, in a run's directory, makes the probe plant: only the
	// run the case gives such a directory does.
	plantHere = "plant-here"
	// probeDone ends the probe's output, so that a probe cut short is
	// not read as one that saw nothing.
	probeDone = "probe-done"
)

// homeCases check that a run's CLI home is its own.
func (s *suite) homeCases() []suiteCase {
	return []suiteCase{{"home_isolation", s.homeIsolation}}
}

// homeIsolation: tenant alpha's run leaves in its HOME a file and a change
// of the CLI's configuration that would run a command in a later run of
// that home (the kit's HomeTrap); tenant beta's next run, in a HOME of its
// own, neither sees the file nor runs the command, and neither does alpha's
// own next run, which resumes nothing. The runs are full, unconfined, so
// that a command the trap made run could write its marker outside the
// run's directory, and so that nothing but the homes keeps them apart. The
// same runs on a gateway without homes of their own, where every run
// shares the agent's, must see both, or the check could not see a leak.
func (s *suite) homeIsolation(t *testing.T) {
	trap, ok := s.kit.(HomeTrap)
	if !ok {
		t.Fatalf("the %s kit does not say how a run could trap its CLI's home (conformance.HomeTrap)", s.adapter.Name())
	}
	t.Run("shared_home", func(t *testing.T) {
		t.Parallel()
		s.sharedHome(t, trap)
	})
	t.Run("own_homes", func(t *testing.T) {
		t.Parallel()
		s.ownHomes(t, trap)
	})
}

// The case's two tenants.
const (
	alphaTenant = "alpha"
	betaTenant  = "beta"
)

// callerOf is a caller of tenant.
func callerOf(tenant string) runs.Actor { return runs.Actor{KeyID: tenant + "-key", Tenant: tenant} }

// sharedHome is the control: without homes of their own, beta's run sees
// what alpha's left and runs its trap.
func (s *suite) sharedHome(t *testing.T, trap HomeTrap) {
	marker := filepath.Join(t.TempDir(), "fired")
	g := s.start(t, homeProbeScenario(trap, marker), credentials)
	alpha := g.probeHome(t, callerOf(alphaTenant), g.plantingDir(t, alphaTenant))
	if !alpha.planted {
		t.Fatalf("alpha's run did not plant: %q", alpha.output)
	}
	fired := readMarker(t, marker)
	beta := g.probeHome(t, callerOf(betaTenant), "")
	if !beta.sawPlanted {
		t.Errorf("in the home it shares with alpha's run, beta's run did not see %s: the probe cannot see a leak: %q", plantedFile, beta.output)
	}
	if readMarker(t, marker) == fired {
		t.Errorf("in the home it shares with alpha's run, beta's run did not run the trap alpha's run set: the case cannot see a leak (marker %q, alpha's probe %q)",
			fired, alpha.output)
	}
}

// ownHomes: with homes of their own, nothing of alpha's run reaches the
// runs after it.
func (s *suite) ownHomes(t *testing.T, trap HomeTrap) {
	marker := filepath.Join(t.TempDir(), "fired")
	var homes string
	g := s.start(t, homeProbeScenario(trap, marker), credentials, sessionsInCluster(t, &homes))
	alpha := g.probeHome(t, callerOf(alphaTenant), g.plantingDir(t, alphaTenant))
	if !alpha.planted {
		t.Fatalf("alpha's run did not plant: %q", alpha.output)
	}
	if filepath.Dir(alpha.home) != homes {
		t.Errorf("alpha's run had HOME %s, not a home of its own in %s", alpha.home, homes)
	}
	if _, err := os.Stat(filepath.Join(g.home, plantedFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("alpha's run planted %s in the agent's base home %s: %v", plantedFile, g.home, err)
	}
	fired := readMarker(t, marker)
	beta := g.probeHome(t, callerOf(betaTenant), "")
	again := g.probeHome(t, callerOf(alphaTenant), "")
	for _, later := range []struct {
		who string
		homeProbe
	}{{"beta's run", beta}, {"alpha's next run", again}} {
		if later.home == alpha.home || later.home == g.home {
			t.Errorf("%s had HOME %s, alpha's first run %s, the agent's %s: it must be a home of its own", later.who, later.home, alpha.home, g.home)
		}
		if later.sawPlanted || slices.Contains(later.entries, plantedFile) {
			t.Errorf("%s saw %s that alpha's run left in its home: %q", later.who, plantedFile, later.output)
		}
	}
	if now := readMarker(t, marker); now != fired {
		t.Errorf("a later run ran the trap alpha's run set in its home: the marker went from %q to %q", fired, now)
	}
	if _, err := os.Stat(alpha.home); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("alpha's home %s is still there after its run: %v", alpha.home, err)
	}
}

// homeProbeScenario asks every run's model for one shell tool call: the
// probe, whose plant is trap's command with marker.
func homeProbeScenario(trap HomeTrap, marker string) Scenario {
	return Scenario{Kind: Tool, Command: probeCommand(trap.TrapCommand(marker)), Text: "probed"}
}

// probeCommand reports the run's HOME, what it holds, and whether it
// holds plantedFile; in a directory holding plantHere it then plants the
// file and runs plant.
func probeCommand(plant string) string {
	return `echo "home=$HOME"; ls -A "$HOME" | sed 's/^/entry=/'; ` +
		`if test -e "$HOME/` + plantedFile + `"; then echo saw-planted; fi; ` +
		`if test -e ` + plantHere + `; then echo alpha > "$HOME/` + plantedFile + `" && { ` + plant + `; } && echo planted; fi; ` +
		`echo ` + probeDone
}

// homeProbe is what one run's probe reported.
type homeProbe struct {
	home       string
	entries    []string
	sawPlanted bool
	planted    bool
	output     string
}

// plantingDir makes a directory of tenant's, holding plantHere, for the
// run that plants, and returns it relative to the tenant's root.
func (g *gateway) plantingDir(t *testing.T, tenant string) string {
	t.Helper()
	name := "plant-" + uuid.NewString()[:8]
	dir := filepath.Join(g.root, "tenants", tenant, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, plantHere), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// probeHome runs the probe as a full run of by in cwd (a fresh directory
// when empty) and returns what it reported.
func (g *gateway) probeHome(t *testing.T, by runs.Actor, cwd string) homeProbe {
	t.Helper()
	r := g.submitAs(t, by, runs.Spec{Prompt: "Run the command.", Permission: runs.Full, Cwd: cwd})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("%s's run: status %s, error %+v; events %s", by.Tenant, r.Status, r.Error, typesOf(evs))
	}
	var out strings.Builder
	for _, ev := range of(evs, runs.EventToolCallCompleted) {
		var d struct {
			Output string `json:"output"`
		}
		_ = json.Unmarshal(ev.Data.(json.RawMessage), &d)
		out.WriteString(d.Output)
	}
	p := homeProbe{output: out.String()}
	for line := range strings.Lines(p.output) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "home="):
			p.home = strings.TrimPrefix(line, "home=")
		case strings.HasPrefix(line, "entry="):
			p.entries = append(p.entries, strings.TrimPrefix(line, "entry="))
		case line == "saw-planted":
			p.sawPlanted = true
		case line == "planted":
			p.planted = true
		}
	}
	if !strings.Contains(p.output, probeDone) || p.home == "" {
		t.Fatalf("%s's probe did not run to its end: %q; events %s", by.Tenant, p.output, eventsOf(evs))
	}
	return p
}

// readMarker returns what the trap's command wrote so far.
func readMarker(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(marker)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
