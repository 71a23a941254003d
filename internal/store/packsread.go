package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

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
