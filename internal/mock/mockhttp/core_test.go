package mockhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

type entry struct{ n int }

func TestBook(t *testing.T) {
	var b Book[entry]
	for i := 1; i <= 3; i++ {
		if got := b.Next(); got != i {
			t.Fatalf("Next = %d, want %d", got, i)
		}
		e := &entry{n: i}
		b.Record(e)
		b.Update(func() { e.n *= 10 })
	}
	if got := b.Entries(); !reflect.DeepEqual(got, []entry{{10}, {20}, {30}}) {
		t.Fatalf("entries = %v", got)
	}
	b.Limit(2)
	b.Record(&entry{n: 4})
	if got := b.Entries(); !reflect.DeepEqual(got, []entry{{30}, {4}}) {
		t.Fatalf("limited entries = %v", got)
	}
	b.Reset()
	if len(b.Entries()) != 0 || b.Next() != 4 {
		t.Fatal("Reset kept entries, or restarted the numbering")
	}
	if got := Filter([]entry{{1}, {2}, {3}}, func(e entry) bool { return e.n != 2 }); !reflect.DeepEqual(got, []entry{{1}, {3}}) {
		t.Fatalf("Filter = %v", got)
	}
	if !Any([]entry{{1}, {2}}, func(e entry) bool { return e.n == 2 }) || Any(nil, func(entry) bool { return true }) {
		t.Fatal("Any")
	}
}

func TestSequenceAndScript(t *testing.T) {
	step := func(s string) Scenario[int, string] { return Func[int, string](func(*int) string { return s }) }
	seq := Sequence("empty", step("a"), step("b"))
	sc := NewScript[int, string](seq)
	var got []string
	for range 4 {
		got = append(got, sc.Respond(new(int)))
	}
	if strings.Join(got, ",") != "a,b,b,b" {
		t.Fatalf("sequence answered %v", got)
	}
	if r := Sequence[int, string]("empty").Respond(new(int)); r != "empty" {
		t.Fatalf("empty sequence answered %q", r)
	}
	var c Counter
	if c.Next() != 1 || c.Next() != 2 {
		t.Fatal("Counter")
	}
}

func TestCatalog(t *testing.T) {
	cat := Catalog[string](func(command string) map[string]func() string {
		return map[string]func() string{
			"b": func() string { return Or(command, "default") },
			"a": func() string { return "a" },
		}
	})
	if got := cat.Names(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v", got)
	}
	if s, err := cat.Named("b", ""); err != nil || s != "default" {
		t.Fatalf("Named(b) = %q, %v", s, err)
	}
	if s, err := cat.Named("b", "ls"); err != nil || s != "ls" {
		t.Fatalf("Named(b, ls) = %q, %v", s, err)
	}
	if _, err := cat.Named("zz", ""); err == nil || !strings.Contains(err.Error(), "a, b") {
		t.Fatalf("unknown name: %v", err)
	}
}

func TestSSE(t *testing.T) {
	rec := httptest.NewRecorder()
	o := StartSSE(rec)
	o.Event("start", map[string]int{"n": 1})
	o.Data("x")
	o.Raw([]byte("[DONE]"))
	if o.Err() != nil {
		t.Fatal(o.Err())
	}
	want := "event: start\ndata: {\"n\":1}\n\ndata: \"x\"\n\ndata: [DONE]\n\n"
	if got := rec.Body.String(); got != want || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream %q (%s), want %q", got, rec.Header().Get("Content-Type"), want)
	}
	rec = httptest.NewRecorder()
	o = StartSSE(rec)
	o.CRLF()
	o.Data(1)
	o.Event("bad", func() {}) // not JSON: the stream stops here
	o.Data(2)
	if got := rec.Body.String(); got != "data: 1\r\n\r\n" || o.Err() == nil {
		t.Fatalf("stream %q, err %v", got, o.Err())
	}
	if got := Chunks("a b  c"); !reflect.DeepEqual(got, []string{"a ", "b ", " ", "c"}) {
		t.Fatalf("Chunks = %q", got)
	}
}

func TestCoreServes(t *testing.T) {
	var c Core[entry, string, string]
	if err := c.Listen("mock test", "127.0.0.1:0", "/v1", nil); err == nil {
		t.Fatal("Listen accepted a nil scenario")
	}
	if err := c.Listen("mock test", "127.0.0.1:0", "/v1", Func[string, string](func(r *string) string { return "re:" + *r })); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.HasSuffix(c.URL, "/v1") || !strings.HasPrefix(c.URL, "http://127.0.0.1:") {
		t.Fatalf("URL = %q", c.URL)
	}
	c.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := ReadBody(w, r, 4)
		req := string(b)
		WriteJSON(w, http.StatusOK, c.Respond(&req))
	}))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(c.URL, "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `"re:hi"` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer %s", b)
	}
}
