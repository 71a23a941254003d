// Package probe finds an agent's CLI and reads its version, once, at the
// gateway's start, and compares it with the version its adapter was
// verified on.
package probe

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// probeTimeout bounds the version probe of one CLI. A Node CLI's --version
// loads the whole CLI first: well under a second on a quiet machine, but
// more than 15 s was seen (copilot, opencode) on a 2-core machine running
// several test suites, and a probe cut short reports a working CLI as
// unrecognized. A CLI that hangs delays the start by this much at most
// (the agents are probed together).
const probeTimeout = 45 * time.Second

// Probe finds an agent's CLI and asks it for its version, once, at startup.
// bin is a path, or a name looked up on the PATH in env. The result says
// how the installed version compares with the one the adapter was verified
// on, with an advisory for a person.
func Probe(ctx context.Context, a runs.Adapter, bin string, env []string) runs.AgentInfo {
	return With(ctx, a, bin, env, RunVersion)
}

// VersionOutput runs a CLI's version command, path with args in env, and
// returns what it printed on stdout.
type VersionOutput func(ctx context.Context, path string, args, env []string) ([]byte, error)

// RunVersion is the VersionOutput that starts the CLI, bounded by
// probeTimeout.
func RunVersion(ctx context.Context, path string, args, env []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.WaitDelay = time.Second
	return cmd.Output()
}

// With is Probe with the version command run by version.
func With(ctx context.Context, a runs.Adapter, bin string, env []string, version VersionOutput) runs.AgentInfo {
	d := a.Describe()
	if d.DisplayName == "" {
		d.DisplayName = a.Name()
	}
	info := runs.AgentInfo{
		Name: a.Name(), Aliases: d.Aliases, VerifiedVersion: d.VerifiedVersion, Capabilities: runs.Capabilities(d),
		Permissions: d.Permissions, Compatibility: runs.CompatMissing,
		Source: d.Source, Reports: d.Reporting(),
	}
	if info.Source == "" {
		info.Source = runs.SourceBuiltin
	}
	if slices.Contains(d.Fields, runs.FieldInteractive) || slices.Contains(d.Fields, runs.FieldApprovals) {
		in := d.Interaction
		info.Interaction = &in
	}
	if bin == "" {
		bin = d.DefaultBin
	}
	path, err := LookPathIn(bin, env)
	if err != nil {
		info.Advisory = fmt.Sprintf("%s CLI not found (%s); install it with `%s`, or set its binary path", d.DisplayName, bin, d.InstallCommand)
		return info
	}
	if r, ok := a.(runs.BinaryResolver); ok {
		native, err := r.ResolveBinary(path)
		if err != nil {
			info.Compatibility = runs.CompatUnrecognized
			info.Advisory = fmt.Sprintf("%s found at %s, but %v; reinstall it with `%s`", d.DisplayName, path, err, d.InstallCommand)
			return info
		}
		path = native
	}
	info.Installed, info.Path = true, path
	out, err := version(ctx, path, d.VersionArgs, env)
	if err != nil {
		info.Compatibility = runs.CompatUnrecognized
		info.Advisory = fmt.Sprintf("`%s %s` failed (%v); runs may fail", path, strings.Join(d.VersionArgs, " "), err)
		return info
	}
	v, err := a.ParseVersion(out)
	if err != nil {
		info.Compatibility = runs.CompatUnrecognized
		info.Advisory = fmt.Sprintf("could not read the version of %s (%v); verified on %s", path, err, d.VerifiedVersion)
		return info
	}
	info.Version = v
	if d.VerifiedVersion == "" {
		info.Compatibility = runs.CompatUnverified
		info.Advisory = fmt.Sprintf("%s %s is installed; no version of it is verified with this gateway", d.DisplayName, v)
		return info
	}
	info.Compatibility = Compatibility(v, d.VerifiedVersion)
	switch info.Compatibility {
	case runs.CompatVerified:
		info.Advisory = fmt.Sprintf("%s %s is the verified version", d.DisplayName, v)
	case runs.CompatNewer:
		info.Advisory = fmt.Sprintf("%s %s is newer than the verified %s: output it adds is reported as agent.unparsed, and a flag it rejects fails runs with flag_rejected", d.DisplayName, v, d.VerifiedVersion)
	case runs.CompatOlder:
		info.Advisory = fmt.Sprintf("%s %s is older than the verified %s; upgrade with `%s`", d.DisplayName, v, d.VerifiedVersion, d.InstallCommand)
	default:
		info.Advisory = fmt.Sprintf("%s reports version %q, which is not a version this gateway can compare with the verified %s", d.DisplayName, v, d.VerifiedVersion)
	}
	return info
}

// LookPathIn resolves bin like exec.LookPath, but on the PATH of env (an
// agent's environment) rather than the gateway's.
func LookPathIn(bin string, env []string) (string, error) {
	if strings.Contains(bin, "/") {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", err
		}
		return filepath.Abs(p)
	}
	for _, kv := range env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(dirs) {
				if dir == "" {
					continue
				}
				if p, err := exec.LookPath(filepath.Join(dir, bin)); err == nil {
					return filepath.Abs(p)
				}
			}
		}
	}
	return "", exec.ErrNotFound
}

// Compatibility compares an installed version with the verified one, both
// dotted numbers ("2.1.332"); a suffix after '-' or ' ' is ignored.
func Compatibility(installed, verified string) string {
	a, okA := parseVersion(installed)
	b, okB := parseVersion(verified)
	if !okA || !okB {
		return runs.CompatUnrecognized
	}
	for i := range max(len(a), len(b)) {
		x, y := at(a, i), at(b, i)
		switch {
		case x > y:
			return runs.CompatNewer
		case x < y:
			return runs.CompatOlder
		}
	}
	return runs.CompatVerified
}

func at(v []int, i int) int {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func parseVersion(s string) ([]int, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "- +"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 4 {
		return nil, false
	}
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}
