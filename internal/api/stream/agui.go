package stream

import (
	"slices"
	"strconv"

	"github.com/agentgate/agentgate/internal/agui"
	"github.com/agentgate/agentgate/internal/runs"
)

// AGUIPosition is where an AG-UI stream resumes. One stored event may
// become several AG-UI events: the last of them has the event's seq as
// its SSE id ("7"), the others the seq and how many of its events the
// client then has ("7.1", "7.2"). So "7" means everything made of the
// events up to seq 7, "7.2" everything of those before 7 and the first two
// of 7's, and a resume never repeats or skips one.
type AGUIPosition struct {
	Seq     uint64
	Count   int
	Partial bool // Count applies; otherwise all of Seq's events are had
}

// shows reports whether the k-th (from 0) AG-UI event of the stored event
// seq comes after p.
func (p AGUIPosition) shows(seq uint64, k int) bool {
	return seq > p.Seq || seq == p.Seq && p.Partial && k >= p.Count
}

// After reports whether p is later than q.
func (p AGUIPosition) After(q AGUIPosition) bool {
	if p.Seq != q.Seq {
		return p.Seq > q.Seq
	}
	return q.Partial && (!p.Partial || p.Count > q.Count)
}

// AGUI frames a run's events as AG-UI events, translated from the stored
// log by internal/agui, each a server-sent event; the rest of its framing
// is SSE's.
type AGUI struct {
	SSE
	tr *agui.Translator
	// from is the resume point: nothing at or before it is written.
	from AGUIPosition
	// one, for POST /v1/ag-ui, writes one AG-UI run and ends after it: the
	// first, or the one that the answer to the interrupt resumes opened.
	one     bool
	resumes string
	inside  bool // in the AG-UI run that one writes
	// translated is the seq of the last stored event translated.
	translated uint64
}

// NewAGUI returns the AG-UI framing of a run's events by tr, from the
// resume point from. The stream it frames must start at the run's first
// event: the translation of a run depends on all of its log.
func NewAGUI(tr *agui.Translator, from AGUIPosition) *AGUI {
	return &AGUI{tr: tr, from: from}
}

// NewAGUIRun returns the framing of one AG-UI run of a run's events by tr:
// the first, or, with resumes set, the one that the answer to that
// interrupt opened. The stream is complete when that AG-UI run ends.
func NewAGUIRun(tr *agui.Translator, resumes string) *AGUI {
	return &AGUI{tr: tr, one: true, resumes: resumes}
}

// Encode implements Encoder: it translates the stored events of evs into
// buf, up to maxBatchBytes, and returns those it did not reach. done
// reports that the stream is complete: run.completed was translated, or
// the one AG-UI run it writes ended.
func (a *AGUI) Encode(buf []byte, evs []runs.StoredEvent, last *uint64) (out []byte, rest []runs.StoredEvent, done bool) {
	for i, ev := range evs {
		if len(buf) >= maxBatchBytes {
			return buf, slices.Clone(evs[i:]), false
		}
		if ev.Seq <= a.translated {
			continue
		}
		a.translated, *last = ev.Seq, ev.Seq
		translated := a.tr.Translate(ev.JSON)
		for k, e := range translated {
			if a.one && !a.inside {
				if e.Type != agui.RunStarted || e.Resumes != a.resumes {
					continue
				}
				a.inside = true
			}
			if a.from.shows(ev.Seq, k) {
				buf = appendAGUIEvent(buf, ev.Seq, k, len(translated), e.JSON)
			}
			if a.one && e.Type.Ends() {
				return buf, nil, true
			}
		}
		if a.tr.Done() || ev.Type == runs.EventRunCompleted {
			return buf, nil, true
		}
	}
	return buf, nil, false
}

// appendAGUIEvent appends one AG-UI event as an SSE event: its id, and its
// JSON, one line, as the data. No event field: AG-UI clients read data
// alone, and an EventSource hands events without one to onmessage.
func appendAGUIEvent(buf []byte, seq uint64, k, n int, data []byte) []byte {
	buf = append(buf, "id: "...)
	buf = aguiID(buf, seq, k, n)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, '\n', '\n')
}

// aguiID is the SSE id of the k-th of n AG-UI events made of the stored
// event seq.
func aguiID(buf []byte, seq uint64, k, n int) []byte {
	buf = strconv.AppendUint(buf, seq, 10)
	if k < n-1 {
		buf = append(buf, '.')
		buf = strconv.AppendInt(buf, int64(k+1), 10)
	}
	return buf
}
