package triggers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// The bounds of a prompt template and of its work on one delivery.
const (
	// MaxTemplateBytes bounds a prompt template's text.
	MaxTemplateBytes = 64 << 10
	// MaxTruncRunes bounds trunc's count.
	MaxTruncRunes = 100_000
	// MaxRangeSteps bounds what a template's ranges do over one payload:
	// the nodes inside range bodies times the longest list or object in
	// the payload. Ranges do not nest, so that product bounds every
	// iteration of every range; a template whose ranges could take longer
	// than this fails on that payload before it runs.
	MaxRangeSteps = 1 << 22
	// MaxComputedBytes bounds what json, trunc and the printing of lists
	// and objects compute in one rendering, shown or not (json inside an
	// if costs as much as json printed): each is as long as the payload.
	MaxComputedBytes = 16 << 20
)

// comparisonCost is what comparing two values, or looking up a key,
// counts as computed besides the strings compared, so that comparing
// numbers counts too. Every comparison takes a node of the template (an
// argument, or a call in a pipeline for le and gt, which compare twice),
// so MaxRangeSteps bounds their number: this cost alone stays within a
// quarter of MaxComputedBytes, and fails no template the range bound lets
// run.
const comparisonCost = 1

// fieldPrompt is the run field the template is.
const fieldPrompt = "prompt"

// templateName names the one template; errors quote it as "prompt:1:5".
const templateName = "prompt"

// showFunc prints every action's value (see renderFuncs.show). The checker
// refuses it in a template's text, so only the rewritten actions call it.
const showFunc = "show"

// allowedFunctions lists, for a person, the functions a template may call.
const allowedFunctions = "index, len, eq, ne, lt, le, gt, ge, and, or, not, json and trunc"

// maxQuoted bounds the text of a template's own error quoted back.
const maxQuoted = 300

// Template is a run's prompt as a Go text/template over a delivery:
// {"payload": the delivery's JSON body, "headers": its headers}. It is
// checked when parsed (see ParseTemplate) and safe for concurrent use.
type Template struct {
	tmpl *template.Template
	// rangeNodes counts the nodes inside range bodies: what one step of
	// every range does at most.
	rangeNodes int
}

// RenderError is why a delivery's prompt could not be made from its
// template: a sentence for the trigger's owner.
type RenderError struct{ Reason string }

func (e *RenderError) Error() string { return e.Reason }

// ParseTemplate reads a prompt template of at most MaxTemplateBytes.
// It may hold text, actions with field chains (.payload.a.b, $.payload,
// variables), comments, if, else, with and range, and call only the
// functions index, len, eq, ne, lt, le, gt, ge, and, or, not, json (a
// value as compact JSON) and trunc (trunc N s: the first N runes of s, N
// at most MaxTruncRunes). It may not define or call templates, nest a
// range inside a range, or range over anything but the delivery's data (a
// field chain or a variable holding one): so no range over a number. A
// missing key or JSON null prints as nothing. Every error is a
// *runs.FieldError for the field "prompt".
func ParseTemplate(text string) (*Template, error) {
	if len(text) > MaxTemplateBytes {
		return nil, runs.Invalid(fieldPrompt, fmt.Sprintf("is %d bytes; a prompt template may be at most %d", len(text), MaxTemplateBytes))
	}
	tree, err := parseTree(text)
	if err != nil {
		return nil, err
	}
	c := &checker{tree: tree, vars: []variable{{name: "$", data: true}}, dotData: true}
	if err := c.list(tree.Root); err != nil {
		return nil, err
	}
	tmpl, err := template.New(templateName).Option("missingkey=zero").AddParseTree(templateName, tree)
	if err != nil {
		return nil, runs.Invalid(fieldPrompt, "is not a valid template: "+templateMessage(err))
	}
	return &Template{tmpl: tmpl, rangeNodes: c.rangeNodes}, nil
}

// parseTree parses text without checking its functions (the checker does,
// with a clearer message) and refuses definitions of other templates.
func parseTree(text string) (*parse.Tree, error) {
	tree := parse.New(templateName)
	tree.Mode = parse.SkipFuncCheck
	set := map[string]*parse.Tree{}
	if _, err := tree.Parse(text, "", "", set); err != nil {
		return nil, runs.Invalid(fieldPrompt, "is not a valid template: "+templateMessage(err))
	}
	if len(set) != 1 || set[templateName] != tree {
		return nil, runs.Invalid(fieldPrompt, "defines a template ({{define}} or {{block}}), which a prompt template may not: write the prompt as one template")
	}
	return tree, nil
}

