package proctree

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// TestReaperConstants: the light reaper's C (lightreaper/reaper.c)
// speaks the same protocol as Reap: the same argument and flag, the same
// cookie, the same death signal, and it gives up on the same terms. A
// constant changed on one side only would make the gateway start reapers
// that do not know it, or that kill another run's processes.
func TestReaperConstants(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "lightreaper", "reaper.c"))
	if err != nil {
		t.Fatal(err)
	}
	defines := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([A-Z_]+) (.+)$`).FindAllSubmatch(src, -1) {
		defines[string(m[1])] = string(m[2])
	}
	signals := map[string]syscall.Signal{"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM}
	for name, want := range map[string]string{
		"REAPER_ARG":      strconv.Quote(ReaperArg),
		"PARENT_FLAG":     strconv.Quote(parentFlag),
		"NICE_FLAG":       strconv.Quote(niceFlag),
		"MAX_NICE":        strconv.Itoa(MaxNice),
		"COOKIE_VAR":      strconv.Quote(CookieVar),
		"STOP_TRIES":      strconv.Itoa(stopTries),
		"GIVE_UP_SECONDS": strconv.Itoa(int(reaperGiveUp.Seconds())),
	} {
		if got := defines[name]; got != want {
			t.Errorf("reaper.c: #define %s %s, want %s", name, got, want)
		}
	}
	if sig, ok := signals[defines["DEATH_SIGNAL"]]; !ok || sig != DeathSignal {
		t.Errorf("reaper.c: #define DEATH_SIGNAL %s, want %v", defines["DEATH_SIGNAL"], DeathSignal)
	}
}
