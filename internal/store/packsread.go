package store

import (
	"bytes"
	"context"
	"encoding/base64"
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

// msgGetSubject is the JetStream API's get of one stored message. It is
// answered by the stream's leader (the stream has no direct gets: a
// follower may lag), in JSON with the message base64-encoded.
const msgGetSubject = "$JS.API.STREAM.MSG.GET." + eventsStream

// getPack reads pack k of the run on nc and decodes it: errNoPack when it
// is not stored, errBadPack when it is not one of the run's packs for k.
// Its events' JSON points into one buffer of its own.
func getPack(ctx context.Context, nc *nats.Conn, runID string, k uint64, names typeNames) ([]runs.StoredEvent, error) {
	subject := packSubject(runID, k)
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	reply, err := nc.RequestWithContext(ctx, msgGetSubject, req)
	if err != nil {
		return nil, err
	}
	data, err := parseMsgGet(reply.Data, subject)
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

// dataKey starts the one large value of a get's answer, the message's
// payload.
var dataKey = []byte(`"data":"`)

// parseMsgGet returns the payload of the message a get of subject answered,
// errNoPack when there is none. encoding/json reads a 512 KiB payload at
// about 100 MB/s, slower than a replay's goal, so the payload is cut out of
// the answer and base64-decoded directly (about 1 GB/s), and encoding/json
// reads only the rest. Base64 holds neither quotes nor backslashes, so the
// payload ends at the next quote; an answer that does not read back as the
// message of subject is an error.
func parseMsgGet(answer []byte, subject string) ([]byte, error) {
	rest := answer
	var enc []byte
	if i := bytes.Index(answer, dataKey); i >= 0 {
		start := i + len(dataKey)
		end := bytes.IndexByte(answer[start:], '"')
		if end < 0 {
			return nil, fmt.Errorf("%w: unterminated payload", errBadPack)
		}
		enc = answer[start : start+end]
		rest = make([]byte, 0, len(answer)-len(enc))
		rest = append(rest, answer[:start]...)
		rest = append(rest, answer[start+end:]...)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string `json:"subject"`
			Data    string `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(rest, &resp); err != nil {
		return nil, fmt.Errorf("%w: answer: %w", errBadPack, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, errNoPack
		}
		return nil, resp.Error
	}
	if resp.Message == nil || resp.Message.Subject != subject || resp.Message.Data != "" {
		// The cut payload left "" in its place; anything else means
		// the key was not the message's.
		return nil, fmt.Errorf("%w: answer is not the message of %s", errBadPack, subject)
	}
	data := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(data, enc)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %w", errBadPack, err)
	}
	return data[:n], nil
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
