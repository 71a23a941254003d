package artifacts

import (
	"fmt"
	"strconv"
	"strings"
)

// Context is the number of unchanged lines around each hunk.
const Context = 3

// maxEdit bounds the edit distance the line diff searches for. Beyond it
// the rest of the two sides is given as one deletion and one insertion:
// still a correct diff, only not the shortest, and the search's time and
// memory stay bounded (they grow with the square of the distance).
const maxEdit = 1024

// op is one line of an edit script.
type op struct {
	kind byte // ' ', '-' or '+'
	line string
}

// splitLines cuts s into lines, each with its "\n" but perhaps the last.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineDiff returns an edit script turning a into b: Myers' O(ND) search
// for the shortest one, after the common prefix and suffix are set aside.
func lineDiff(a, b []string) []op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []op
	for _, l := range a[:pre] {
		out = append(out, op{' ', l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, op{' ', l})
	}
	return out
}

// myers is the greedy forward search of "An O(ND) Difference Algorithm"
// with the furthest-reaching points of every step kept for the walk back.
func myers(a, b []string) []op {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	max := min(n+m, maxEdit)
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := -1
	for d := 0; d <= max && found < 0; d++ {
		// Only the diagonals -d..d are reached at step d.
		snap := make([]int, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
			}
		}
		for k := -d; k <= d; k++ {
			snap[k+d] = v[off+k]
		}
		trace = append(trace, snap)
	}
	if found < 0 {
		return replaceAll(a, b)
	}
	// Walk back from (n, m) through the kept points.
	var rev []op
	x, y := n, m
	for d := found; d > 0; d-- {
		prev := trace[d-1]
		at := func(k int) int { return prev[k+d-1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			rev = append(rev, op{' ', a[x]})
		}
		if x == px {
			y--
			rev = append(rev, op{'+', b[y]})
		} else {
			x--
			rev = append(rev, op{'-', a[x]})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, op{' ', a[x]})
	}
	out := make([]op, len(rev))
	for i, o := range rev {
		out[len(rev)-1-i] = o
	}
	return out
}

func replaceAll(a, b []string) []op {
	out := make([]op, 0, len(a)+len(b))
	for _, l := range a {
		out = append(out, op{'-', l})
	}
	for _, l := range b {
		out = append(out, op{'+', l})
	}
	return out
}

// Unified returns the hunks of a unified diff from a to b, with Context
// lines of context: the "@@" lines and what follows them, without the
// "---"/"+++" header. A last line without a newline is followed by
// "\ No newline at end of file". Equal texts give "".
func Unified(a, b string) string {
	ops := lineDiff(splitLines(a), splitLines(b))
	var sb strings.Builder
	// Each hunk spans the changes closer than 2*Context lines apart.
	i := 0
	for i < len(ops) {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(i-Context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*Context {
				end = min(end+Context, len(ops))
				break
			}
			end = run
		}
		writeHunk(&sb, ops, start, end)
		i = end
	}
	return sb.String()
}

// writeHunk writes ops[start:end] as one hunk.
func writeHunk(sb *strings.Builder, ops []op, start, end int) {
	// Line numbers: count the lines of each side before start.
	aLine, bLine := 1, 1
	for _, o := range ops[:start] {
		if o.kind != '+' {
			aLine++
		}
		if o.kind != '-' {
			bLine++
		}
	}
	aLen, bLen := 0, 0
	for _, o := range ops[start:end] {
		if o.kind != '+' {
			aLen++
		}
		if o.kind != '-' {
			bLen++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aLine, aLen), hunkRange(bLine, bLen))
	for _, o := range ops[start:end] {
		sb.WriteByte(o.kind)
		sb.WriteString(o.line)
		if !strings.HasSuffix(o.line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange is "start,len" as diff(1) writes it: an empty range starts at
// the line before it, and a range of one line has no length.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(start-1) + ",0"
	case 1:
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(n)
}

// quotePath returns p as git names it in a diff header with prefix ("a/",
// "b/"): bare, or C-quoted whole when it holds a quote, a backslash, a
// control character or a byte that is not printable ASCII, so that a
// path can never forge a header line.
func quotePath(prefix, p string) string {
	plain := true
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return prefix + p
	}
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range []byte(prefix + p) {
		switch c {
		case '"', '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case '\n':
			sb.WriteString(`\n`)
		case '\t':
			sb.WriteString(`\t`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&sb, `\%03o`, c)
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}
