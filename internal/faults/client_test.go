package faults

// A client of the gateway as a careful program would be one: it submits
// with an Idempotency-Key, reads streams to their end, resuming by
// Last-Event-ID, and checks every run it made against the four promises.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// sleepRE finds how long a run's tool should take in its prompt.
var sleepRE = regexp.MustCompile(`sleep:(\d+)`)

// scenario answers a prompt holding "sleep:N" with a Bash call of perl
// sleeping N seconds (a tool process the rig can watch and kill) and then
// text, and any other prompt with text.
func scenario() anthropic.Scenario {
	return anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		if m := sleepRE.FindStringSubmatch(req.UserText()); m != nil {
			return anthropic.ToolTurn("perl -e 'sleep "+m[1]+"'", "Slept "+m[1]+"s.").Respond(req)
		}
		return anthropic.TextAnswer("Hello from the mock.").Respond(req)
	})
}

func startMock(t *testing.T) *anthropic.Server {
	t.Helper()
	m, err := anthropic.Start("127.0.0.1:0", scenario())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// runBody is a run of the claude agent whose tool sleeps for seconds (no
// tool when 0), told apart from others by tag.
func runBody(seconds int, tag string) string {
	prompt := "say hello " + tag
	if seconds > 0 {
		prompt = fmt.Sprintf("run the tool sleep:%d %s", seconds, tag)
	}
	b, _ := json.Marshal(map[string]any{"agent": "claude", "prompt": prompt, "metadata": map[string]string{"tag": tag}})
	return string(b)
}

// client is an HTTP client with bounded requests.
var client = &http.Client{Timeout: 60 * time.Second}

// submitted is the answer to one POST /v1/runs.
type submitted struct {
	Status int
	Code   string // the error code of a 4xx/5xx
	Run    runs.Run
	Raw    []byte
}

// post submits body to base, with key as Idempotency-Key when not empty.
func post(base, body, key string) (submitted, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/runs", strings.NewReader(body))
	if err != nil {
		return submitted{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return submitted{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	s := submitted{Status: resp.StatusCode, Raw: bytes.TrimSpace(b)}
	if err != nil {
		return s, err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		s.Code = e.Error.Code
		return s, nil
	}
	return s, json.Unmarshal(b, &s.Run)
}

// record is a run as GET /v1/runs/{id} shows it, with the raw fields the
// runs package may not have yet.
type record struct {
	runs.Run
	QueuePosition int `json:"queue_position"`
}

func getRun(base, id string) (record, int, error) {
	resp, err := client.Get(base + "/v1/runs/" + url.PathEscape(id))
	if err != nil {
		return record{}, 0, err
	}
	defer resp.Body.Close()
	var r record
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return r, resp.StatusCode, fmt.Errorf("GET run %s = %d %s", id, resp.StatusCode, b)
	}
	return r, resp.StatusCode, json.NewDecoder(resp.Body).Decode(&r)
}

// waitTerminal polls base until the run is terminal; within bounds a run
// that never ends.
func waitTerminal(t *testing.T, base, id string, within time.Duration) (record, error) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last record
	var lastErr error
	for time.Now().Before(deadline) {
		r, _, err := getRun(base, id)
		if err == nil && r.Status.Terminal() {
			return r, nil
		}
		if err == nil {
			last = r
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return last, fmt.Errorf("run %s still %q after %s (last error %v)", id, last.Status, within, lastErr)
}

// listAll reads every page of GET /v1/runs.
func listAll(base string) ([]runs.Run, error) {
	var all []runs.Run
	cursor := ""
	for range 1000 {
		u := base + "/v1/runs?limit=100"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, err := client.Get(u)
		if err != nil {
			return nil, err
		}
		var page runs.Page
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("list runs = %d %v", resp.StatusCode, err)
		}
		all = append(all, page.Runs...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("list runs: more than 1000 pages")
}

// event is one SSE event.
type event struct {
	Seq  uint64
	Type string
	Data string // the envelope's JSON, as sent
	Env  runs.Event
}

// segment is one connection's part of a stream.
type segment struct {
	Status int
	Events []event
	// Retry is the last retry: field the server sent.
	Retry string
	// Err is how the connection ended: nil for a clean end of the body.
	Err error
	// End is when it ended.
	End time.Time
}

// readSSE opens base's stream of the run after lastID and reads it until
// the body ends or ctx is done.
func readSSE(ctx context.Context, base, id string, lastID uint64) segment {
	return readSSEUntil(ctx, base, id, lastID, nil)
}

// readSSEFirst reads the run's first event from base.
func readSSEFirst(base, id string) segment {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return readSSEUntil(ctx, base, id, 0, func(event) bool { return true })
}

// readSSEUntil is readSSE that also stops after an event for which stop
// is true.
func readSSEUntil(ctx context.Context, base, id string, lastID uint64, stop func(event) bool) (seg segment) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+url.PathEscape(id)+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(lastID, 10))
	}
	// The stream's own client: no overall timeout, the context bounds it.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return segment{Err: err, End: time.Now()}
	}
	defer resp.Body.Close()
	seg = segment{Status: resp.StatusCode}
	defer func() { seg.End = time.Now() }()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return seg
	}
	br := bufio.NewReaderSize(resp.Body, 1<<16)
	var cur event
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err != io.EOF || line != "" {
				seg.Err = fmt.Errorf("stream cut: %w", err)
			}
			if errors.Is(err, io.EOF) && line == "" {
				seg.Err = nil
			}
			return seg
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if cur.Type != "" || len(data) > 0 {
				cur.Data = strings.Join(data, "\n")
				if err := json.Unmarshal([]byte(cur.Data), &cur.Env); err != nil {
					seg.Err = fmt.Errorf("event %d is not JSON: %v", cur.Seq, err)
					return seg
				}
				seg.Events = append(seg.Events, cur)
				if stop != nil && stop(cur) {
					return seg
				}
			}
			cur, data = event{}, nil
		case strings.HasPrefix(line, "id:"):
			cur.Seq, _ = strconv.ParseUint(strings.TrimSpace(line[3:]), 10, 64)
		case strings.HasPrefix(line, "event:"):
			cur.Type = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " "))
		case strings.HasPrefix(line, "retry:"):
			seg.Retry = strings.TrimSpace(line[6:])
		}
	}
}