// templateMessage is a text/template error without its package's prefix,
// clipped.
func templateMessage(err error) string {
	return clip.Text(strings.TrimPrefix(err.Error(), "template: "), maxQuoted)
}

// Render executes the template over a delivery: payload is its body as
// encoding/json decodes it into an any (json.Number too), headers its
// headers, given to the template by canonical name with their first value,
// less those that carry secrets (Authorization, Proxy-Authorization,
// Cookie, X-Hub-Signature*, Webhook-Signature, X-Gitlab-Token). The
// prompt is at most limit bytes. A failure of the template is a
// *RenderError: "the prompt would be longer than N bytes", or "the prompt
// template failed: ..." with the template's own message; a payload of
// another type than encoding/json makes is a plain error. The payload's
// text is only ever data: "{{...}}" in it prints as is.
func (t *Template) Render(payload any, headers http.Header, limit int) (string, error) {
	shown := promptHeaders(headers)
	if err := t.checkSteps(payload, shown); err != nil {
		return "", err
	}
	tmpl, err := t.tmpl.Clone()
	if err != nil {
		return "", fmt.Errorf("clone the prompt template: %w", err)
	}
	funcs := &renderFuncs{}
	tmpl.Funcs(funcs.funcMap())
	out := &boundedWriter{limit: limit}
	err = tmpl.Execute(out, map[string]any{"payload": payload, "headers": shown})
	switch {
	case errors.Is(err, errPastLimit):
		return "", &RenderError{Reason: fmt.Sprintf("the prompt would be longer than %d bytes", limit)}
	case err != nil:
		return "", &RenderError{Reason: "the prompt template failed: " + templateMessage(err)}
	}
	return out.buf.String(), nil
}

// checkSteps refuses a payload over which the template's ranges could
// take more than MaxRangeSteps: each range goes over one list or object,
// of the payload, of the headers or the data's two keys.
func (t *Template) checkSteps(payload any, shown map[string]string) error {
	widest, err := widestValue(payload)
	if err != nil {
		return err
	}
	if steps := max(widest, len(shown), 2); t.rangeNodes > 0 && steps > MaxRangeSteps/t.rangeNodes {
		return &RenderError{Reason: fmt.Sprintf("the prompt template failed: its ranges (%d nodes) over a list or object of %d items would take more than %d steps", t.rangeNodes, steps, MaxRangeSteps)}
	}
	return nil
}

// promptHeaders returns what a template sees of headers: each by its
// canonical name, its first value, none that carries a secret. Names are
// taken in sorted order, so of two spellings of one name the canonical
// one (upper case sorts first) wins, every time.
func promptHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		canonical := http.CanonicalHeaderKey(name)
		if _, seen := out[canonical]; seen || len(h[name]) == 0 || secretHeader(canonical) {
			continue
		}
		out[canonical] = h[name][0]
	}
	return out
}

// secretHeader reports the headers that carry a secret or a proof made
// with one, which a prompt (and so an agent, and its logs) must never see.
func secretHeader(canonical string) bool {
	switch canonical {
	case "Authorization", "Proxy-Authorization", "Cookie", "Webhook-Signature", "X-Gitlab-Token":
		return true
	}
	return strings.HasPrefix(canonical, "X-Hub-Signature")
}

// widestValue returns the length of the longest list or object in v, which
// must be what encoding/json decodes into an any: no other type, so
// nothing a range could turn into a count.
func widestValue(v any) (int, error) {
	switch v := v.(type) {
	case nil, bool, float64, string, json.Number:
		return 0, nil
	case []any:
		return widestOf(len(v), slices.Values(v))
	case map[string]any:
		return widestOf(len(v), maps.Values(v))
	}
	return 0, fmt.Errorf("the payload holds a %T, which encoding/json does not decode to", v)
}

func widestOf(n int, values func(yield func(any) bool)) (int, error) {
	for e := range values {
		w, err := widestValue(e)
		if err != nil {
			return 0, err
		}
		n = max(n, w)
	}
	return n, nil
}

// errPastLimit is boundedWriter's error once a write would pass its limit:
// text/template stops at the first failed write and returns it as is.
var errPastLimit = errors.New("the prompt is past its limit")

// boundedWriter keeps at most limit bytes and fails the write that would
// pass it, so that execution stops there.
type boundedWriter struct {
	buf   strings.Builder
	limit int
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit-w.buf.Len() {
		return 0, errPastLimit
	}
	return w.buf.Write(p)
}

