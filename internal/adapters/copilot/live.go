package copilot

import (
	"bytes"
	"encoding/json"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/runs"
)

// A one-shot run's JSONL carries no tokens, and its usage file is written
// only as the CLI exits; but the CLI records the session as it goes in
// <home>/.copilot/session-state/<session id>/events.jsonl, where each
// model request leaves a session.usage_record, before the
// assistant.message it answered is printed (verified with 1.0.102):
//
//	{"type":"session.usage_record","data":{"usage":{"model":"mock-model","inputTokens":5000,"outputTokens":50,
//	  "cacheReadTokens":4000,"cacheWriteTokens":0,"reasoningTokens":12,"apiCallId":"resp_…",…}}}
//
// The decoder reads it when a line names a model request it has not
// billed yet (assistant.message's apiCallId), and emits usage.updated
// with the run's sum so far, so that the gateway sees the usage during
// the run (its token budget) and keeps it when it stops the run. Only the
// requests the run's own lines name are counted: a resumed session's
// record holds its earlier runs' too. The usage file, at Finish, remains
// the run's total.

// maxSessionRecord bounds what the decoder reads of the session's record;
// a session that big is billed at Finish only.
const maxSessionRecord = 32 << 20

// maxMisses is how many reads in a row may find no record of the
// requests named before the decoder stops looking for them.
const maxMisses = 8

// sessionRecordPath is the CLI's record of session under home, or "" for
// a session id that is not one path element.
func sessionRecordPath(home, session string) string {
	if session == "" || session == "." || session == ".." || filepath.Base(session) != session {
		return ""
	}
	return filepath.Join(home, ".copilot", "session-state", session, "events.jsonl")
}

// wireRecordLine is a line of the session's record; only usage records
// matter here.
type wireRecordLine struct {
	Type string `json:"type"`
	Data struct {
		Usage struct {
			wireTokens
			APICallID string `json:"apiCallId"`
		} `json:"usage"`
	} `json:"data"`
}

// noteCall remembers a model request the run's lines named.
func (d *decoder) noteCall(id string) {
	if id != "" && !d.billed[id] {
		d.unbilled[id] = true
	}
}

// liveUsage bills the requests named so far from the session's record,
// and returns usage.updated when it found any.
func (d *decoder) liveUsage() []runs.Event {
	if len(d.unbilled) == 0 {
		return nil
	}
	path := sessionRecordPath(d.inv.Home, d.sessionID)
	if path == "" {
		return nil
	}
	raw, err := d.files.ReadFile(path)
	if err != nil || len(raw) > maxSessionRecord {
		return nil
	}
	u, found := recordedUsage(raw, func(id string) bool {
		if !d.unbilled[id] {
			return false
		}
		delete(d.unbilled, id)
		d.billed[id] = true
		return true
	})
	d.live = d.live.Add(u)
	if !found {
		// A request the CLI records no usage for (one that failed)
		// is not looked for for ever: Finish bills the rest.
		if d.misses++; d.misses >= maxMisses {
			clear(d.unbilled)
			d.misses = 0
		}
		return nil
	}
	d.misses = 0
	return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.live})}
}

// recordedUsage sums the session's usage records, all of them (want nil)
// or those of the requests want takes, which it is then told were billed.
func recordedUsage(raw []byte, want func(apiCallID string) bool) (runs.Usage, bool) {
	var sum runs.Usage
	found := false
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"session.usage_record"`)) {
			continue
		}
		var l wireRecordLine
		if json.Unmarshal(line, &l) != nil || l.Type != "session.usage_record" {
			continue // a line being written, or another kind
		}
		u := l.Data.Usage
		if want != nil && !want(u.APICallID) {
			continue
		}
		sum = sum.Add(runs.Usage{
			InputTokens: u.InputTokens, CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
			OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens,
		})
		found = true
	}
	return sum, found
}

// sub is u less v, field by field, never below zero.
func sub(u, v runs.Usage) runs.Usage {
	d := func(a, b int64) int64 { return max(a-b, 0) }
	return runs.Usage{
		InputTokens: d(u.InputTokens, v.InputTokens), CacheReadTokens: d(u.CacheReadTokens, v.CacheReadTokens),
		CacheWriteTokens: d(u.CacheWriteTokens, v.CacheWriteTokens), OutputTokens: d(u.OutputTokens, v.OutputTokens),
		ReasoningTokens: d(u.ReasoningTokens, v.ReasoningTokens),
	}
}
