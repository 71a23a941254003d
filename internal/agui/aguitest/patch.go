package aguitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// patchOp is one RFC 6902 operation of a STATE_DELTA.
type patchOp struct {
	kind, path string
	value      any
}

// patchKind is what an operation of one kind needs and does: to a member
// of an object, or to an element of an array, which it returns changed.
type patchKind struct {
	needsValue bool
	member     func(o patchOp, obj map[string]any, name string) error
	element    func(o patchOp, arr []any, tok string) ([]any, error)
}

// patchKinds are the kinds of operation this stream uses. It is read
// only.
var patchKinds = map[string]patchKind{
	"add":     {needsValue: true, member: addMember, element: addElement},
	"replace": {needsValue: true, member: replaceMember, element: replaceElement},
	"remove":  {member: removeMember, element: removeElement},
}

// applyOp applies one RFC 6902 operation of the kinds this package
// produces (add and replace; remove too) to doc.
func applyOp(doc any, raw map[string]json.RawMessage) (any, error) {
	o, kind, err := parseOp(raw)
	if err != nil {
		return nil, err
	}
	if o.path == "" {
		if o.kind == "remove" {
			return nil, errors.New("cannot remove the whole document")
		}
		return o.value, nil
	}
	if !strings.HasPrefix(o.path, "/") {
		return nil, fmt.Errorf("path %q is not a JSON pointer", o.path)
	}
	tokens := pointerTokens(o.path)
	parentPath, last := tokens[:len(tokens)-1], tokens[len(tokens)-1]
	parent, err := o.walk(doc, parentPath)
	if err != nil {
		return nil, err
	}
	switch p := parent.(type) {
	case map[string]any:
		return doc, kind.member(o, p, last)
	case []any:
		// An array's change replaces the slice, which its parent holds:
		// set it there again.
		next, err := kind.element(o, p, last)
		if err != nil {
			return nil, err
		}
		return setAt(doc, parentPath, next)
	}
	return nil, o.throughScalar()
}

// parseOp decodes an operation and looks up its kind, which must be one
// this stream uses, with a value if it needs one.
func parseOp(raw map[string]json.RawMessage) (patchOp, patchKind, error) {
	var o patchOp
	if json.Unmarshal(raw["op"], &o.kind) != nil || json.Unmarshal(raw["path"], &o.path) != nil {
		return o, patchKind{}, errors.New("op and path must be strings")
	}
	value, hasValue := raw["value"]
	if hasValue {
		if err := json.Unmarshal(value, &o.value); err != nil {
			return o, patchKind{}, err
		}
	}
	kind, ok := patchKinds[o.kind]
	if !ok {
		return o, patchKind{}, fmt.Errorf("op %q is not one this stream uses", o.kind)
	}
	if kind.needsValue && !hasValue {
		return o, patchKind{}, fmt.Errorf("%s has no value", o.kind)
	}
	return o, kind, nil
}

// pointerTokens splits a JSON pointer that starts with "/" into its
// unescaped reference tokens.
func pointerTokens(path string) []string {
	tokens := strings.Split(path[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens
}

// walk returns the value at the path of tokens in doc, each of which must
// be there.
func (o patchOp) walk(doc any, tokens []string) (any, error) {
	at := doc
	for _, tok := range tokens {
		switch p := at.(type) {
		case map[string]any:
			next, ok := p[tok]
			if !ok {
				return nil, fmt.Errorf("path %q: no member %q", o.path, tok)
			}
			at = next
		case []any:
			i, err := o.index(tok, len(p))
			if err != nil {
				return nil, err
			}
			at = p[i]
		default:
			return nil, o.throughScalar()
		}
	}
	return at, nil
}

// index returns the array index tok, which must be below limit.
func (o patchOp) index(tok string, limit int) (int, error) {
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i >= limit {
		return 0, fmt.Errorf("path %q: no index %q", o.path, tok)
	}
	return i, nil
}

func (o patchOp) throughScalar() error {
	return fmt.Errorf("path %q goes through a scalar", o.path)
}

func (o patchOp) noMember(name string) error {
	return fmt.Errorf("path %q: no member %q to %s", o.path, name, o.kind)
}

func addMember(o patchOp, obj map[string]any, name string) error {
	obj[name] = o.value
	return nil
}

func replaceMember(o patchOp, obj map[string]any, name string) error {
	if _, ok := obj[name]; !ok {
		return o.noMember(name)
	}
	obj[name] = o.value
	return nil
}

func removeMember(o patchOp, obj map[string]any, name string) error {
	if _, ok := obj[name]; !ok {
		return o.noMember(name)
	}
	delete(obj, name)
	return nil
}

// addElement inserts at index tok, which may be the array's length, or
// appends for "-".
func addElement(o patchOp, arr []any, tok string) ([]any, error) {
	if tok == "-" {
		return append(arr, o.value), nil
	}
	i, err := o.index(tok, len(arr)+1)
	if err != nil {
		return nil, err
	}
	return append(arr[:i:i], append([]any{o.value}, arr[i:]...)...), nil
}

func replaceElement(o patchOp, arr []any, tok string) ([]any, error) {
	i, err := o.index(tok, len(arr))
	if err != nil {
		return nil, err
	}
	arr[i] = o.value
	return arr, nil
}

func removeElement(o patchOp, arr []any, tok string) ([]any, error) {
	i, err := o.index(tok, len(arr))
	if err != nil {
		return nil, err
	}
	return append(arr[:i:i], arr[i+1:]...), nil
}

// setAt puts v at the path of tokens in doc.
func setAt(doc any, tokens []string, v any) (any, error) {
	if len(tokens) == 0 {
		return v, nil
	}
	switch p := doc.(type) {
	case map[string]any:
		child, err := setAt(p[tokens[0]], tokens[1:], v)
		if err != nil {
			return nil, err
		}
		p[tokens[0]] = child
		return p, nil
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(p) {
			return nil, fmt.Errorf("no index %q", tokens[0])
		}
		child, err := setAt(p[i], tokens[1:], v)
		if err != nil {
			return nil, err
		}
		p[i] = child
		return p, nil
	}
	return nil, errors.New("path goes through a scalar")
}
