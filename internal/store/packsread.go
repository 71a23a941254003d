package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errNoPack is a pack that is not stored: not written yet, abandoned,
// purged or expired.
var errNoPack = errors.New("no pack")

// directGetSubject is the JetStream API's direct get of the packs stream:
// any copy of the stream answers it, with the stored message as it is
// (headers and body), rather than in JSON with the body base64-encoded as
// the leader's message API does.
const directGetSubject = "$JS.API.DIRECT.GET." + packsStream

// The headers of a NATS status reply (a direct get of nothing is one).
const (
	statusHeader      = "Status"
	descriptionHeader = "Description"
)

// getPack reads pack k of the run on nc and decodes it: errNoPack when it
// is not stored (or not yet on the copy that answered), errBadPack when it
// is not one of the run's packs for k. Its events' JSON points into the
// message's body.
func getPack(ctx context.Context, nc *nats.Conn, runID string, k uint64, names typeNames) ([]runs.StoredEvent, error) {
	subject := packSubject(runID, k)
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	reply, err := nc.RequestWithContext(ctx, directGetSubject, req)
	if err != nil {
		return nil, err
	}
	data, err := parseDirectGet(reply, subject)
	if err != nil {
		return nil, err
	}
	evs, err := decodePack(data, names, make([]runs.StoredEvent, 0, packEvents))
	if err != nil {
		return nil, err
	}
	if evs[0].Seq != k*packEvents+1 || evs[len(evs)-1].Seq > (k+1)*packEvents {
		return nil, fmt.Errorf("%w: events %d..%d in pack %d", errBadPack, evs[0].Seq, evs[len(evs)-1].Seq, k)
	}
	return evs, nil
}

// parseDirectGet returns the body of the message a direct get of subject
// answered: errNoPack for a "404 Message Not Found", an error for any
// other status, and errBadPack for a message that is not subject's.
func parseDirectGet(reply *nats.Msg, subject string) ([]byte, error) {
	if status := reply.Header.Get(statusHeader); status != "" {
		if status == "404" {
			return nil, errNoPack
		}
		return nil, fmt.Errorf("direct get of %s: status %s %s", subject, status, reply.Header.Get(descriptionHeader))
	}
	if got := reply.Header.Get(jetstream.SubjectHeader); got != subject {
		return nil, fmt.Errorf("%w: direct get of %s answered with the message of %q", errBadPack, subject, got)
	}
	return reply.Data, nil
}

// packPrefetchBytes bounds the packs a cursor fetches ahead of the one it
// delivers, by the size of the last one read, and maxPacksAhead their
// number: a get waits mostly on the server (a pack's block loaded, its
// answer encoded), so a few in flight at once go several times faster
// than one after another, and a cursor holds about what its pulls held
// before packs (1 MiB) and at most maxPacksAhead+1 packs of 512 KiB.
const (
	packPrefetchBytes = 1 << 20
	maxPacksAhead     = 4
)

// packGot is a get of one pack, in flight or done.
type packGot struct {
	events []runs.StoredEvent
	err    error
	done   chan struct{}
}

// replayPacks delivers the events after seq after of pack, which holds
// after+1, and of the packs that follow it, up to the first pack missing,
// unreadable or partial, and returns the last seq delivered and its type.
// The packs that follow are fetched while the reader takes this one's
// events, a few at once (packPrefetchBytes); those fetched past the first
// missing one are dropped.
func (c *cursor) replayPacks(ctx context.Context, after uint64, pack []runs.StoredEvent) (uint64, runs.EventType, error) {
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	var ahead []*packGot // in order of their packs
	next := packOf(pack[len(pack)-1].Seq) + 1
	last := after
	var lastType runs.EventType
	for {
		full := pack[len(pack)-1].Seq == (packOf(pack[0].Seq)+1)*packEvents
		if full {
			size := 0
			for _, ev := range pack {
				size += len(ev.JSON)
			}
			for len(ahead) < min(maxPacksAhead, max(1, packPrefetchBytes/max(size, 1))) {
				g := &packGot{done: make(chan struct{})}
				ahead = append(ahead, g)
				wg.Add(1)
				go func(k uint64) {
					defer wg.Done()
					defer close(g.done)
					g.events, g.err = c.getPack(fctx, k)
				}(next)
				next++
			}
		}
		for _, ev := range pack {
			if ev.Seq <= last {
				continue
			}
			if err := c.deliver(ctx, ev); err != nil {
				return last, lastType, err
			}
			last, lastType = ev.Seq, ev.Type
		}
		if !full || len(ahead) == 0 {
			return last, lastType, nil
		}
		g := ahead[0]
		ahead = ahead[1:]
		select {
		case <-g.done:
		case <-ctx.Done():
			return last, lastType, errCursorClosed
		}
		if g.err != nil {
			return last, lastType, nil
		}
		pack = g.events
	}
}
