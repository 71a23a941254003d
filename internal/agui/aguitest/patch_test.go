package aguitest

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckerPatches applies STATE_DELTA operations to a snapshot: each
// case gives the state they make, or why they are refused.
func TestCheckerPatches(t *testing.T) {
	for _, c := range []struct {
		name, snapshot, delta string
		want, wantErr         string
	}{
		{"add a member", `{"a":1}`, `[{"op":"add","path":"/b","value":2}]`, `{"a":1,"b":2}`, ""},
		{"replace the document", `{"a":1}`, `[{"op":"replace","path":"","value":[1]}]`, `[1]`, ""},
		{"remove a member", `{"a":1,"b":2}`, `[{"op":"remove","path":"/a"}]`, `{"b":2}`, ""},
		{"insert into an array", `{"l":[1,3]}`, `[{"op":"add","path":"/l/1","value":2}]`, `{"l":[1,2,3]}`, ""},
		{"add at an array's length", `{"l":[1]}`, `[{"op":"add","path":"/l/1","value":2}]`, `{"l":[1,2]}`, ""},
		{"replace in an array", `{"l":[1,2]}`, `[{"op":"replace","path":"/l/0","value":0}]`, `{"l":[0,2]}`, ""},
		{"remove from an array", `{"l":[1,2,3]}`, `[{"op":"remove","path":"/l/1"}]`, `{"l":[1,3]}`, ""},
		{"append inside an array", `{"m":[[1],[2]]}`, `[{"op":"add","path":"/m/1/-","value":3}]`, `{"m":[[1],[2,3]]}`, ""},
		{"a member of an array's object", `{"m":[{"a":1}]}`, `[{"op":"replace","path":"/m/0/a","value":2}]`, `{"m":[{"a":2}]}`, ""},
		{"escaped names", `{}`, `[{"op":"add","path":"/a~0b","value":1},{"op":"add","path":"/~01","value":2}]`, `{"a~b":1,"~1":2}`, ""},
		{"ops in order", `{"a":1}`, `[{"op":"add","path":"/l","value":[]},{"op":"add","path":"/l/-","value":"x"}]`, `{"a":1,"l":["x"]}`, ""},

		{"op not a string", `{}`, `[{"op":1,"path":"/a"}]`, "", "delta[0]: op and path must be strings"},
		{"no path", `{}`, `[{"op":"remove"}]`, "", "op and path must be strings"},
		{"unknown op", `{}`, `[{"op":"move","from":"/a","path":"/b"}]`, "", `op "move" is not one this stream uses`},
		{"add without value", `{}`, `[{"op":"add","path":"/a"}]`, "", "add has no value"},
		{"replace without value", `{"a":1}`, `[{"op":"replace","path":"/a"}]`, "", "replace has no value"},
		{"remove the document", `{}`, `[{"op":"remove","path":""}]`, "", "cannot remove the whole document"},
		{"not a pointer", `{}`, `[{"op":"add","path":"a","value":1}]`, "", `path "a" is not a JSON pointer`},
		{"missing parent", `{}`, `[{"op":"add","path":"/x/y","value":1}]`, "", `path "/x/y": no member "x"`},
		{"parent index out of range", `{"m":[[1]]}`, `[{"op":"add","path":"/m/5/0","value":1}]`, "", `path "/m/5/0": no index "5"`},
		{"through a scalar", `{"a":1}`, `[{"op":"add","path":"/a/b/c","value":1}]`, "", `path "/a/b/c" goes through a scalar`},
		{"into a scalar", `{"a":1}`, `[{"op":"add","path":"/a/b","value":1}]`, "", `path "/a/b" goes through a scalar`},
		{"replace a missing member", `{"a":1}`, `[{"op":"replace","path":"/b","value":2}]`, "", `path "/b": no member "b" to replace`},
		{"remove a missing member", `{"a":1}`, `[{"op":"remove","path":"/b"}]`, "", `path "/b": no member "b" to remove`},
		{"replace past the end", `{"l":[1]}`, `[{"op":"replace","path":"/l/1","value":2}]`, "", `path "/l/1": no index "1"`},
		{"add past the end", `{"l":[1]}`, `[{"op":"add","path":"/l/2","value":2}]`, "", `path "/l/2": no index "2"`},
		{"remove at -", `{"l":[1]}`, `[{"op":"remove","path":"/l/-"}]`, "", `path "/l/-": no index "-"`},
		{"negative index", `{"l":[1]}`, `[{"op":"replace","path":"/l/-1","value":2}]`, "", `path "/l/-1": no index "-1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ch Checker
			for _, ev := range []string{start, `{"type":"STATE_SNAPSHOT","snapshot":` + c.snapshot + `}`} {
				if err := ch.Check([]byte(ev)); err != nil {
					t.Fatal(err)
				}
			}
			err := ch.Check([]byte(`{"type":"STATE_DELTA","delta":` + c.delta + `}`))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, _ := ch.State()
			if b, _ := json.Marshal(st); string(b) != c.want {
				t.Errorf("state %s, want %s", b, c.want)
			}
		})
	}
}
