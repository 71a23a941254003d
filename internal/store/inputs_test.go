package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestInputReachesItsReplicaAndItsAnswerComesBack(t *testing.T) {
	e := newEnv(t)
	other, err := Open(ctx(t), e.connect(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	listen, stop := context.WithCancel(ctx(t))
	defer stop()
	mine, err := e.s.Inputs(listen, "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Inputs(listen, "replica.b") // a replica id that is not a subject token
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t)
	go func() {
		req := <-theirs
		req.Reply(append([]byte("got "), req.Body...))
	}()
	reply, err := e.s.SendInput(ctx(t), "replica.b", id, []byte("allow"))
	if err != nil {
		t.Fatal(err)
	}
	if string(reply) != "got allow" {
		t.Fatalf("reply %q", reply)
	}
	select {
	case req := <-mine:
		t.Fatalf("input for replica.b reached replica-a: %+v", req)
	default:
	}
	// Nobody listens for a replica that is gone.
	_, err = other.SendInput(ctx(t), "gone", id, []byte("x"))
	if !errors.Is(err, runs.ErrOwnerUnavailable) {
		t.Fatalf("input for a gone replica: %v", err)
	}
	if _, err := other.SendInput(ctx(t), "replica-a", "not a run id", nil); err == nil {
		t.Fatal("a bad run id was sent")
	}
	stop()
	select {
	case _, ok := <-mine:
		if ok {
			t.Fatal("input after ctx ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after ctx ended")
	}
}

func TestInputToAReplicaThatNeverAnswersTimesOut(t *testing.T) {
	e := newEnv(t)
	listen, stop := context.WithCancel(ctx(t))
	defer stop()
	reqs, err := e.s.Inputs(listen, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond) // the deadline is what is tested
	defer cancel()
	_, err = e.s.SendInput(short, "stuck", newID(t), []byte("x"))
	if !errors.Is(err, runs.ErrOwnerUnavailable) {
		t.Fatalf("unanswered input: %v", err)
	}
	(<-reqs).Reply(nil) // answered too late; must not panic
}