// followed is a run's stream as a resuming client assembled it.
type followed struct {
	Events   []event
	Segments []segment
	// Problems are the stream's faults: a gap, a repeat, an event out of
	// order, a stream that would not end.
	Problems []string
	// First is how long the first event took to arrive.
	First time.Duration
}

// follow reads the run's whole stream from base, resuming after the last
// event it has whenever a connection ends before run.completed, as an
// EventSource would, until run.completed or within.
func follow(base, id string, within time.Duration) followed {
	return followVia(base, base, id, within)
}

// followVia is follow that opens the stream on first and resumes it on
// then.
func followVia(first, then, id string, within time.Duration) followed {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var f followed
	var last uint64
	start := time.Now()
	base := first
	for ctx.Err() == nil {
		if len(f.Segments) > 0 {
			base = then
		}
		seg := readSSEUntil(ctx, base, id, last, func(event) bool {
			if f.First == 0 {
				f.First = time.Since(start)
			}
			return false
		})
		f.Segments = append(f.Segments, seg)
		for _, e := range seg.Events {
			switch {
			case e.Seq == last+1:
			case e.Seq <= last:
				f.Problems = append(f.Problems, fmt.Sprintf("event %d (%s) again after %d, resumed after %d", e.Seq, e.Type, last, last))
			default:
				f.Problems = append(f.Problems, fmt.Sprintf("events %d..%d lost before %d (%s)", last+1, e.Seq-1, e.Seq, e.Type))
			}
			if e.Env.Seq != e.Seq || e.Env.RunID != id {
				f.Problems = append(f.Problems, fmt.Sprintf("event id %d carries seq %d of run %q", e.Seq, e.Env.Seq, e.Env.RunID))
			}
			if e.Seq > last {
				last = e.Seq
			}
			f.Events = append(f.Events, e)
			if e.Type == string(runs.EventRunCompleted) {
				if len(seg.Events) > 0 && seg.Events[len(seg.Events)-1].Seq != e.Seq {
					f.Problems = append(f.Problems, fmt.Sprintf("events after run.completed (%d)", e.Seq))
				}
				return f
			}
		}
		if seg.Status == http.StatusNoContent {
			f.Problems = append(f.Problems, fmt.Sprintf("204 after event %d, before any run.completed", last))
			return f
		}
		if seg.Status != http.StatusOK && seg.Status != 0 {
			// A browser's EventSource gives up on any status but 200.
			f.Problems = append(f.Problems, fmt.Sprintf("stream answered %d after event %d, where an EventSource stops for good", seg.Status, last))
		}
		if len(f.Segments) > 200 {
			break
		}
		// A reconnect, as an EventSource does after its retry delay.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	f.Problems = append(f.Problems, fmt.Sprintf("no run.completed within %s after %d events and %d connections", within, last, len(f.Segments)))
	return f
}

// want is what a case expects of a run's end.
type want struct {
	// Status, when set, is the terminal status the run must end in.
	Status runs.State
	// Class, when set, is its error class.
	Class runs.Class
}

// verify checks one run the test made: its stream through nginx (resumed
// as needed) and its full log from every live replica agree, are dense
// from 1 with one run.completed, last, that agrees with the terminal
// record, and no process of the run is left. It returns what failed, so
// that a case can report every run before it fails.
func (r *rig) verify(t *testing.T, id string, w want, within time.Duration) []string {
	t.Helper()
	r.track(id)
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// One deadline for the whole check: a run whose stream never ends
	// costs within, not within for every replica too.
	deadline := time.Now().Add(within)
	rec, err := waitTerminal(t, r.Nginx, id, within)
	if err != nil {
		bad("%v", err)
	}
	f := follow(r.Nginx, id, max(time.Until(deadline), 10*time.Second))
	problems = append(problems, f.Problems...)
	stalled := func(where string, f followed) {
		// The run is over: its stored log is there to be read at once. A
		// busy machine may take seconds; stallLimit is a stall.
		if f.First > stallLimit {
			bad("%s: the first event of the finished run took %s", where, f.First.Round(time.Millisecond))
		}
	}
	stalled("nginx", f)
	if len(f.Events) == 0 {
		return append(problems, "no events")
	}
	for i, e := range f.Events {
		if e.Seq != uint64(i+1) {
			bad("stream position %d holds seq %d", i+1, e.Seq)
			break
		}
	}
	var completed []int
	for i, e := range f.Events {
		if e.Type == string(runs.EventRunCompleted) {
			completed = append(completed, i)
		}
	}
	if len(completed) != 1 || completed[0] != len(f.Events)-1 {
		bad("run.completed at positions %v of %d events", completed, len(f.Events))
	}
	if f.Events[0].Type != string(runs.EventRunQueued) {
		bad("first event is %s", f.Events[0].Type)
	}
	var done runs.RunCompletedData
	if last := f.Events[len(f.Events)-1]; last.Type == string(runs.EventRunCompleted) {
		var env struct{ Data runs.RunCompletedData }
		if err := json.Unmarshal([]byte(last.Data), &env); err != nil {
			bad("run.completed data: %v", err)
		}
		done = env.Data
	}
	if err == nil {
		if rec.Status != done.Status {
			bad("record says %s, run.completed says %s", rec.Status, done.Status)
		}
		if rec.Status != runs.Succeeded {
			switch {
			case rec.Error == nil || rec.Error.Class == "":
				bad("record %s without an error class", rec.Status)
			case done.Error == nil || done.Error.Class != rec.Error.Class:
				bad("record class %s, run.completed error %+v", rec.Error.Class, done.Error)
			}
		}
		if w.Status != "" && rec.Status != w.Status {
			bad("ended %s (%+v), want %s", rec.Status, rec.Error, w.Status)
		}
		if w.Class != "" && (rec.Error == nil || rec.Error.Class != w.Class) {
			bad("ended with error %+v, want class %s", rec.Error, w.Class)
		}
	}
	if done.Status == runs.Succeeded && strings.Contains(rec.Metadata["tag"], "tool") {
		// A tool run that succeeded has every step of its tool stored.
		types := map[string]bool{}
		for _, e := range f.Events {
			types[e.Type] = true
		}
		for _, ty := range []runs.EventType{runs.EventRunStarted, runs.EventToolCallStarted, runs.EventToolCallCompleted} {
			if !types[string(ty)] {
				bad("succeeded without a %s event", ty)
			}
		}
	}
	// Every live replica serves the same log.
	for i, g := range r.Gateways {
		if !r.alive(fmt.Sprintf("GATEWAY%d", i+1)) {
			continue
		}
		again := follow(g, id, min(max(time.Until(deadline), 5*time.Second), 30*time.Second))
		stalled(fmt.Sprintf("gateway %d", i+1), again)
		if len(again.Events) != len(f.Events) {
			bad("gateway %d serves %d events, nginx served %d (%v)", i+1, len(again.Events), len(f.Events), again.Problems)
			continue
		}
		for j := range again.Events {
			if again.Events[j].Data != f.Events[j].Data {
				bad("gateway %d: event %d differs", i+1, j+1)
				break
			}
		}
	}
	if left := waitNoProcesses(id, 15*time.Second); len(left) > 0 {
		bad("processes left: %s", describe(left))
		proctree.New().Kill(context.Background(), id)
	}
	for i := range problems {
		problems[i] = "run " + id + ": " + problems[i]
	}
	return problems
}

// stallLimit is how long the first event of a finished run may take
// before its stream open counts as stalled. Against a hang, not a target:
// under two suites at once, a replica that had just restarted took 8 s
// (its first store cursor's consumer is created with retries that back
// off up to 5 s), and with more load besides 20 to 28 s.
const stallLimit = time.Minute

// verifyAll verifies the runs at the same time, so that runs that never
// end cost one wait, not one each.
func (r *rig) verifyAll(t *testing.T, ids []string, w want, within time.Duration) []string {
	t.Helper()
	out := make([][]string, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { out[i] = r.verify(t, id, w, within) })
	}
	wg.Wait()
	var problems []string
	for _, p := range out {
		problems = append(problems, p...)
	}
	return problems
}

