package supervisor

import "github.com/agentgate/agentgate/internal/runs"

// emitterDepth bounds the lines whose events wait to be emitted behind a
// run's reader. When it is full the reader waits, and so, through its
// pipe, does the agent: the same backpressure as emitting in line.
const emitterDepth = 256

// emitterBatch bounds the events one emit takes from the queue at once:
// what waited since the last one goes together, in one hold of the run's
// lock and one hand-off to its appender, but a long queue does not make
// one batch hold the lock for long.
const emitterBatch = 512

// An emitter emits a run's decoded events on a goroutine of its own, in
// the order they were sent. It lets the run's reader decode the next line
// while the last line's events are scrubbed, encoded and handed to the
// store, which on one goroutine capped a run at the sum of the two costs.
// It relies on what Decoder promises: an event owns its data once Decode
// has returned it.
type emitter struct {
	queue chan []runs.Event
	done  chan struct{}
}

func (s *Supervisor) startEmitter(t *task) *emitter {
	e := &emitter{queue: make(chan []runs.Event, emitterDepth), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		var batch []runs.Event
		for evs := range e.queue {
			batch = append(batch[:0], evs...)
		more:
			for len(batch) < emitterBatch {
				select {
				case evs, ok := <-e.queue:
					if !ok {
						break more
					}
					batch = append(batch, evs...)
				default:
					break more
				}
			}
			s.emit(t, batch...)
			s.storeLiveUsage(t)
			clear(batch) // the events are the store's now; keep no hold on their data
		}
	}()
	return e
}

// send queues evs to be emitted after everything sent before. It must not
// be called after close.
func (e *emitter) send(evs ...runs.Event) {
	if len(evs) > 0 {
		e.queue <- evs
	}
}

// close returns once every event sent was emitted.
func (e *emitter) close() {
	close(e.queue)
	<-e.done
}
