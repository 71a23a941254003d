package mockhttp

import (
	"testing"
	"time"
)

func TestFirstRequestNotesOnlyTheFirst(t *testing.T) {
	f := NewFirstRequest[int, int](Func[int, int](func(req *int) int { return *req * 2 }))
	if !f.At().IsZero() {
		t.Fatalf("At = %v before any request, want zero", f.At())
	}
	before := time.Now()
	one, two := 1, 2
	if got := f.Respond(&one); got != 2 {
		t.Fatalf("Respond(1) = %d, want the scenario's 2", got)
	}
	first := f.At()
	if first.Before(before) || first.After(time.Now()) {
		t.Fatalf("At = %v, want the time of the first request", first)
	}
	if got := f.Respond(&two); got != 4 {
		t.Fatalf("Respond(2) = %d, want the scenario's 4", got)
	}
	if f.At() != first {
		t.Fatalf("At moved to %v with the second request, want %v", f.At(), first)
	}
}