// renderFuncs are the functions of one rendering: they count what they
// compute against MaxComputedBytes.
type renderFuncs struct {
	computed int
}

// funcMap holds json, trunc and show, and index, eq, ne, lt, le, gt and
// ge in place of text/template's built-ins (a template's own functions
// come first), to count the strings they compare or look up: two long
// equal strings compared in a range, item after item, take seconds of
// CPU, which the built-ins would not count. len stays the built-in: it is
// O(1) on every value a template sees.
func (f *renderFuncs) funcMap() template.FuncMap {
	return template.FuncMap{
		"json": f.json, "trunc": f.trunc, showFunc: f.show, "index": f.index,
		"eq": f.eq, "ne": f.ne, "lt": f.lt, "le": f.le, "gt": f.gt, "ge": f.ge,
	}
}

// json returns v as compact JSON, with <, > and & as they are: a prompt
// is not HTML.
func (f *renderFuncs) json(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	if err := f.spend(b.Len()); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// spend counts n bytes computed, and fails past MaxComputedBytes.
func (f *renderFuncs) spend(n int) error {
	f.computed += n
	if f.computed > MaxComputedBytes {
		return fmt.Errorf("json, trunc, printing and comparisons would compute more than %d bytes", MaxComputedBytes)
	}
	return nil
}

// trunc returns the first n runes of v as an action prints it. The runes
// it walks count as computed.
func (f *renderFuncs) trunc(n int, v any) (string, error) {
	if n < 0 || n > MaxTruncRunes {
		return "", fmt.Errorf("trunc takes a count from 0 to %d, not %d", MaxTruncRunes, n)
	}
	s, err := f.show(v)
	if err != nil {
		return "", err
	}
	for i := range s {
		if n == 0 {
			return s[:i], f.spend(i)
		}
		n--
	}
	return s, f.spend(len(s))
}

// show is how every action prints its value: nothing for nil (a missing
// key, JSON null), a string as it is, a number, a list or an object as
// JSON writes it (never 1.234567e+06 for an issue's id), anything else as
// fmt does.
func (f *renderFuncs) show(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case float64, []any, map[string]any, map[string]string:
		return f.json(v)
	}
	return fmt.Sprint(v), nil
}

// index is item[key1][key2]..., as the built-in index: a list or a string
// by an integer, an object by a string. A key looked up in an object
// counts as compared, since hashing it reads all of it.
func (f *renderFuncs) index(item reflect.Value, keys ...reflect.Value) (reflect.Value, error) {
	item = indirectInterface(item)
	if !item.IsValid() {
		return reflect.Value{}, errors.New("index of untyped nil")
	}
	for _, key := range keys {
		var err error
		if item, err = f.indexOnce(item, indirectInterface(key)); err != nil {
			return reflect.Value{}, err
		}
	}
	return item, nil
}

// indexOnce is item[key], item a value held by index.
func (f *renderFuncs) indexOnce(item, key reflect.Value) (reflect.Value, error) {
	for item.Kind() == reflect.Interface || item.Kind() == reflect.Pointer {
		if item.IsNil() {
			return reflect.Value{}, errors.New("index of nil pointer")
		}
		item = item.Elem()
	}
	switch item.Kind() {
	case reflect.Array, reflect.Slice, reflect.String:
		i, err := position(key, item.Len())
		if err != nil {
			return reflect.Value{}, err
		}
		return item.Index(i), nil
	case reflect.Map:
		return f.lookUp(item, key)
	}
	return reflect.Value{}, fmt.Errorf("can't index item of type %s", item.Type())
}

// position is key as an index into n items, as the built-in takes it: any
// integer from 0 to n. n itself passes, as there, and fails in Index,
// whose panic text/template returns as the call's error.
func position(key reflect.Value, n int) (int, error) {
	var i int64
	switch basicKind(key) {
	case reflect.Int:
		i = key.Int()
	case reflect.Uint:
		i = int64(key.Uint())
	default:
		if !key.IsValid() {
			return 0, errors.New("cannot index slice/array with nil")
		}
		return 0, fmt.Errorf("cannot index slice/array with type %s", key.Type())
	}
	if i < 0 || int(i) < 0 || int(i) > n {
		return 0, fmt.Errorf("index out of range: %d", i)
	}
	return int(i), nil
}

