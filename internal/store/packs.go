package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Packs: a run's events stored many to a message, to replay them fast.
//
// JetStream delivers a consumer one message at a time, and the log of a run
// that wrote at a human pace is mostly messages of one or a few events
// (logmsgs.go), which bounds a replay to a few hundred thousand events a
// second whatever the reader does. So besides the log, the store writes
// pack k of a run: one message on packsPrefix.<run_id>.<k> holding the
// run's events k*packEvents+1 .. (k+1)*packEvents. A reader finds the pack
// holding any seq with one get by subject. A pack is only an index: a
// missing, abandoned or unreadable one costs its range a replay through
// the log, never an event.

// packEvents is how many events one pack holds: a replay costs one get per
// packEvents events, and a writer buffers at most that many per run.
const packEvents = 512

// maxPackBytes bounds a pack's encoded size, well under the server's
// largest message (1 MiB by default): a pack that would pass it is
// abandoned, and its range is replayed from the log.
const maxPackBytes = 512 << 10

// maxPackRuns bounds the runs a store builds packs for at once, and
// maxPackMemory the bytes of all their buffers: past the first, the run
// appended least recently loses its buffer (and its pack in progress); past
// the second, the pack being extended is abandoned.
const (
	maxPackRuns   = 1024
	maxPackMemory = 32 << 20
)

// packVersion is the first byte of every pack: a reader skips (replays
// from the events) a pack of a version it does not know.
const packVersion = 1

// Headers of a pack message, for people reading the stream: readers use
// the pack's own framing.
const (
	headerPackFirst = "Agentgate-Pack-First"
	headerPackLast  = "Agentgate-Pack-Last"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func packSubject(runID string, k uint64) string {
	return packsPrefix + runID + "." + strconv.FormatUint(k, 10)
}

// packsFilter is the subject of all of a run's packs, for a purge, and
// legacyPacksFilter that of those an earlier version kept in the events
// stream.
func packsFilter(runID string) string       { return packsPrefix + runID + ".*" }
func legacyPacksFilter(runID string) string { return legacyPacksPrefix + runID + ".*" }

// packOf is the index of the pack holding seq (≥ 1).
func packOf(seq uint64) uint64 { return (seq - 1) / packEvents }

// A pack's framing:
//
//	version byte (packVersion)
//	uvarint  seq of its first event
//	per event, in seq order, each seq one more than the one before:
//	  uvarint len(type), type, uvarint len(json), json
//	4 bytes  CRC-32C (Castagnoli) of all that precedes, big-endian
//
// The checksum catches bytes damaged at rest or on the way, which the
// structure alone would often read as other, valid events.

// startPack begins the encoding of a pack whose first event is first.
func startPack(buf []byte, first uint64) []byte {
	buf = append(buf[:0], packVersion)
	return binary.AppendUvarint(buf, first)
}

// appendPackEvent adds ev to an encoding begun by startPack.
func appendPackEvent(buf []byte, ev runs.StoredEvent) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(ev.Type)))
	buf = append(buf, ev.Type...)
	buf = binary.AppendUvarint(buf, uint64(len(ev.JSON)))
	return append(buf, ev.JSON...)
}

