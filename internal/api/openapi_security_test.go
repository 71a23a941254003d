package api

import (
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/auth"
)

// specOp is one operation of openapi.yaml.
type specOp struct {
	method, path string
	op           map[string]any
	params       []any // the path item's parameters, then the operation's
}

func (o specOp) String() string { return o.method + " " + o.path }

// specOps returns every operation of openapi.yaml's paths, sorted.
func specOps(doc map[string]any) []specOp {
	var ops []specOp
	for path, item := range doc["paths"].(map[string]any) {
		item := item.(map[string]any)
		shared, _ := item["parameters"].([]any)
		for key, op := range item {
			switch key {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				m := op.(map[string]any)
				own, _ := m["parameters"].([]any)
				ops = append(ops, specOp{strings.ToUpper(key), path, m, append(slices.Clone(shared), own...)})
			}
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].String() < ops[j].String() })
	return ops
}

// schemes returns the security schemes an operation accepts, each
// alternative's, the document's when the operation names none. An
// operation with an empty requirement ({}) needs no credential at all,
// and gets nil.
func (o specOp) schemes(doc map[string]any) []string {
	reqs, ok := o.op["security"].([]any)
	if !ok {
		reqs, _ = doc["security"].([]any)
	}
	var names []string
	for _, r := range reqs {
		m := r.(map[string]any)
		if len(m) == 0 {
			return nil
		}
		names = append(names, keys(m)...)
	}
	return names
}

// responds reports whether the operation declares status, and the
// shared response it refers to.
func (o specOp) responds(status string) (bool, string) {
	r, ok := o.op["responses"].(map[string]any)[status].(map[string]any)
	if !ok {
		return false, ""
	}
	ref, _ := r["$ref"].(string)
	return true, ref
}

// queryParam reports whether the operation declares a query parameter
// name, by itself or by reference to the components.
func (o specOp) queryParam(doc map[string]any, name string) bool {
	comps := doc["components"].(map[string]any)["parameters"].(map[string]any)
	for _, p := range o.params {
		m := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m = comps[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
		}
		if m["in"] == "query" && m["name"] == name {
			return true
		}
	}
	return false
}

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// target is a URL of the operation: {id} is acme's run, any other
// parameter a plain word.
func (o specOp) target() string {
	return pathParam.ReplaceAllStringFunc(o.path, func(p string) string {
		if p == "{id}" {
			return runA
		}
		return "x"
	})
}

// TestOpenAPISecurity holds what openapi.yaml says of each operation's
// credentials to what the router does with a keys file: an operation
// that declares a security scheme refuses a request without a key (401)
// and declares that 401 and the shared 403; a route that changes
// something refuses a read key or a foreign browser origin, and one that
// only reads refuses neither; and
// the operations that take a stream token in ?token= are exactly those
// that declare the streamToken scheme, with its parameter.
func TestOpenAPISecurity(t *testing.T) {
	doc := loadOpenAPI(t)
	ts := newTenants(t)
	h := newHarness(t, ts.config(), tenantService(t, &calls{}, nil))
	token := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleRead)).Token
	readKey := ts.bearer(t, keyID(tenantAcme, auth.RoleRead))
	for _, o := range specOps(doc) {
		t.Run(o.String(), func(t *testing.T) {
			schemes := o.schemes(doc)
			checkDeclaredErrors(t, o, schemes)
			keyed := len(schemes) > 0
			resp, b := h.do(t, o.method, o.target(), "")
			if got := resp.StatusCode == http.StatusUnauthorized; got != (keyed || ownProof[o.String()]) {
				t.Errorf("without a key: %d %.200s; the spec declares security %v", resp.StatusCode, b, schemes)
			}
			if !keyed {
				return
			}
			declared403, _ := o.responds("403")
			resp, b = h.do(t, o.method, o.target(), "", readKey...)
			byRole := resp.StatusCode == http.StatusForbidden
			resp2, b2 := h.do(t, o.method, o.target(), "", append(ts.bearer(t, keyID(tenantAcme, auth.RoleAdmin)), "Origin", "https://elsewhere.example")...)
			byOrigin := resp2.StatusCode == http.StatusForbidden
			if (byRole || byOrigin) && !declared403 {
				t.Errorf("a read key: %d %.200s; a foreign origin: %d %.200s; the spec declares no 403", resp.StatusCode, b, resp2.StatusCode, b2)
			}
			if safe := o.method == http.MethodGet || o.method == http.MethodHead; safe == (byRole || byOrigin) {
				// Every role reads and any origin may read; everything
				// else needs more than a read key from elsewhere.
				t.Errorf("%s: a read key got %d, a foreign origin %d", o.method, resp.StatusCode, resp2.StatusCode)
			}
			declaresToken := slices.Contains(schemes, "streamToken")
			if declaresToken != o.queryParam(doc, "token") {
				t.Errorf("security %v, but a token query parameter declared: %v", schemes, !declaresToken)
			}
			resp, b = h.do(t, o.method, o.target()+"?token="+token, "")
			if accepted := resp.StatusCode != http.StatusUnauthorized; accepted != declaresToken {
				t.Errorf("with ?token= and no key: %d %.200s; the spec declares security %v", resp.StatusCode, b, schemes)
			}
		})
	}
}

// checkDeclaredErrors fails unless an operation that needs a credential
// declares the shared 401 and 403, that one that needs none declares neither 401
// nor 403, and that a 403 is the shared Forbidden.
// ownProof are the operations that take no API key but a proof of their
// own (a trigger's secret), and answer 401 without it.
var ownProof = map[string]bool{"POST /v1/triggers/{id}/deliveries": true}

func checkDeclaredErrors(t *testing.T, o specOp, schemes []string) {
	t.Helper()
	keyed := len(schemes) > 0
	has401, ref401 := o.responds("401")
	has403, ref403 := o.responds("403")
	switch {
	case keyed && (!has401 || !has403):
		t.Errorf("needs %v but declares 401 %v and 403 %v; it must declare both", schemes, has401, has403)
	case keyed && ref401 != "#/components/responses/Unauthorized":
		t.Errorf("its 401 is %q, not the shared Unauthorized", ref401)
	case !keyed && ownProof[o.String()] && (!has401 || ref401 != "" || has403):
		t.Errorf("proves itself without a key: it must declare its own 401 (%v, %q) and no 403 (%v)", has401, ref401, has403)
	case !keyed && !ownProof[o.String()] && (has401 || has403):
		t.Errorf("needs no key but declares 401 (%v) or 403 (%v)", has401, has403)
	}
	if has403 && ref403 != "#/components/responses/Forbidden" {
		t.Errorf("its 403 is %q, not the shared Forbidden", ref403)
	}
}