// lookUp is object[key], or the zero value of object's values for a key
// it lacks; the objects a template sees are keyed by strings.
func (f *renderFuncs) lookUp(object, key reflect.Value) (reflect.Value, error) {
	keyType := object.Type().Key()
	switch {
	case !key.IsValid():
		return reflect.Value{}, fmt.Errorf("value is nil; should be of type %s", keyType)
	case !key.Type().AssignableTo(keyType):
		return reflect.Value{}, fmt.Errorf("value has type %s; should be %s", key.Type(), keyType)
	}
	if err := f.spendComparing(key, key); err != nil {
		return reflect.Value{}, err
	}
	if value := object.MapIndex(key); value.IsValid() {
		return value, nil
	}
	return reflect.Zero(object.Type().Elem()), nil
}

// The comparisons below mean what text/template's built-ins of the same
// names mean, errors included; they only count their work first.

// errBadComparisonType is the built-in lt's error for a value it cannot order.
var errBadComparisonType = errors.New("invalid type for comparison")

// eq reports whether arg1 equals any of others.
func (f *renderFuncs) eq(arg1 reflect.Value, others ...reflect.Value) (bool, error) {
	if len(others) == 0 {
		return false, errors.New("missing argument for comparison")
	}
	for _, arg2 := range others {
		if equal, err := f.equal(arg1, arg2); equal || err != nil {
			return equal, err
		}
	}
	return false, nil
}

func (f *renderFuncs) ne(a, b reflect.Value) (bool, error) {
	equal, err := f.equal(a, b)
	return !equal, err
}

func (f *renderFuncs) lt(a, b reflect.Value) (bool, error) { return f.less(a, b) }

func (f *renderFuncs) le(a, b reflect.Value) (bool, error) {
	if less, err := f.less(a, b); less || err != nil {
		return less, err
	}
	return f.equal(a, b)
}

func (f *renderFuncs) gt(a, b reflect.Value) (bool, error) {
	lessOrEqual, err := f.le(a, b)
	return !lessOrEqual && err == nil, err
}

func (f *renderFuncs) ge(a, b reflect.Value) (bool, error) {
	less, err := f.less(a, b)
	return !less && err == nil, err
}

// equal is the built-in eq of two values: the same kind of basic value
// compares by value, an int with a uint too; nil equals only nil, and is
// unequal to anything else; two lists, or two objects, may not be compared.
func (f *renderFuncs) equal(a, b reflect.Value) (bool, error) {
	a, b = indirectInterface(a), indirectInterface(b)
	if err := f.spendComparing(a, b); err != nil {
		return false, err
	}
	ka, kb := basicKind(a), basicKind(b)
	switch {
	case ka == reflect.Int && kb == reflect.Uint:
		return a.Int() >= 0 && uint64(a.Int()) == b.Uint(), nil
	case ka == reflect.Uint && kb == reflect.Int:
		return b.Int() >= 0 && a.Uint() == uint64(b.Int()), nil
	case ka != kb && a.IsValid() && b.IsValid():
		return false, fmt.Errorf("incompatible types for comparison: %v and %v", a.Type(), b.Type())
	case ka != kb:
		return false, nil
	case ka == reflect.Invalid:
		return equalComposite(a, b)
	}
	switch ka {
	case reflect.Bool:
		return a.Bool() == b.Bool(), nil
	case reflect.Complex128:
		return a.Complex() == b.Complex(), nil
	case reflect.Float64:
		return a.Float() == b.Float(), nil
	case reflect.Int:
		return a.Int() == b.Int(), nil
	case reflect.Uint:
		return a.Uint() == b.Uint(), nil
	}
	return a.String() == b.String(), nil
}

// equalComposite is the built-in eq of two values that are not basic:
// nil, lists, objects.
func equalComposite(a, b reflect.Value) (bool, error) {
	switch {
	case a.Kind() != b.Kind() && a.IsValid() && b.IsValid():
		return false, fmt.Errorf("non-comparable types %s: %v, %s: %v", a, a.Type(), b.Type(), b)
	case isNil(a) || isNil(b):
		return isNil(a) == isNil(b), nil
	case !b.Type().Comparable():
		return false, fmt.Errorf("non-comparable type %s: %v", b, b.Type())
	}
	return a.Interface() == b.Interface(), nil
}

