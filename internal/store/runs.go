package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go/jetstream"
)

// Listing limits.
const (
	defaultLimit = 50
	maxLimit     = 500
	// fetchParallel bounds the run records a listing reads at once.
	fetchParallel = 16
)

// record is a run as stored: Run leaves Spec and Owner out of its JSON,
// because they are not part of the public run object, but the store keeps
// them.
type record struct {
	Run   runs.Run  `json:"run"`
	Spec  runs.Spec `json:"spec"`
	Owner string    `json:"owner,omitempty"`
}

func encodeRun(r runs.Run) ([]byte, error) {
	return json.Marshal(record{Run: r, Spec: r.Spec, Owner: r.Owner})
}

func decodeRun(data []byte) (runs.Run, error) {
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return runs.Run{}, err
	}
	r := rec.Run
	r.Spec, r.Owner = rec.Spec, rec.Owner
	return r, nil
}

// CreateRun stores a new run. It fails with ErrExists if the id is stored,
// and with runs.ErrInvalid if the id is malformed (see checkID). Transient
// failures are retried as AppendEvents does; a create whose ack was lost
// and that finds its own record on the retry succeeds.
func (s *Store) CreateRun(ctx context.Context, r runs.Run) error {
	if err := checkID(r.ID); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	data, err := encodeRun(r)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	err = s.ensure(ctx, "create run", func(ctx context.Context) error {
		rev, err := s.kv.Create(ctx, r.ID, data)
		if err == nil {
			s.wrote(r, rev)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		// From the leader, which refused the create: a copy behind it
		// (a direct get served by another node) may not have the
		// record yet, and "not found" would fail a create that only
		// lost its ack.
		cur, _, gerr := s.getRecordRev(ctx, r.ID)
		switch {
		case errors.Is(gerr, runs.ErrNotFound):
			return errCreateInFlight
		case gerr != nil:
			return gerr
		case bytes.Equal(cur, data):
			return nil // this create, its ack lost
		}
		return ErrExists
	})
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

// errConflict is an update that found the record changed by someone else.
var errConflict = errors.New("run record changed by another writer")

// UpdateRun replaces a stored run. It fails with runs.ErrNotFound if the run
// is not stored (never created, or expired), rather than bringing it back.
// Transient failures are retried as AppendEvents does, and the retry is
// safe: an update whose ack was lost is found stored on the next attempt
// (the record read back equals this one) and succeeds. The revision check
// still turns a second writer, which only a bug would make, into an error
// instead of a lost update.
func (s *Store) UpdateRun(ctx context.Context, r runs.Run) error {
	if err := checkID(r.ID); err != nil {
		return fmt.Errorf("update run: %w", err)
	}
	data, err := encodeRun(r)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	// The revision this store wrote last, if it did: an update on it
	// needs no read first, which is what a run's owner does at each step
	// of the run. Any failure goes the way below, which reads the record
	// and finds an update whose ack was lost, or another writer's.
	if rev, ok := s.wroteRev(r.ID); ok {
		// One attempt, of the store's timeout: ctx is the whole retry
		// budget, and a write whose ack is lost (to a leader that died)
		// must leave the rest of it to the reads and writes below.
		wctx, wcancel := context.WithTimeout(ctx, s.timeout)
		next, err := s.kv.Update(wctx, r.ID, data, rev)
		wcancel()
		if err == nil {
			s.wrote(r, next)
			return nil
		}
		s.forgetRev(r.ID)
	}
	var base uint64 // the revision this update replaces, once read
	err = s.ensure(ctx, "update run", func(ctx context.Context) error {
		// From the leader: a copy behind it could miss the record.
		cur, rev, err := s.getRecordRev(ctx, r.ID)
		if err != nil {
			return err
		}
		switch {
		case bytes.Equal(cur, data):
			s.wrote(r, rev)
			return nil // stored already: by an attempt whose ack was lost, or the same update twice
		case base == 0:
			base = rev
		case rev != base:
			return errConflict
		}
		next, err := s.kv.Update(ctx, r.ID, data, base)
		if err == nil {
			s.wrote(r, next)
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			// Either this update landed and its ack was lost, or
			// another writer's did: the next attempt reads which.
			return fmt.Errorf("%w: %w", errStale, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return nil
}

// GetRun returns the run, or an error wrapping runs.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (runs.Run, error) {
	if err := checkID(id); err != nil {
		return runs.Run{}, fmt.Errorf("get run: %w", err)
	}
	var data []byte
	err := s.retry(ctx, "get run", func(ctx context.Context) error {
		var err error
		data, err = s.getRecord(ctx, id)
		return err
	})
	if err != nil {
		return runs.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	r, err := decodeRun(data)
	if err != nil {
		return runs.Run{}, fmt.Errorf("get run %s: decode: %w", id, err)
	}
	return r, nil
}

func kvErr(err error) error {
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return runs.ErrNotFound
	}
	return err
}

// ListRuns returns runs matching f, newest first: ids are UUIDv7, so their
// lexical order is their creation order. Limit 0 means 50; a limit above
// 500 or below 0 is rejected with runs.ErrInvalid rather than silently cut,
// so that a client never mistakes a short page for its own page size. The
// cursor is the id of the previous page's last run.
//
// The listing reads every key of the bucket (keys only, no values) and then
// the values of the candidates, newest first, until the page is full: fine
// for tens of thousands of stored runs, and costly past that, most of all
// with a filter that matches few runs. A bigger store needs an index.
func (s *Store) ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	limit := f.Limit
	switch {
	case limit == 0:
		limit = defaultLimit
	case limit < 0 || limit > maxLimit:
		return runs.Page{}, runs.Invalid("limit", fmt.Sprintf("must be between 1 and %d", maxLimit))
	}
	if f.Status != "" && !f.Status.Valid() {
		return runs.Page{}, runs.Invalid("status", fmt.Sprintf("unknown status %q", f.Status))
	}
	if f.Cursor != "" && checkID(f.Cursor) != nil {
		return runs.Page{}, runs.Invalid("cursor", "malformed cursor")
	}

	var keys []string
	err := s.retry(ctx, "list runs", func(ctx context.Context) error {
		var err error
		keys, err = s.kv.Keys(ctx)
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return err
	})
	if err == nil && len(keys) == 0 {
		err = jetstream.ErrNoKeysFound
	}
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return runs.Page{Runs: []runs.Run{}}, nil
	}
	if err != nil {
		return runs.Page{}, fmt.Errorf("list runs: %w", err)
	}
	// Keys are sorted ascending; the candidates are those before the cursor.
	end := len(keys)
	if f.Cursor != "" {
		end, _ = slices.BinarySearch(keys, f.Cursor)
	}
	keys = keys[:end]
	slices.Reverse(keys)

	// One run past the page tells whether there is a next page, so the
	// last page never comes with a cursor to an empty one.
	want := limit + 1
	matched := make([]runs.Run, 0, want)
	for len(keys) > 0 && len(matched) < want {
		n := min(len(keys), max(want-len(matched), fetchParallel))
		got, err := s.fetchRuns(ctx, keys[:n])
		if err != nil {
			return runs.Page{}, fmt.Errorf("list runs: %w", err)
		}
		keys = keys[n:]
		for _, r := range got {
			if r == nil || !f.AllTenants && r.Tenant != f.Tenant || (f.Status != "" && r.Status != f.Status) || (f.Agent != "" && r.Agent != f.Agent) {
				continue
			}
			matched = append(matched, *r)
			if len(matched) == want {
				break
			}
		}
	}
	page := runs.Page{Runs: matched}
	if len(matched) > limit {
		page.Runs = matched[:limit]
		page.NextCursor = page.Runs[limit-1].ID
	}
	return page, nil
}

// fetchRuns reads the runs of ids, in order, at most fetchParallel at once.
// An entry is nil when its run expired after the keys were listed.
func (s *Store) fetchRuns(ctx context.Context, ids []string) ([]*runs.Run, error) {
	out := make([]*runs.Run, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, fetchParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := s.GetRun(ctx, id)
			switch {
			case errors.Is(err, runs.ErrNotFound):
			case err != nil:
				errs[i] = err
			default:
				out[i] = &r
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// getRecord reads a run's record from the runs bucket's leader. The KV
// client reads with direct gets, which any copy answers, so a replica
// reading a run that another replica has just created could be told it
// does not exist; the stream's message API is answered by the leader only.
func (s *Store) getRecord(ctx context.Context, id string) ([]byte, error) {
	data, _, err := s.getRecordRev(ctx, id)
	return data, err
}

// getRecordRev is getRecord with the record's revision (its sequence in
// the bucket's stream), for a compare-and-set on what the leader has.
func (s *Store) getRecordRev(ctx context.Context, id string) ([]byte, uint64, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": "$KV." + runsBucket + "." + id})
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	reply, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+runsBucket, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message struct {
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
			Seq    uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("malformed reply %q: %w", reply.Data, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, 0, runs.ErrNotFound
		}
		return nil, 0, resp.Error
	}
	// A deleted or purged key leaves a marker with an empty body.
	if bytes.Contains(resp.Message.Header, []byte("KV-Operation")) {
		return nil, 0, runs.ErrNotFound
	}
	return resp.Message.Data, resp.Message.Seq, nil
}

// wrote notes rev as the revision of r's record this store wrote last, for
// the next UpdateRun; a run that has ended is let go, since its owner
// writes it no more (an update after that reads first, as it did).
func (s *Store) wrote(r runs.Run, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Status.Terminal() {
		delete(s.revs, r.ID)
		return
	}
	if len(s.revs) >= maxCachedRuns {
		clear(s.revs)
	}
	s.revs[r.ID] = rev
}

func (s *Store) wroteRev(runID string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev, ok := s.revs[runID]
	return rev, ok
}

func (s *Store) forgetRev(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.revs, runID)
}
