package store

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// cursorStart returns the configuration of the consumer of a cursor on the
// run's events after seq after: delivering from the stream sequence of
// event after+1, from the run's first stored event when after is 0 or
// older than what is stored, or from right after the run's last event when
// the reader has seen it.
//
// A log that is not a dense prefix in seq order (written by an earlier
// version) may hide event after+1 from the search; the cursor then replays
// the run from its first event and drops what the reader has seen, as
// every cursor did before the search, which delivers the same events.
func (s *Store) cursorStart(ctx context.Context, runID string, after uint64) (jetstream.OrderedConsumerConfig, error) {
	subject := eventsSubject(runID)
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	if after == 0 {
		return cfg, nil
	}
	last, err := s.lastMessage(ctx, runID)
	if err != nil {
		return cfg, err
	}
	if last.pos == 0 {
		// Nothing stored yet: the run's first event is the first to
		// come, and the pump drops it if the reader has seen it.
		return cfg, nil
	}
	cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	if last.seq <= after {
		cfg.OptStartSeq = last.pos + 1
		return cfg, nil
	}
	pos, probes, err := s.findEvent(ctx, subject, after+1, last)
	if err != nil {
		return cfg, err
	}
	if pos == 0 {
		s.log.Warn("event not found by its seq, cursor replays the run", zap.String("run_id", runID),
			zap.Uint64("seq", after+1), zap.Int("probes", probes))
		return jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}, nil
	}
	cfg.OptStartSeq = pos
	return cfg, nil
}

// findEvent returns the stream sequence of the message holding the run's
// event of seq t, given its last message, whose last event is t or later,
// subject being the run's: the first stored message when its first seq is t
// or more (older ones expired), 0 when the log does not hold t where a
// dense prefix in seq order would. It also returns how many reads it made.
//
// Each read is one get of "the run's first message at stream sequence x
// or later", which the server answers from its index of subjects without
// reading what lies between; the seq headers of what it finds say on which
// side of t it landed, or that it holds t, since seqs rise with stream
// sequences. The reads
// estimate where t lies from the run's density in the stream (stream
// sequences per event) and aim just after where event t-1 would be: a run
// alone in the stream takes one read, one interleaved with others at a
// steady rate two to four. Until a read lands below t, the estimates go
// down from the run's end, at first with density 1, the least a dense log
// allows, so that the first never passes t, then with the density measured
// between the run's last event and the lowest one read, doubled after each
// read that found no event of the run closer to t. So a read near
// the run's end stays near it: it does not read the run's first event,
// whose file block, on a long run, is out of the server's cache (loading
// one costs about 10 ms), unless nothing after it is below t. Once t is
// bracketed, steps alternate between interpolating and halving, which
// bounds the reads by about twice the bits of the stream's length; three
// times when the run's messages hold very different numbers of events,
// since every guess above t also steps back at least twice as far from the
// run's end as the one before.
func (s *Store) findEvent(ctx context.Context, subject string, t uint64, last lastMsg) (pos uint64, probes int, err error) {
	return searchEvent(t, last.first, last.seq, last.pos, func(x uint64) (pos, first, last uint64, ok bool, err error) {
		var m *jetstream.RawStreamMsg
		err = s.retry(ctx, "find event", func(ctx context.Context) error {
			var err error
			m, err = s.events.GetMsg(ctx, x, jetstream.WithGetMsgSubject(subject))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, 0, false, err
		}
		first, last, perr := msgSeqs(m.Header)
		if perr != nil {
			return 0, 0, 0, false, nil
		}
		return m.Sequence, first, last, true, nil
	})
}

// probeFunc returns the run's first message at stream sequence x or
// later: its stream sequence and the seqs of its first and last events; ok
// is false when there is none or its seqs are unreadable.
type probeFunc func(x uint64) (pos, first, last uint64, ok bool, err error)

// searchEvent is findEvent's search, reading the log through probe, given
// the run's last message: at stream sequence lastPos, holding events
// lastFirst..lastSeq.
func searchEvent(t, lastFirst, lastSeq, lastPos uint64, read probeFunc) (pos uint64, probes int, err error) {
	probe := func(x uint64) (uint64, uint64, uint64, bool, error) {
		probes++
		return read(x)
	}
	// Invariant: the run's first message at stream sequence hi or later
	// holds t or later events, starts at seq hiSeq and is at found; the
	// message at lo, once lo > 0, ends at loSeq, below t. The search ends
	// when found's message holds t (hiSeq ≤ t).
	hi, hiSeq, found := lastPos, lastFirst, lastPos
	var lo, loSeq uint64
	misses, above := 0, 0
	for step := 0; hiSeq > t; step++ {
		if lo == 0 && hi <= 1 {
			// Nothing of the run before found: t expired.
			return found, probes, nil
		}
		if lo > 0 && hi-lo <= 1 {
			break
		}
		var x float64
		switch {
		case lo == 0:
			k := 1.0
			if hiSeq < lastSeq {
				k = max(1, float64(lastPos-found)/float64(lastSeq-hiSeq))
			}
			k *= float64(uint64(1) << min(misses, 62))
			x = float64(found) - float64(hiSeq-t)*k - (k-1)/2
			// And at least twice as far back from the run's end as
			// the guess before: the density measured near the end
			// can be far off nearer t (messages of many events
			// there, of one event each and far apart earlier), and
			// this bounds the guesses above t by the bits of the
			// stream's length.
			x = min(x, float64(lastPos)-float64(uint64(1)<<min(above, 62))+1)
			above++
		case step%2 == 0:
			k := float64(hi-lo) / float64(hiSeq-loSeq)
			x = float64(lo) + float64(t-loSeq)*k - (k-1)/2
		default:
			x = float64(lo + (hi-lo)/2)
		}
		// Within what is left: after lo, before hi.
		at := lo + 1
		if x > float64(at) {
			at = min(uint64(x), hi-1)
		}
		at = min(at, hi-1)
		p, first, last, ok, err := probe(at)
		if err != nil || !ok {
			return 0, probes, err
		}
		switch {
		case last >= t:
			if p == found {
				// Nothing of the run between at and found: the
				// others' share is larger than guessed.
				misses++
			} else {
				misses = 0
			}
			hi, hiSeq, found = at, first, p
		case p >= hi:
			// An earlier event after a later one, or events expiring
			// under the search: not a dense prefix.
			return 0, probes, nil
		default:
			lo, loSeq = p, last
		}
	}
	if hiSeq > t {
		return 0, probes, nil
	}
	return found, probes, nil
}
