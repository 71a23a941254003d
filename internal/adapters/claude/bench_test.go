package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// benchCorpus is every recorded transcript, one slice of lines per
// recording: what the decoder meets from the real CLI.
type benchCorpus struct {
	runs  [][][]byte
	lines int
	bytes int64
}

func loadBenchCorpus(b *testing.B) benchCorpus {
	b.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no recordings in testdata (%v)", err)
	}
	var c benchCorpus
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var lines [][]byte
		for _, l := range bytes.Split(raw, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
				c.lines++
				c.bytes += int64(len(l))
			}
		}
		if len(lines) > 0 {
			c.runs = append(c.runs, lines)
		}
	}
	return c
}

// decodeCorpus decodes every recording with a fresh decoder, as the
// supervisor does per run, and returns the number of events.
func decodeCorpus(c benchCorpus) int {
	n := 0
	for _, lines := range c.runs {
		d := newDecoder(runs.Invocation{})
		for _, l := range lines {
			n += len(d.Decode(l))
		}
	}
	return n
}

// unmarshalCorpus parses every line into a map, the baseline: what parsing
// alone costs, with nothing mapped.
func unmarshalCorpus(b *testing.B, c benchCorpus) {
	for _, lines := range c.runs {
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecode measures the decoder over every recorded transcript line
// (one op decodes them all; bytes/s is the decoder's) against the baseline
// of json.Unmarshal into map[string]any of the same lines, timed in the same
// iterations with the benchmark timer stopped, so that both share the
// machine's noise. "x-unmarshal" is decoder time over baseline time: what
// decoding costs over parsing.
func BenchmarkDecode(b *testing.B) {
	c := loadBenchCorpus(b)
	want := decodeCorpus(c)
	if want == 0 {
		b.Fatal("the recordings decode to no events")
	}
	b.SetBytes(c.bytes)
	b.ReportAllocs()
	var base time.Duration
	iters := 0
	for b.Loop() {
		if got := decodeCorpus(c); got != want {
			b.Fatalf("decoded %d events, then %d: the decoder is not deterministic", want, got)
		}
		b.StopTimer()
		start := time.Now()
		unmarshalCorpus(b, c)
		base += time.Since(start)
		iters++
		b.StartTimer()
	}
	dec := b.Elapsed().Seconds()
	n := float64(iters)
	b.ReportMetric(n*float64(want)/dec, "events/s")
	b.ReportMetric(n*float64(c.lines)/dec, "lines/s")
	b.ReportMetric(dec*1e6/(n*float64(c.lines)), "µs/line")
	b.ReportMetric(n*float64(c.bytes)/base.Seconds()/1e6, "unmarshal-MB/s")
	b.ReportMetric(base.Seconds()*1e6/(n*float64(c.lines)), "unmarshal-µs/line")
	b.ReportMetric(dec/base.Seconds(), "x-unmarshal")
}
