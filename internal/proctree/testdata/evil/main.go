// Command evil is an agent that does everything a process can do, without
// privileges, to outlive its run: it ignores SIGTERM, SIGINT and SIGHUP;
// it starts children that clear their environment (so carry no run
// cookie), leave its session and double-fork away from it; and one of them
// keeps forking, and each of its children takes over the forking when its
// parent is killed. Tests of the supervisor run it and then look for its
// processes by the marker that is in every one's command line.
//
//	evil agent MARKER DIR MODE EXPIRES
//
// DIR receives a file per role once that role runs; the agent prints
// {"text":"ready"} once the whole tree is up. MODE says what the agent then
// does: "exit" exits 0, "hang" waits for ever, "killreaper" kills its
// parent with SIGKILL (a reaper's one escape) and waits. Every process
// exits by itself at EXPIRES (Unix seconds), so that a failed test does
// not leave a tree forking on the machine for ever.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

type args struct {
	role, marker, dir, mode string
	expires                 time.Time
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: evil ROLE MARKER DIR MODE EXPIRES")
		os.Exit(2)
	}
	sec, err := strconv.ParseInt(os.Args[5], 10, 64)
	if err != nil {
		os.Exit(2)
	}
	a := args{role: os.Args[1], marker: os.Args[2], dir: os.Args[3], mode: os.Args[4], expires: time.Unix(sec, 0)}
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		time.Sleep(time.Until(a.expires))
		os.Exit(0)
	}()
	switch a.role {
	case "agent":
		agent(a)
	case "detacher":
		// Double fork: start the grandchild in a new session and go, so
		// that it is orphaned at once.
		if _, err := start(a, "grandchild"); err != nil {
			os.Exit(1)
		}
	case "grandchild":
		mark(a, "grandchild")
		select {}
	case "respawner":
		respawn(a)
	case "child":
		child(a)
	default:
		os.Exit(2)
	}
}

func agent(a args) {
	if _, err := start(a, "detacher"); err != nil {
		os.Exit(1)
	}
	if _, err := start(a, "respawner"); err != nil {
		os.Exit(1)
	}
	for _, role := range []string{"grandchild", "respawner", "child"} {
		for {
			if _, err := os.Stat(filepath.Join(a.dir, role)); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	fmt.Println(`{"text":"ready"}`)
	switch a.mode {
	case "exit":
		os.Exit(0)
	case "killreaper":
		_ = syscall.Kill(os.Getppid(), syscall.SIGKILL)
	}
	select {}
}

// respawn keeps two children alive, replacing each as it ends.
func respawn(a args) {
	mark(a, "respawner")
	alive := 0
	for {
		for alive < 2 {
			if _, err := start(a, "child"); err == nil {
				alive++
			} else {
				time.Sleep(10 * time.Millisecond)
				break
			}
		}
		if _, err := syscall.Wait4(-1, nil, 0, nil); err == nil {
			alive--
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// child lives a moment and exits, unless its parent, the respawner, is
// killed first: it then becomes the respawner.
func child(a args) {
	mark(a, "child")
	parent := os.Getppid()
	end := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(end) {
		if os.Getppid() != parent {
			respawn(a)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// start runs this program again in role, with an empty environment, in a
// session of its own, its output still the run's.
func start(a args, role string) (*os.Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, role, a.marker, a.dir, a.mode, strconv.FormatInt(a.expires.Unix(), 10))
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Not waited for by the caller: the respawner reaps with Wait4, the
	// others leave their children to whoever inherits them.
	return cmd.Process, nil
}

func mark(a args, role string) {
	f, err := os.OpenFile(filepath.Join(a.dir, role), os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		f.Close()
	}
}
