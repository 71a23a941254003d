package runstest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCLI writes a script that logs each start to a file and prints out,
// or fails when out is empty.
func fakeCLI(t *testing.T, dir, out string) (bin, starts string) {
	t.Helper()
	bin, starts = filepath.Join(dir, "cli"), filepath.Join(dir, "starts")
	body := "#!/bin/sh\necho start >> " + starts + "\n"
	if out == "" {
		body += "exit 1\n"
	} else {
		body += "echo " + out + "\n"
	}
	if err := os.WriteFile(bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, starts
}

func countStarts(t *testing.T, starts string) int {
	t.Helper()
	b, _ := os.ReadFile(starts)
	return strings.Count(string(b), "start")
}

func TestVersionCacheStartsEachBinaryOnce(t *testing.T) {
	dir := t.TempDir()
	bin, starts := fakeCLI(t, dir, "1.2.3")
	var c VersionCache
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			out, err := c.Output(context.Background(), bin, []string{"--version"}, nil)
			if err != nil || strings.TrimSpace(string(out)) != "1.2.3" {
				t.Errorf("Output = %q, %v", out, err)
			}
		})
	}
	wg.Wait()
	if n := countStarts(t, starts); n != 1 || c.Starts() != 1 {
		t.Fatalf("4 probes of one binary started it %d times (cache counted %d), want 1", n, c.Starts())
	}
	if _, err := c.Output(context.Background(), bin, []string{"version"}, nil); err != nil || countStarts(t, starts) != 2 {
		t.Fatalf("other arguments: %v, %d starts, want a second start", err, countStarts(t, starts))
	}
	// The same path written anew (another size) is another binary.
	fakeCLI(t, dir, "1.2.30")
	out, err := c.Output(context.Background(), bin, []string{"--version"}, nil)
	if err != nil || strings.TrimSpace(string(out)) != "1.2.30" {
		t.Fatalf("after the binary changed: %q, %v; want the new version", out, err)
	}
}

func TestVersionCacheKeepsNoFailure(t *testing.T) {
	bin, starts := fakeCLI(t, t.TempDir(), "")
	var c VersionCache
	for range 2 {
		if _, err := c.Output(context.Background(), bin, []string{"--version"}, nil); err == nil {
			t.Fatal("a failing version command succeeded")
		}
	}
	if n := countStarts(t, starts); n != 2 {
		t.Fatalf("a failed probe was kept: %d starts for 2 probes, want 2", n)
	}
}

func TestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ds Deadlines
		struck := ds.Arm("a", time.Hour)
		timed := ds.Arm("b", time.Minute)
		ds.Strike("c") // before its run starts
		early := ds.Arm("c", time.Hour)
		ds.Strike("a")
		synctest.Wait()
		for name, ch := range map[string]<-chan time.Time{"struck": struck, "struck early": early} {
			select {
			case <-ch:
			default:
				t.Errorf("%s: the deadline did not strike", name)
			}
		}
		select {
		case <-timed:
			t.Fatal("a deadline of a minute struck at once")
		default:
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-timed:
		default:
			t.Fatal("a deadline left alone did not strike after its timeout")
		}
	})
}