// finishPack ends an encoding begun by startPack.
func finishPack(buf []byte) []byte {
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// errBadPack marks a pack whose bytes are not a pack: it is replayed from
// the log.
var errBadPack = errors.New("malformed pack")

// typeNames interns event types while decoding, so that a pack's events
// share their type strings instead of allocating one each. Its size is
// bounded: types are few, but stored bytes are not trusted.
type typeNames map[string]runs.EventType

const maxTypeNames = 256

func (t typeNames) name(b []byte) runs.EventType {
	if n, ok := t[string(b)]; ok {
		return n
	}
	n := runs.EventType(b)
	if len(t) >= maxTypeNames {
		clear(t)
	}
	t[string(n)] = n
	return n
}

// decodePack returns the events of a pack, appended to evs. Their JSON
// points into data, without a copy, each capped so that an append to one
// cannot write over the next; data must not change after. Types are
// interned in names, if it is not nil. Anything but a well-formed pack of
// at least one event, with seqs that fit in a uint64, is errBadPack.
func decodePack(data []byte, names typeNames, evs []runs.StoredEvent) ([]runs.StoredEvent, error) {
	if len(data) < 1+1+4 {
		return evs, fmt.Errorf("%w: %d bytes", errBadPack, len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return evs, fmt.Errorf("%w: checksum", errBadPack)
	}
	if body[0] != packVersion {
		return evs, fmt.Errorf("%w: version %d", errBadPack, body[0])
	}
	seq, n := packUvarint(body[1:])
	if n <= 0 || seq == 0 {
		return evs, fmt.Errorf("%w: first seq", errBadPack)
	}
	rest := body[1+n:]
	start := len(evs)
	for len(rest) > 0 {
		if len(evs) > start && seq == 0 {
			return evs[:start], fmt.Errorf("%w: seq overflows", errBadPack)
		}
		typ, r, ok := packField(rest)
		if !ok || len(typ) == 0 {
			return evs[:start], fmt.Errorf("%w: type of event %d", errBadPack, seq)
		}
		js, r, ok := packField(r)
		if !ok || len(js) == 0 {
			return evs[:start], fmt.Errorf("%w: json of event %d", errBadPack, seq)
		}
		rest = r
		var t runs.EventType
		if names != nil {
			t = names.name(typ)
		} else {
			t = runs.EventType(typ)
		}
		evs = append(evs, runs.StoredEvent{Seq: seq, Type: t, JSON: js[:len(js):len(js)]})
		seq++
	}
	if len(evs) == start {
		return evs, fmt.Errorf("%w: no events", errBadPack)
	}
	return evs, nil
}

// packUvarint is binary.Uvarint refusing (n = 0) the longer encodings of
// a number, which a writer never makes: a pack decodes from one encoding
// only.
func packUvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, 0
	}
	return v, n
}

// packField reads one uvarint-prefixed field.
func packField(b []byte) (field, rest []byte, ok bool) {
	l, n := packUvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, false
	}
	return b[n : n+int(l)], b[n+int(l):], true
}

// packBuf is what a store knows of one run's packs: the pack it is
// building from the events it stored, and the last one it sent.
type packBuf struct {
	next  uint64 // the seq that extends the pack being built; 0: none seen
	first uint64 // the first seq of the pack being built; 0: none
	count int    // its events
	buf   []byte // its encoding so far
	used  uint64 // when the run last appended, in packWriter.clock ticks
	sent  jetstream.PubAckFuture
}

// packWriter builds the packs of the runs a store appends to, from the
// events it stored itself, in the order it stored them. Only a dense run
// of seqs k*packEvents+1 … enters pack k: an event that does not follow the
// one before (stored by another writer, or by an attempt whose ack was
// lost) abandons the pack in progress, and the next pack starts at its
// boundary. A run's buffer goes at its run.completed, which also sends its
// last, partial pack: a finished run is then replayed from packs to its
// end, with no consumer at all (OpenCursor), which matters most for the
// many runs shorter than a pack.
type packWriter struct {
	log   *zap.Logger
	stats *packStats

	mu    sync.Mutex
	runs  map[string]*packBuf
	bytes int    // the capacity of every buf
	clock uint64 // ticks once per stored batch
}

func newPackWriter(log *zap.Logger, stats *packStats) *packWriter {
	return &packWriter{log: log, stats: stats, runs: map[string]*packBuf{}}
}

// packStats counts what becomes of packs, for PackStats.
type packStats struct {
	sent, abandoned, read, missed, damaged atomic.Int64
}

// PackStats is what a store's packs did since it opened: packs sent, packs
// abandoned before they were complete (their range is replayed from the
// log: a gap, a pack past its size, the writer's memory bound), and of the
// packs cursors asked for, those read, those not found (a range never
// packed, or the live tail, where every cursor's first ask finds none) and
// those damaged.
type PackStats struct {
	Sent, Abandoned, Read, Missed, Damaged int64
}

// PackStats returns the counts of the store's packs.
func (s *Store) PackStats() PackStats {
	st := &s.packStats
	return PackStats{Sent: st.sent.Load(), Abandoned: st.abandoned.Load(), Read: st.read.Load(),
		Missed: st.missed.Load(), Damaged: st.damaged.Load()}
}