// waitNoProcesses waits until no process carries the run's id; the
// processes still there at the deadline are returned.
func waitNoProcesses(id string, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		pids, _ := proctree.New().Find(id)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive reports whether the recorded process of role is running.
func (r *rig) alive(role string) bool {
	pid := r.pid(role)
	if pid == 0 {
		return false
	}
	b, err := readStat(pid)
	return err == nil && !bytes.Contains(b, []byte(") Z ")) && !bytes.Contains(b, []byte(") X "))
}

// checkListing checks that the runs listed are exactly the runs made, one
// each.
func checkListing(base string, made []string) []string {
	all, err := listAll(base)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	count := map[string]int{}
	for _, r := range all {
		count[r.ID]++
	}
	for id, n := range count {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("run %s listed %d times", id, n))
		}
	}
	want := map[string]bool{}
	for _, id := range made {
		want[id] = true
		if count[id] == 0 {
			problems = append(problems, fmt.Sprintf("run %s is not listed", id))
		}
	}
	for id := range count {
		if !want[id] {
			var tag string
			for _, r := range all {
				if r.ID == id {
					tag = r.Metadata["tag"]
				}
			}
			problems = append(problems, fmt.Sprintf("run %s (tag %q) listed but never returned to a client: a duplicate", id, tag))
		}
	}
	if len(all) != len(made) {
		problems = append(problems, fmt.Sprintf("%d runs listed for %d submissions", len(all), len(made)))
	}
	return problems
}

