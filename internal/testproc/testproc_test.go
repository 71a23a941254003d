package testproc

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

const exitEnv = "TESTPROC_TEST_EXIT"

func TestMain(m *testing.M) {
	switch os.Getenv(exitEnv) {
	case "0":
		Exit(0)
	case "3":
		Exit(3)
	}
	os.Exit(m.Run())
}

// TestExitCode: the helper's code is its process's exit status.
func TestExitCode(t *testing.T) {
	for _, code := range []int{0, 3} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), exitEnv+"="+map[int]string{0: "0", 3: "3"}[code])
		err := cmd.Run()
		got := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			got = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got != code {
			t.Errorf("exit status %d, want %d", got, code)
		}
	}
}
