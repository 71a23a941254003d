package supervisor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// memSnapshots is runs.Snapshots in memory.
type memSnapshots struct {
	mu sync.Mutex
	m  map[runs.SnapshotKey][]byte
}

func (s *memSnapshots) PutSnapshot(_ context.Context, key runs.SnapshotKey, r io.Reader, max int64, _ map[string]string) (runs.SnapshotInfo, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return runs.SnapshotInfo{}, err
	}
	if int64(len(b)) > max {
		return runs.SnapshotInfo{}, runs.ErrSnapshotTooLarge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[runs.SnapshotKey][]byte{}
	}
	s.m[key] = b
	return runs.SnapshotInfo{Size: int64(len(b)), Modified: time.Now()}, nil
}

func (s *memSnapshots) OpenSnapshot(_ context.Context, key runs.SnapshotKey) (io.ReadCloser, runs.SnapshotInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return nil, runs.SnapshotInfo{}, runs.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), runs.SnapshotInfo{Size: int64(len(b))}, nil
}

func (s *memSnapshots) DeleteSnapshot(_ context.Context, key runs.SnapshotKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *memSnapshots) keys() []runs.SnapshotKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runs.SnapshotKey
	for k := range s.m {
		out = append(out, k)
	}
	return out
}

// TestDeleteRemovesTheRunsSnapshots: deleting a run removes what the
// cluster keeps of it (its directory and its patch), which would otherwise
// stay, counted against its tenant's bound, until retention, or for ever
// without one.
func TestDeleteRemovesTheRunsSnapshots(t *testing.T) {
	snaps := &memSnapshots{}
	h := newShellHarness(t, Config{Snapshots: snaps, TempRoot: t.TempDir()})
	r := h.runScript(t, runs.Spec{Prompt: `echo hi > out.txt && echo '{"text":"done"}'`})
	ctx := context.Background()
	if _, _, err := snaps.OpenSnapshot(ctx, workspaceKey(r)); err != nil {
		t.Fatalf("the run's directory was not kept: %v", err)
	}
	patch := runs.SnapshotKey{Tenant: r.Tenant, Kind: runs.SnapshotPatch, ID: r.ID}
	if _, err := snaps.PutSnapshot(ctx, patch, strings.NewReader("From 0 Mon Sep 17 00:00:00 2001\n"), 1<<10, nil); err != nil {
		t.Fatal(err)
	}
	other := h.runScript(t, runs.Spec{Prompt: `echo '{"text":"done"}'`})
	if err := h.sup.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	for _, k := range snaps.keys() {
		if k.ID == r.ID {
			t.Errorf("the deleted run's %s snapshot is still kept", k.Kind)
		}
	}
	if _, _, err := snaps.OpenSnapshot(ctx, workspaceKey(other)); errors.Is(err, runs.ErrNotFound) {
		t.Errorf("deleting run %s removed run %s's directory too", r.ID, other.ID)
	}
}