// less is the built-in lt: numbers and strings of one kind (an int and a
// uint too) are ordered, nothing else.
func (f *renderFuncs) less(a, b reflect.Value) (bool, error) {
	a, b = indirectInterface(a), indirectInterface(b)
	if err := f.spendComparing(a, b); err != nil {
		return false, err
	}
	ka, kb := basicKind(a), basicKind(b)
	switch {
	case ka == reflect.Invalid || kb == reflect.Invalid:
		return false, errBadComparisonType
	case ka == reflect.Int && kb == reflect.Uint:
		return a.Int() < 0 || uint64(a.Int()) < b.Uint(), nil
	case ka == reflect.Uint && kb == reflect.Int:
		return b.Int() >= 0 && a.Uint() < uint64(b.Int()), nil
	case ka != kb:
		return false, fmt.Errorf("incompatible types for comparison: %v and %v", a.Type(), b.Type())
	}
	switch ka {
	case reflect.Float64:
		return a.Float() < b.Float(), nil
	case reflect.Int:
		return a.Int() < b.Int(), nil
	case reflect.Uint:
		return a.Uint() < b.Uint(), nil
	case reflect.String:
		return a.String() < b.String(), nil
	}
	return false, errBadComparisonType // bool, complex
}

// spendComparing counts a comparison of a and b: comparisonCost, and for
// two strings the bytes that comparing them may read, as many as the
// shorter has (all of a key compared with itself).
func (f *renderFuncs) spendComparing(a, b reflect.Value) error {
	cost := comparisonCost
	if a.Kind() == reflect.String && b.Kind() == reflect.String {
		cost += min(a.Len(), b.Len())
	}
	return f.spend(cost)
}

// basicKind is the kind by which the built-in comparisons compare v:
// Bool, Int, Uint, Float64, Complex128 or String, or Invalid for nil and
// for values that are not basic.
func basicKind(v reflect.Value) reflect.Kind {
	switch v.Kind() {
	case reflect.Bool, reflect.String:
		return v.Kind()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return reflect.Int
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return reflect.Uint
	case reflect.Float32, reflect.Float64:
		return reflect.Float64
	case reflect.Complex64, reflect.Complex128:
		return reflect.Complex128
	}
	return reflect.Invalid
}

// indirectInterface is what an interface value holds, or the zero Value
// for a nil one.
func indirectInterface(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Interface {
		return v
	}
	return v.Elem()
}

// isNil reports whether v is nil: the zero Value or a nil list or object.
func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Invalid:
		return true
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// checker walks a parsed template, refuses what a prompt template may not
// do, and rewrites every action to print through showFunc.
type checker struct {
	tree *parse.Tree
	// vars are the variables in scope, innermost last.
	vars []variable
	// dotData: dot holds the delivery's data or a part of it, never a
	// value the template made (a number a range could count to).
	dotData bool
	inRange bool
	// rangeNodes counts the nodes walked inside range bodies.
	rangeNodes int
}

// variable is a template variable in scope.
type variable struct {
	name string
	// data: it holds the delivery's data or a part of it, on every path.
	data bool
}

func (c *checker) list(l *parse.ListNode) error {
	if l == nil {
		return nil
	}
	for _, n := range l.Nodes {
		if err := c.node(n); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) node(n parse.Node) error {
	c.count()
	switch n := n.(type) {
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
		return nil
	case *parse.ActionNode:
		return c.action(n)
	case *parse.IfNode:
		return c.branch(&n.BranchNode, c.dotData)
	case *parse.WithNode:
		return c.branch(&n.BranchNode, c.fromData(n.Pipe))
	case *parse.RangeNode:
		return c.rangeNode(n)
	case *parse.TemplateNode:
		return c.refuse(n, "calls a template ({{template}}), which a prompt template may not")
	}
	return c.refuse(n, fmt.Sprintf("holds %s, which a prompt template may not", clip.Text(n.String(), 60)))
}

// count adds one to rangeNodes inside a range body.
func (c *checker) count() {
	if c.inRange {
		c.rangeNodes++
	}
}

// action checks {{pipeline}} and makes it print through showFunc, unless
// it declares or assigns, when it prints nothing.
func (c *checker) action(a *parse.ActionNode) error {
	if err := c.pipe(a.Pipe); err != nil {
		return err
	}
	if len(a.Pipe.Decl) == 0 {
		show := parse.NewIdentifier(showFunc).SetTree(c.tree).SetPos(a.Pipe.Position())
		a.Pipe.Cmds = append(a.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: a.Pipe.Position(), Args: []parse.Node{show}})
	}
	return nil
}

