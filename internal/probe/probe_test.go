package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestCompatibility(t *testing.T) {
	for _, tc := range []struct{ in, verified, want string }{
		{"2.1.332", "2.1.332", runs.CompatVerified},
		{"2.1.400", "2.1.332", runs.CompatNewer},
		{"2.2.0", "2.1.332", runs.CompatNewer},
		{"2.1.9", "2.1.332", runs.CompatOlder},
		{"v2.1.332-beta", "2.1.332", runs.CompatVerified},
		{"banana", "2.1.332", runs.CompatUnrecognized},
	} {
		if got := Compatibility(tc.in, tc.verified); got != tc.want {
			t.Errorf("Compatibility(%q, %q) = %s, want %s", tc.in, tc.verified, got, tc.want)
		}
	}
}

// fakeAdapter is an agent whose version output is "fake <version>".
type fakeAdapter struct{ verified string }

func (fakeAdapter) Name() string { return "fake" }
func (a fakeAdapter) Describe() runs.Description {
	return runs.Description{Name: "fake", DisplayName: "Fake", DefaultBin: "fake-cli", VerifiedVersion: a.verified,
		VersionArgs: []string{"--version"}, InstallCommand: "install fake"}
}
func (fakeAdapter) ParseVersion(out []byte) (string, error) {
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "fake ")
	if !ok {
		return "", errors.New("no version")
	}
	return v, nil
}
func (fakeAdapter) Command(runs.Invocation) (runs.Command, error) { return runs.Command{}, nil }
func (fakeAdapter) NewDecoder(runs.Invocation) runs.Decoder       { return nil }

// pathWithCLI is an environment whose PATH holds an executable fake-cli.
func pathWithCLI(t *testing.T) (env []string, cli string) {
	dir := t.TempDir()
	cli = filepath.Join(dir, "fake-cli")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + dir}, cli
}

func TestWithComparesTheVersionTheCLIPrints(t *testing.T) {
	env, cli := pathWithCLI(t)
	for _, tc := range []struct {
		printed, want string
		fails         bool
	}{
		{printed: "fake 1.2.3\n", want: runs.CompatVerified},
		{printed: "fake 1.3.0\n", want: runs.CompatNewer},
		{printed: "fake 1.0.0\n", want: runs.CompatOlder},
		{printed: "what?\n", want: runs.CompatUnrecognized},
		{fails: true, want: runs.CompatUnrecognized},
	} {
		var ran string
		version := func(_ context.Context, path string, args, _ []string) ([]byte, error) {
			ran = path + " " + strings.Join(args, " ")
			if tc.fails {
				return nil, errors.New("exit status 1")
			}
			return []byte(tc.printed), nil
		}
		info := With(context.Background(), fakeAdapter{verified: "1.2.3"}, "", env, version)
		if info.Compatibility != tc.want || !info.Installed || info.Path != cli || info.Advisory == "" {
			t.Errorf("printed %q: %+v, want %s, installed at %s, with an advisory", tc.printed, info, tc.want, cli)
		}
		if ran != cli+" --version" {
			t.Errorf("ran %q, want %q", ran, cli+" --version")
		}
	}
}

// A CLI no version of which was verified (an agents-file entry without
// verified_version) is usable: its version is read and compared with
// nothing, rather than called unrecognized.
func TestWithLeavesAnUnverifiedCLIUsable(t *testing.T) {
	env, _ := pathWithCLI(t)
	info := With(context.Background(), fakeAdapter{}, "", env,
		func(context.Context, string, []string, []string) ([]byte, error) { return []byte("fake 0.9.1\n"), nil })
	if info.Compatibility != runs.CompatUnverified || info.Version != "0.9.1" || !strings.Contains(info.Advisory, "no version of it is verified") {
		t.Errorf("%+v, want unverified 0.9.1 with an advisory saying so", info)
	}
	info = With(context.Background(), fakeAdapter{}, "", env,
		func(context.Context, string, []string, []string) ([]byte, error) { return []byte("what?"), nil })
	if info.Compatibility != runs.CompatUnrecognized {
		t.Errorf("an unreadable version: %+v, want unrecognized", info)
	}
}

func TestWithReportsAMissingCLIAndHowToInstallIt(t *testing.T) {
	info := With(context.Background(), fakeAdapter{verified: "1.2.3"}, "", []string{"PATH=" + t.TempDir()},
		func(context.Context, string, []string, []string) ([]byte, error) {
			t.Fatal("a CLI that is not there was run")
			return nil, nil
		})
	if info.Installed || info.Compatibility != runs.CompatMissing || !strings.Contains(info.Advisory, "install fake") {
		t.Fatalf("%+v, want missing with the install command", info)
	}
}

func TestLookPathInUsesTheAgentsPATH(t *testing.T) {
	env, cli := pathWithCLI(t)
	if got, err := LookPathIn("fake-cli", env); err != nil || got != cli {
		t.Fatalf("LookPathIn = %q, %v, want %s", got, err, cli)
	}
	if _, err := LookPathIn("fake-cli", []string{"PATH=" + t.TempDir()}); err == nil {
		t.Fatal("found a CLI that is not on the agent's PATH")
	}
	if got, err := LookPathIn(cli, nil); err != nil || got != cli {
		t.Fatalf("LookPathIn(a path) = %q, %v, want %s", got, err, cli)
	}
}