// stored takes events the store has just stored for the run, in seq
// order, and returns the packs they complete, to be sent.
func (w *packWriter) stored(runID string, events []runs.StoredEvent) []*nats.Msg {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock++
	b := w.runs[runID]
	if b == nil {
		if len(w.runs) >= maxPackRuns {
			w.evictLocked()
		}
		b = &packBuf{}
		w.runs[runID] = b
	}
	b.used = w.clock
	var out []*nats.Msg
	for _, ev := range events {
		if ev.Seq != b.next && b.first != 0 {
			w.dropLocked(b)
		}
		b.next = ev.Seq + 1
		if packOf(ev.Seq)*packEvents+1 == ev.Seq {
			w.dropLocked(b) // a pack cut short by a restart of the seqs
			b.first = ev.Seq
			b.buf = startPack(make([]byte, 0, 4<<10), ev.Seq)
			w.bytes += cap(b.buf)
		}
		if b.first == 0 {
			continue
		}
		// Counted by capacity: that is what a buffer holds.
		before := cap(b.buf)
		b.buf = appendPackEvent(b.buf, ev)
		b.count++
		w.bytes += cap(b.buf) - before
		switch {
		case len(b.buf)+4 > maxPackBytes || w.bytes > maxPackMemory:
			w.dropLocked(b)
		case ev.Seq%packEvents == 0 || ev.Type == runs.EventRunCompleted:
			out = append(out, w.takeLocked(runID, b))
		}
	}
	if len(events) > 0 && events[len(events)-1].Type == runs.EventRunCompleted {
		// Nothing follows a run's end: its buffer goes now. The entry
		// stays, small, for DeleteRun to find what was sent.
		w.abandonLocked(b)
	}
	return out
}

// takeLocked ends the pack b is building and returns it as a message.
func (w *packWriter) takeLocked(runID string, b *packBuf) *nats.Msg {
	data := finishPack(b.buf)
	msg := &nats.Msg{
		Subject: packSubject(runID, packOf(b.first)),
		Data:    data,
		Header: nats.Header{
			headerPackFirst: {strconv.FormatUint(b.first, 10)},
			headerPackLast:  {strconv.FormatUint(b.first+uint64(b.count)-1, 10)},
			// One pack per subject, the first sent: a second writer's
			// (after a restart, say) is refused, not stored twice.
			headerExpectSubSeq: {"0"},
		},
	}
	// The message keeps its bytes until its ack (a publish may be sent
	// again): the next pack gets a buffer of its own.
	w.bytes -= cap(b.buf)
	b.buf, b.first, b.count = nil, 0, 0
	return msg
}

// dropLocked abandons the pack b is building, if any, and counts it: its
// range will be replayed from the log.
func (w *packWriter) dropLocked(b *packBuf) {
	if b.first != 0 {
		w.stats.abandoned.Add(1)
	}
	w.abandonLocked(b)
}

func (w *packWriter) abandonLocked(b *packBuf) {
	w.bytes -= cap(b.buf)
	b.buf, b.first, b.count = nil, 0, 0
}

// evictLocked drops the buffer of the run appended to least recently.
func (w *packWriter) evictLocked() {
	var oldest string
	var at uint64
	for id, b := range w.runs {
		if oldest == "" || b.used < at {
			oldest, at = id, b.used
		}
	}
	w.dropLocked(w.runs[oldest])
	delete(w.runs, oldest)
}

// sent records the ack of the run's last pack sent.
func (w *packWriter) sent(runID string, f jetstream.PubAckFuture) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.runs[runID]; b != nil {
		b.sent = f
	}
}

// forget drops the run's buffer and returns the ack of its last pack sent,
// if it is known, for DeleteRun to wait for before it purges.
func (w *packWriter) forget(runID string) jetstream.PubAckFuture {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.runs[runID]
	if b == nil {
		return nil
	}
	w.abandonLocked(b)
	delete(w.runs, runID)
	return b.sent
}

// sendPacks publishes packs of the run without waiting for their acks: a
// pack is only an index, and an append must not wait on one, or fail by
// one. A pack that is not stored costs its range a slower replay.
func (s *Store) sendPacks(runID string, packs []*nats.Msg) {
	for _, msg := range packs {
		f, err := s.js.PublishMsgAsync(msg)
		if err != nil {
			s.log.Debug("pack not sent", zap.String("subject", msg.Subject), zap.Error(err))
			continue
		}
		s.packStats.sent.Add(1)
		s.packs.sent(runID, f)
	}
}

// packed records events the store has just stored for the run, and sends
// the packs they complete.
func (s *Store) packed(runID string, events []runs.StoredEvent) {
	if packs := s.packs.stored(runID, events); len(packs) > 0 {
		s.sendPacks(runID, packs)
	}
}