// branch checks an if or a with: its pipeline's variables are in scope in
// both lists, those of the first list only there, and the first list runs
// with dot holding data when dotData.
func (c *checker) branch(b *parse.BranchNode, dotData bool) error {
	outerVars, outerDot := len(c.vars), c.dotData
	defer func() { c.vars, c.dotData = c.vars[:outerVars], outerDot }()
	if err := c.pipe(b.Pipe); err != nil {
		return err
	}
	scope := len(c.vars)
	c.dotData = dotData
	if err := c.list(b.List); err != nil {
		return err
	}
	c.vars, c.dotData = c.vars[:scope], outerDot
	return c.list(b.ElseList)
}

// rangeNode checks a range: not inside another, over data only. Its body
// runs with dot, and its element variable, holding data; its index
// variable is a number.
func (c *checker) rangeNode(r *parse.RangeNode) error {
	switch {
	case c.inRange:
		return c.refuse(r, "has a range inside a range, which a prompt template may not")
	case !c.fromData(r.Pipe):
		return c.refuse(r, "ranges over something other than the delivery's data: a range may only go over a field, such as {{range .payload.items}}, or a variable holding one")
	}
	outerVars, outerDot := len(c.vars), c.dotData
	defer func() { c.vars, c.dotData, c.inRange = c.vars[:outerVars], outerDot, false }()
	if err := c.args(r.Pipe); err != nil {
		return err
	}
	for i, v := range r.Pipe.Decl {
		c.bind(v.Ident[0], i == len(r.Pipe.Decl)-1, r.Pipe.IsAssign)
	}
	c.dotData, c.inRange = true, true
	c.count()
	if err := c.list(r.List); err != nil {
		return err
	}
	c.vars, c.dotData, c.inRange = c.vars[:outerVars], outerDot, false
	return c.list(r.ElseList)
}

// pipe checks a pipeline's commands, then binds the variables it declares
// or assigns.
func (c *checker) pipe(p *parse.PipeNode) error {
	data := c.fromData(p)
	if err := c.args(p); err != nil {
		return err
	}
	for _, v := range p.Decl {
		c.bind(v.Ident[0], data, p.IsAssign)
	}
	return nil
}

func (c *checker) args(p *parse.PipeNode) error {
	for _, cmd := range p.Cmds {
		for _, a := range cmd.Args {
			if err := c.arg(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// arg checks one operand: a function must be an allowed one.
func (c *checker) arg(n parse.Node) error {
	c.count()
	switch n := n.(type) {
	case *parse.IdentifierNode:
		if !allowedFunction(n.Ident) {
			return c.refuse(n, fmt.Sprintf("calls %q; a prompt template may call only %s", n.Ident, allowedFunctions))
		}
	case *parse.PipeNode:
		return c.pipe(n)
	case *parse.ChainNode:
		return c.arg(n.Node)
	case *parse.FieldNode, *parse.VariableNode, *parse.DotNode, *parse.NilNode,
		*parse.BoolNode, *parse.NumberNode, *parse.StringNode:
	default:
		return c.refuse(n, fmt.Sprintf("holds %s, which a prompt template may not", clip.Text(n.String(), 60)))
	}
	return nil
}

func allowedFunction(name string) bool {
	switch name {
	case "index", "len", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "json", "trunc":
		return true
	}
	return false
}

// fromData reports whether p's value is the delivery's data or a part of
// it: a lone field chain on dot holding data, or on a variable holding it.
func (c *checker) fromData(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.DotNode, *parse.FieldNode:
		return c.dotData
	case *parse.VariableNode:
		return c.holdsData(a.Ident[0])
	}
	return false
}

// bind declares a variable, or assigns one in scope: an assignment may
// only take away "holds data", since it may not run on every path.
func (c *checker) bind(name string, data, assign bool) {
	if !assign {
		c.vars = append(c.vars, variable{name: name, data: data})
		return
	}
	if i := c.lookup(name); i >= 0 {
		c.vars[i].data = c.vars[i].data && data
	}
}

func (c *checker) holdsData(name string) bool {
	i := c.lookup(name)
	return i >= 0 && c.vars[i].data
}

// lookup returns the index of the innermost variable called name, or -1.
func (c *checker) lookup(name string) int {
	for i := len(c.vars) - 1; i >= 0; i-- {
		if c.vars[i].name == name {
			return i
		}
	}
	return -1
}

// refuse returns the error for n: the reason and where it is.
func (c *checker) refuse(n parse.Node, reason string) error {
	location, _ := c.tree.ErrorContext(n)
	return runs.Invalid(fieldPrompt, fmt.Sprintf("%s (at %s)", reason, strings.TrimPrefix(location, templateName+":")))
}
