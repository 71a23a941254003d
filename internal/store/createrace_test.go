package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/natstest"
	"github.com/agentgate/agentgate/internal/runs"
)

// openStoresOnCluster opens n stores on a 3-node cluster with R3 streams,
// store i on node i%3, as replicas behind a load balancer would be.
func openStoresOnCluster(t *testing.T, n int) []*Store {
	t.Helper()
	c := natstest.Start(t, 3)
	octx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stores := make([]*Store, n)
	for i := range n {
		s, err := Open(octx, clusterConn(t, c, c.URL(i%c.Size())), Options{Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	return stores
}

// onAll runs f(i, store) on every store at once, as often as rounds asks,
// and returns the problems f reports.
func onAll(stores []*Store, rounds int, f func(round, i int, s *Store) string) []string {
	var problems []string
	for round := range rounds {
		var wg sync.WaitGroup
		results := make([]string, len(stores))
		for i, s := range stores {
			wg.Go(func() { results[i] = f(round, i, s) })
		}
		wg.Wait()
		for _, p := range results {
			if p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems
}

// Creates of one key at once from every node of a cluster: the leader
// refuses all but one while that one is proposed and not yet applied, so a
// read right after a refusal can find nothing there. Each create must
// still end as made or as "exists", and the key's readers must get the
// record that was made, never "not found".
func TestConcurrentCreatesOfOneKeyOnCluster(t *testing.T) {
	stores := openStoresOnCluster(t, 6)
	const rounds = 40
	bg := context.Background()

	t.Run("runs", func(t *testing.T) {
		made := make([]int, rounds)
		var mu sync.Mutex
		ids := make([]string, rounds)
		for i := range ids {
			ids[i] = newID(t)
		}
		problems := onAll(stores, rounds, func(round, i int, s *Store) string {
			r := runs.Run{ID: ids[round], Agent: "claude", Status: runs.Queued, Metadata: map[string]string{"writer": fmt.Sprint(i)}}
			err := s.CreateRun(bg, r)
			switch {
			case err == nil:
				mu.Lock()
				made[round]++
				mu.Unlock()
			case errors.Is(err, ErrExists):
			default:
				return fmt.Sprintf("round %d, store %d: %v", round, i, err)
			}
			return ""
		})
		for round, n := range made {
			if n != 1 {
				problems = append(problems, fmt.Sprintf("round %d: %d creates succeeded, want 1", round, n))
			}
		}
		report(t, problems)
	})

	t.Run("idempotency keys", func(t *testing.T) {
		fresh := make([]int, rounds)
		got := make([][]string, rounds)
		var mu sync.Mutex
		problems := onAll(stores, rounds, func(round, i int, s *Store) string {
			rec := runs.IdempotencyRecord{RunID: fmt.Sprintf("run-%d-%d", round, i), RequestHash: "h"}
			g, ok, err := s.ClaimIdempotencyKey(bg, fmt.Sprintf("key-%d", round), rec)
			if err != nil {
				return fmt.Sprintf("round %d, store %d: %v", round, i, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				fresh[round]++
			}
			got[round] = append(got[round], g.RunID)
			return ""
		})
		for round := range rounds {
			if fresh[round] != 1 {
				problems = append(problems, fmt.Sprintf("round %d: %d claims were fresh, want 1", round, fresh[round]))
			}
			for _, id := range got[round] {
				if id != got[round][0] {
					problems = append(problems, fmt.Sprintf("round %d: claims returned runs %v, want one", round, got[round]))
					break
				}
			}
		}
		report(t, problems)
	})
}

// Replicas starting at once on a cluster agree on one stream token
// secret, however close together their creates land.
func TestStreamTokenSecretOnCluster(t *testing.T) {
	stores := openStoresOnCluster(t, 6)
	secrets := make([][]byte, len(stores))
	problems := onAll(stores, 1, func(_, i int, s *Store) string {
		b, err := s.StreamTokenSecret(context.Background())
		if err != nil {
			return fmt.Sprintf("store %d: %v", i, err)
		}
		secrets[i] = b
		return ""
	})
	for i, b := range secrets {
		if len(b) < 32 || !bytes.Equal(b, secrets[0]) {
			problems = append(problems, fmt.Sprintf("store %d has secret %x, store 0 %x", i, b, secrets[0]))
		}
	}
	report(t, problems)
}

// report fails t with every problem found.
func report(t *testing.T, problems []string) {
	t.Helper()
	if len(problems) > 0 {
		t.Fatalf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
