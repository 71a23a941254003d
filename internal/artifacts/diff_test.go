package artifacts

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// apply applies the hunks of a Unified diff to a, checking each context
// and deleted line; it is the property the diff must have.
func apply(t testing.TB, a, hunks string) string {
	t.Helper()
	src := splitLines(a)
	var out []string
	at := 0 // next line of src to copy
	lines := strings.SplitAfter(hunks, "\n")
	head := regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n$`)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l == "" {
			continue
		}
		m := head.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %d is not a hunk header: %q\n%s", i, l, hunks)
		}
		start, _ := strconv.Atoi(m[1])
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		if n > 0 {
			start--
		}
		if start < at {
			t.Fatalf("hunk %q starts before the last one ended", l)
		}
		out = append(out, src[at:start]...)
		at = start
		for i+1 < len(lines) && lines[i+1] != "" && !strings.HasPrefix(lines[i+1], "@@") {
			i++
			body := lines[i]
			if i+1 < len(lines) && lines[i+1] == "\\ No newline at end of file\n" {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch body[0] {
			case ' ', '-':
				if at >= len(src) || src[at] != body[1:] {
					t.Fatalf("hunk line %q does not match the source line %d", body, at)
				}
				if body[0] == ' ' {
					out = append(out, src[at])
				}
				at++
			case '+':
				out = append(out, body[1:])
			default:
				t.Fatalf("bad hunk line %q", body)
			}
		}
	}
	out = append(out, src[at:]...)
	return strings.Join(out, "")
}

func TestUnified(t *testing.T) {
	for _, c := range []struct{ name, a, b, want string }{
		{"equal", "x\ny\n", "x\ny\n", ""},
		{"add to empty", "", "hello\n", "@@ -0,0 +1 @@\n+hello\n"},
		{"delete all", "a\nb\n", "", "@@ -1,2 +0,0 @@\n-a\n-b\n"},
		{"no newline", "a\n", "a", "@@ -1 +1 @@\n-a\n+a\n\\ No newline at end of file\n"},
		{"middle", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			"@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			"@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Unified(c.a, c.b)
			if got != c.want {
				t.Errorf("Unified(%q, %q) =\n%s\nwant\n%s", c.a, c.b, got, c.want)
			}
			if back := apply(t, c.a, got); back != c.b {
				t.Errorf("applied: %q, want %q", back, c.b)
			}
		})
	}
}

// TestUnifiedLarge: a diff far past the search's bound is still correct.
func TestUnifiedLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&a, "line %d\n", i)
		if i%2 == 0 {
			fmt.Fprintf(&b, "changed %d\n", i)
		} else {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	d := Unified(a.String(), b.String())
	if back := apply(t, a.String(), d); back != b.String() {
		t.Fatal("the large diff does not apply")
	}
}

func TestBound(t *testing.T) {
	d := "line one\nline two\nline three\n"
	got, cut := Bound(d, 15)
	if !cut || got != "line one\n"+fmt.Sprintf(Mark, len(d)-9) {
		t.Errorf("Bound = %q, %v", got, cut)
	}
	if got, cut := Bound(d, 100); cut || got != d {
		t.Errorf("Bound under the limit = %q, %v", got, cut)
	}
}

func TestQuotePath(t *testing.T) {
	if got := quotePath("a/", "dir/x.txt"); got != "a/dir/x.txt" {
		t.Errorf("plain: %s", got)
	}
	if got := quotePath("b/", "evil\n+++ b/x"); got != `"b/evil\n+++ b/x"` {
		t.Errorf("newline: %s", got)
	}
}

func FuzzUnified(f *testing.F) {
	f.Add("", "")
	f.Add("a\nb\nc\n", "a\nc\n")
	f.Add("a", "a\n")
	f.Add("x\ny\nz", "z\ny\nx\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\nthree\n4\n5\n6\n7\n8\nnine\n10\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := Unified(a, b)
		if a == b && d != "" {
			t.Fatalf("equal texts gave %q", d)
		}
		if back := apply(t, a, d); back != b {
			t.Fatalf("Unified(%q, %q) = %q applies to %q", a, b, d, back)
		}
		if got, cut := Bound(d, 64); len(got) > 64+len(Mark)+20 || (cut != (len(d) > 64)) {
			t.Fatalf("Bound(%q) = %q, %v", d, got, cut)
		}
	})
}
