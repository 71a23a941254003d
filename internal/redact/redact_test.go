package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func mustNew(t testing.TB, opts Options) *Redactor {
	t.Helper()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// encode is s as encoding/json writes it, quotes included.
func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLiterals(t *testing.T) {
	r := mustNew(t, Options{Literals: []string{"hunter2hunter2", "short", "", "12345678"}, NoBuiltin: true})
	for _, c := range []struct{ in, want string }{
		{"the password is hunter2hunter2.", "the password is " + Mark + "."},
		{"hunter2hunter2hunter2hunter2", Mark}, // touching secrets are one mark
		{"a short word stays", "a short word stays"},
		{"id 12345678 and 123456789", "id " + Mark + " and " + Mark + "9"},
		{"nothing here", "nothing here"},
	} {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := string(r.Bytes([]byte(c.in))); got != c.want {
			t.Errorf("Bytes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMinLiteral(t *testing.T) {
	r := mustNew(t, Options{Literals: []string{"mock", "1", "abcdefg"}, NoBuiltin: true})
	if got := r.String("mock 1 abcdefg"); got != "mock 1 abcdefg" {
		t.Errorf("short literals redacted: %q", got)
	}
	r = mustNew(t, Options{Literals: []string{"mock"}, MinLiteral: 4, NoBuiltin: true})
	if got := r.String("a mock"); got != "a "+Mark {
		t.Errorf("MinLiteral 4: %q", got)
	}
	// A value without a letter or digit is never a secret.
	r = mustNew(t, Options{Literals: []string{"--------", `"","",""`}, NoBuiltin: true})
	if got := r.String("---------- "); got != "---------- " {
		t.Errorf("punctuation redacted: %q", got)
	}
}

func TestJSONEscapedLiterals(t *testing.T) {
	secrets := []string{`pa/ss"word\with`, "clé-secrète-été", "tab\tand<html>&", "emoji🔑key🔑", "line\nbreak1"}
	r := mustNew(t, Options{Literals: secrets, NoBuiltin: true})
	for _, s := range secrets {
		doc := encode(t, map[string]any{"text": "before " + s + " after", "n": 1})
		got := r.Bytes(doc)
		if !json.Valid(got) {
			t.Fatalf("%q: invalid JSON out: %s", s, got)
		}
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if want := "before " + Mark + " after"; back["text"] != want {
			t.Errorf("%q: text %q, want %q (json %s)", s, back["text"], want, got)
		}
		// The same text quoted in a line of JSON that is itself inside
		// an event (agent.unparsed), escaped twice.
		inner := encode(t, map[string]string{"out": s})
		outer := encode(t, map[string]string{"line": string(inner)})
		if got := r.Bytes(outer); bytes.Contains(got, []byte(s)) || !bytes.Contains(got, []byte(Mark)) || !json.Valid(got) {
			t.Errorf("%q twice escaped: %s", s, got)
		}
		// Python's ensure_ascii and "\/" forms.
		ascii := []byte(`{"t":"` + asciiJSON(s, false) + `"}`)
		if got := r.Bytes(ascii); !bytes.Contains(got, []byte(Mark)) {
			t.Errorf("%q ascii-escaped: %s", s, got)
		}
	}
	slash := mustNew(t, Options{Literals: []string{"https://secret.example/key"}, NoBuiltin: true})
	if got := slash.Bytes([]byte(`{"u":"https:\/\/secret.example\/key"}`)); string(got) != `{"u":"`+Mark+`"}` {
		t.Errorf(`"\/" form: %s`, got)
	}
}

func TestJSONStaysValid(t *testing.T) {
	r := mustNew(t, Options{Literals: []string{"nabcdefgh", "12345678", "u00e9abcdef"}, NoBuiltin: true,
		Patterns: []string{`token=\S+`, `[,:]{3}`}})
	for _, c := range []struct{ in, want string }{
		// "\n" then "abcdefgh": the secret's bytes, not the secret.
		// Half an escape is never replaced: the whole character goes.
		{`{"a":"x\nabcdefgh"}`, `{"a":"x` + Mark + `"}`},
		// A secret in a bare number: the value becomes the mark.
		{`{"n":123456789,"m":[12345678]}`, `{"n":"` + Mark + `","m":["` + Mark + `"]}`},
		// An operator pattern that would eat the closing quote.
		{`{"a":"token=abc","b":"c"}`, `{"a":"` + Mark + `","b":"c"}`},
		// The secret's bytes begin inside an escape: the character goes too.
		{`{"a":"\u00e9abcdefg"}`, `{"a":"` + Mark + `g"}`},
		{`{"a":"token=ab\"cd"}`, `{"a":"` + Mark + `"}`},
	} {
		got := r.Bytes([]byte(c.in))
		if string(got) != c.want {
			t.Errorf("Bytes(%s) = %s, want %s", c.in, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("Bytes(%s): invalid JSON %s", c.in, got)
		}
	}
}

func TestBuiltinPatterns(t *testing.T) {
	r := mustNew(t, Options{})
	for _, c := range []struct{ name, secret string }{
		{"anthropic", "sk-ant-api03-" + strings.Repeat("aB3_-", 18)},
		{"openai project", "sk-proj-" + strings.Repeat("Xy9_", 12)},
		{"openai legacy", "sk-" + strings.Repeat("A1b2", 12)},
		{"github classic", "ghp_" + strings.Repeat("a1B2", 9)},
		{"github oauth", "gho_" + strings.Repeat("a1B2", 9)},
		{"github fine-grained", "github_pat_11ABCDEFG0" + strings.Repeat("x_Y", 20)},
		{"google", "AIza" + strings.Repeat("Sy-_9", 7)},
		{"aws", "AKIAIOSFODNN7EXAMPLE"},
		{"slack", "xoxb-1234567890-abcdefghij"},
		{"agentgate", "agk_" + strings.Repeat("Ab-_9", 8)},
	} {
		for _, in := range []string{c.secret, "key=" + c.secret + " next", "line\n" + c.secret + "\n"} {
			got := r.String(in)
			if strings.Contains(got, c.secret) || !strings.Contains(got, Mark) {
				t.Errorf("%s: String(%q) = %q", c.name, in, got)
			}
			doc := encode(t, map[string]string{"text": in})
			if got := r.Bytes(doc); bytes.Contains(got, []byte(c.secret)) || !json.Valid(got) {
				t.Errorf("%s: Bytes(%s) = %s", c.name, doc, got)
			}
		}
	}
	if got := r.String("Authorization: Bearer abc.def-ghi_jkl"); got != "Authorization: Bearer "+Mark {
		t.Errorf("bearer: %q", got)
	}
	for _, plain := range []string{"task-manager-configuration-file", "ask-me-anything", "sk-short", "Bearer of bad news", "the AKIA prefix"} {
		if got := r.String(plain); got != plain {
			t.Errorf("false positive: %q → %q", plain, got)
		}
	}
	off := mustNew(t, Options{NoBuiltin: true})
	if s := "sk-ant-api03-" + strings.Repeat("a", 40); off.String(s) != s {
		t.Error("NoBuiltin still redacts")
	}
}

func TestOperatorPatterns(t *testing.T) {
	r := mustNew(t, Options{NoBuiltin: true, Patterns: []string{`password=(?P<secret>[^&\s"\\]+)`, `corp-[0-9]{6}`}})
	if got := r.String("url?user=a&password=xyz&x=1 corp-123456"); got != "url?user=a&password="+Mark+"&x=1 "+Mark {
		t.Errorf("got %q", got)
	}
	for _, bad := range []string{`(`, `a*`} {
		if _, err := New(Options{Patterns: []string{bad}}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

func TestWith(t *testing.T) {
	base := mustNew(t, Options{Literals: []string{"base-secret-1"}})
	run := base.With("run-secret-22", "x")
	if got := run.String("base-secret-1 run-secret-22 sk-ant-api03-" + strings.Repeat("z", 30)); got != Mark+" "+Mark+" "+Mark {
		t.Errorf("derived: %q", got)
	}
	if got := base.String("run-secret-22"); got != "run-secret-22" {
		t.Errorf("With changed its base: %q", got)
	}
	if &run.patterns[0] != &base.patterns[0] {
		t.Error("With copied the patterns")
	}
	if base.With("short") != base {
		t.Error("With of nothing new is not its base")
	}
	var none *Redactor
	if none.String("run-secret-22") != "run-secret-22" || none.Bytes(nil) != nil {
		t.Error("nil redacts")
	}
	lit := none.With("run-secret-22")
	if got := lit.String("run-secret-22 sk-ant-api03-" + strings.Repeat("z", 30)); got != Mark+" sk-ant-api03-"+strings.Repeat("z", 30) {
		t.Errorf("nil.With: %q", got)
	}
	if none.With() != nil {
		t.Error("nil.With() is not nil")
	}
}

func TestStream(t *testing.T) {
	secret := "sk-ant-api03-" + strings.Repeat("Q7", 20)
	r := mustNew(t, Options{Literals: []string{"my literal secret"}})
	text := "key one: " + secret + ", then my literal secret, then Bearer tok3n.value.x, and é done"
	// Every way of splitting text in two or three pieces.
	for i := 0; i <= len(text); i++ {
		for _, j := range []int{i, (i + len(text)) / 2} {
			s := r.Stream()
			var got strings.Builder
			for _, p := range []string{text[:i], text[i:j], text[j:]} {
				out := s.Write(p)
				if !utf8.ValidString(out) {
					t.Fatalf("split %d,%d: a piece cuts a rune: %q", i, j, out)
				}
				got.WriteString(out)
			}
			got.WriteString(s.Flush())
			if want := r.String(text); got.String() != want {
				t.Fatalf("split %d,%d: %q, want %q", i, j, got.String(), want)
			}
		}
	}
	var none *Redactor
	if none.Stream().Write("abc") != "abc" {
		t.Error("nil stream changes text")
	}
}

func TestCore(t *testing.T) {
	secret := "sk-ant-api03-" + strings.Repeat("k", 40)
	r := mustNew(t, Options{Literals: []string{"literal-value-1"}})
	obs, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(Core(obs, r)).With(zap.String("with", "literal-value-1"))
	log.Info("saw "+secret,
		zap.String("s", "x literal-value-1 y"),
		zap.ByteString("b", []byte(secret)),
		zap.Error(errors.New("exit: "+secret)),
		zap.Stringer("st", stringer("literal-value-1")),
		zap.Strings("arr", []string{"ok", secret}),
		zap.Object("obj", obj{secret}),
		zap.Int("n", 3),
	)
	if got := logs.Len(); got != 1 {
		t.Fatalf("%d entries", got)
	}
	e := logs.All()[0]
	all := e.Message
	for k, v := range e.ContextMap() {
		all += " " + k + "=" + fmtAny(v)
	}
	if strings.Contains(all, secret) || strings.Contains(all, "literal-value-1") {
		t.Errorf("secret logged: %s", all)
	}
	if n := strings.Count(all, Mark); n != 8 {
		t.Errorf("%d marks, want 8: %s", n, all)
	}
	if e.ContextMap()["n"] != int64(3) {
		t.Errorf("an int field changed: %v", e.ContextMap()["n"])
	}
	if !zap.New(Core(obs, r)).Core().Enabled(zapcore.DebugLevel) || zapcore.LevelOf(Core(obs, r)) != zapcore.DebugLevel {
		t.Error("level lost")
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

type obj struct{ v string }

func (o obj) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("v", o.v)
	return nil
}

func fmtAny(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNoAllocWithoutMatch(t *testing.T) {
	r := mustNew(t, Options{Literals: []string{"literal-value-1"}}).With("another-secret-2")
	b := bytes.Repeat([]byte(`{"text":"nothing to see here, sk- and gh and Bearer"} `), 100)
	s := string(b)
	check := t.Errorf
	if raceEnabled {
		check = t.Logf // see raceEnabled; the run without -race checks it
	}
	if n := testing.AllocsPerRun(20, func() { r.Bytes(b) }); n != 0 {
		check("Bytes allocates %v times without a match", n)
	}
	if n := testing.AllocsPerRun(20, func() { _ = r.String(s) }); n != 0 {
		check("String allocates %v times without a match", n)
	}
}

func event64k(secret string) []byte {
	text := strings.Repeat("all work and no play makes a dull log line; ", 64<<10/45)
	if secret != "" {
		text = text[:len(text)/2] + secret + text[len(text)/2:]
	}
	b, _ := json.Marshal(map[string]any{"v": 1, "run_id": "r1", "seq": 7, "type": "tool_call.completed",
		"data": map[string]any{"id": "t1", "output": text}})
	return b
}

// BenchmarkBytes measures a 64 KiB event with and without a secret,
// against bytes.Contains of one literal over the same event: the floor of
// any scan.
func BenchmarkBytes(b *testing.B) {
	lit := "sk-ant-api03-" + strings.Repeat("Zz", 20)
	r := mustNew(b, Options{Patterns: []string{`corp-[0-9]{6}`}}).With(lit, "second-credential-2")
	clean, dirty := event64k(""), event64k(lit)
	for _, c := range []struct {
		name string
		ev   []byte
		f    func([]byte) bool
	}{
		{"baseline_contains", clean, func(ev []byte) bool { return bytes.Contains(ev, []byte(lit)) }},
		{"no_match", clean, func(ev []byte) bool { return len(r.Bytes(ev)) > 0 }},
		{"match", dirty, func(ev []byte) bool { return len(r.Bytes(ev)) > 0 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.ev)))
			b.ReportAllocs()
			for b.Loop() {
				c.f(c.ev)
			}
		})
	}
}

// FuzzBytes: Bytes never panics, never leaves a literal in its output,
// and keeps valid JSON valid.
func FuzzBytes(f *testing.F) {
	f.Add([]byte(`{"a":"x\nabcdefgh","n":123456789}`), "nabcdefgh")
	f.Add([]byte(`{"text":"key sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaaa\"}"}`), `pa"ss\word`)
	f.Add([]byte(`["\u00e9abcdefg", "clé-secrète-été", 1e12345678]`), "clé-secrète-été")
	f.Add([]byte(`{"line":"{\"out\":\"pa\\\"ss\\\\word\"}"}`), `pa"ss\word`)
	f.Add([]byte(`not json at all Bearer abcdefghijk`), "at all Bearer")
	f.Add([]byte(`{"a" : 12345678, "b":true}`), `a" : 12345678`)
	f.Add([]byte(`{"out":"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`), "AKIAIOSFODNN7EXAMPLE")
	f.Add([]byte(`{"line":"{\"SecretAccessKey\":\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"}"}`), "tok=abcdefgh")
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n"), "password=hunter22x")
	f.Fuzz(func(t *testing.T, doc []byte, secret string) {
		r, err := New(Options{Literals: []string{secret}, Patterns: []string{`tok=[^ ]+`}})
		if err != nil {
			t.Fatal(err)
		}
		out := r.Bytes(doc)
		if r.longest > 0 && bytes.Contains(out, []byte(secret)) {
			t.Errorf("secret %q left in %q (from %q)", secret, out, doc)
		}
		if json.Valid(doc) && !json.Valid(out) {
			t.Errorf("valid JSON %q became invalid %q", doc, out)
		}
		if got := r.String(string(doc)); r.longest > 0 && strings.Contains(got, secret) {
			t.Errorf("String left %q in %q", secret, got)
		}
	})
}
