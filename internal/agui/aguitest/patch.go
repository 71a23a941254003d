package aguitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// applyOp applies one RFC 6902 operation of the kinds this package
// produces (add and replace; remove too) to doc.
func applyOp(doc any, op map[string]json.RawMessage) (any, error) {
	var kind, path string
	if json.Unmarshal(op["op"], &kind) != nil || json.Unmarshal(op["path"], &path) != nil {
		return nil, errors.New("op and path must be strings")
	}
	var value any
	raw, hasValue := op["value"]
	if hasValue {
		if err := json.Unmarshal(raw, &value); err != nil {
			return nil, err
		}
	}
	switch kind {
	case "add", "replace":
		if !hasValue {
			return nil, fmt.Errorf("%s has no value", kind)
		}
	case "remove":
	default:
		return nil, fmt.Errorf("op %q is not one this stream uses", kind)
	}
	if path == "" {
		if kind == "remove" {
			return nil, errors.New("cannot remove the whole document")
		}
		return value, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path %q is not a JSON pointer", path)
	}
	tokens := strings.Split(path[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	parent := doc
	for _, tok := range tokens[:len(tokens)-1] {
		switch p := parent.(type) {
		case map[string]any:
			next, ok := p[tok]
			if !ok {
				return nil, fmt.Errorf("path %q: no member %q", path, tok)
			}
			parent = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(p) {
				return nil, fmt.Errorf("path %q: no index %q", path, tok)
			}
			parent = p[i]
		default:
			return nil, fmt.Errorf("path %q goes through a scalar", path)
		}
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[last]; !ok && kind != "add" {
			return nil, fmt.Errorf("path %q: no member %q to %s", path, last, kind)
		}
		if kind == "remove" {
			delete(p, last)
		} else {
			p[last] = value
		}
		return doc, nil
	case []any:
		// An array's change replaces the slice, which its parent holds:
		// set it there again.
		var next []any
		switch {
		case kind == "add" && last == "-":
			next = append(p, value)
		default:
			i, err := strconv.Atoi(last)
			limit := len(p)
			if kind == "add" {
				limit++
			}
			if err != nil || i < 0 || i >= limit {
				return nil, fmt.Errorf("path %q: no index %q", path, last)
			}
			switch kind {
			case "add":
				next = append(p[:i:i], append([]any{value}, p[i:]...)...)
			case "replace":
				p[i] = value
				next = p
			case "remove":
				next = append(p[:i:i], p[i+1:]...)
			}
		}
		return setAt(doc, tokens[:len(tokens)-1], next)
	}
	return nil, fmt.Errorf("path %q goes through a scalar", path)
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