// report fails the test with every problem found.
func report(t *testing.T, problems []string) {
	t.Helper()
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// waitFor polls cond until it holds or within passes.
func waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// waitEvent follows the run's stream on base until an event of type typ
// arrives.
func waitEvent(base, id string, typ runs.EventType, within time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last uint64
	for ctx.Err() == nil {
		seg := readSSEUntil(ctx, base, id, last, func(e event) bool {
			return e.Type == string(typ) || e.Type == string(runs.EventRunCompleted)
		})
		for _, e := range seg.Events {
			if e.Type == string(typ) {
				return true
			}
			if e.Type == string(runs.EventRunCompleted) {
				return false
			}
			last = max(last, e.Seq)
		}
		if seg.Status == http.StatusNoContent {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// endings describes how each connection of a stream ended, for a log.
func (f followed) endings() string {
	var parts []string
	for i, s := range f.Segments {
		end := "eof"
		if s.Err != nil {
			end = s.Err.Error()
		}
		n := len(s.Events)
		var lastType string
		if n > 0 {
			lastType = s.Events[n-1].Type
		}
		parts = append(parts, fmt.Sprintf("#%d status %d %d events, last %s, retry %q, end %s", i+1, s.Status, n, lastType, s.Retry, end))
	}
	return strings.Join(parts, "; ")
}

func readStat(pid int) ([]byte, error) {
	return os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
}
