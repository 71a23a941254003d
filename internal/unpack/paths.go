package unpack

import (
	"slices"
	"strings"
)

const (
	// maxElementBytes is the longest name of one file (NAME_MAX).
	maxElementBytes = 255
	// maxLinkBytes is the longest link target (PATH_MAX less its NUL).
	maxLinkBytes = 4095
	// maxResolveSteps bounds the work of following one link's target
	// through the links before it: a chain of links that each name the
	// one before twice would otherwise cost twice as much per link.
	maxResolveSteps = 4096
)

// cleanName turns an entry's name into a path relative to the directory,
// elements joined by "/" with "." and empty ones dropped ("" is the
// directory itself), or refuses it.
func (u *unpacker) cleanName(name string, zip bool) (string, *Error) {
	if name == "" {
		return "", &Error{Code: CodeUnsafePath, Message: "an entry has no name"}
	}
	if len(name) > u.lim.NameBytes {
		return "", entryError(CodeUnsafePath, name, "the name is longer than %d bytes", u.lim.NameBytes)
	}
	if hasControl(name) {
		return "", entryError(CodeUnsafePath, name, "the name holds a control byte")
	}
	if zip && (strings.ContainsRune(name, '\\') || hasDrive(name)) {
		return "", entryError(CodeUnsafePath, name, "the name is a Windows path (a drive or a backslash)")
	}
	if strings.HasPrefix(name, "/") {
		return "", entryError(CodeUnsafePath, name, "the name is an absolute path")
	}
	elems := make([]string, 0, strings.Count(name, "/")+1)
	for el := range strings.SplitSeq(name, "/") {
		switch {
		case el == "" || el == ".":
			continue
		case el == "..":
			return "", entryError(CodeUnsafePath, name, "the name climbs out with \"..\"")
		case len(el) > maxElementBytes:
			return "", entryError(CodeUnsafePath, name, "an element of the name is longer than %d bytes", maxElementBytes)
		}
		elems = append(elems, el)
	}
	if len(elems) > u.lim.Depth {
		return "", entryError(CodeTooDeep, name, "the path is more than %d elements deep", u.lim.Depth)
	}
	return strings.Join(elems, "/"), nil
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

func hasDrive(name string) bool {
	return len(name) >= 2 && name[1] == ':' &&
		('a' <= name[0] && name[0] <= 'z' || 'A' <= name[0] && name[0] <= 'Z')
}

// ancestors returns the paths of p's parent directories, outermost first.
func ancestors(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// parentElems returns the elements of p's parent directory.
func parentElems(p string) []string {
	elems := strings.Split(p, "/")
	return elems[:len(elems)-1]
}

// staysInside follows target from the directory dir as the kernel would,
// through the symbolic links made so far, and says whether it stays
// inside the root. A lexical check alone is not enough: with d -> ".",
// the target "d/.." is lexically the root but really its parent.
func (u *unpacker) staysInside(dir []string, target string) bool {
	steps := maxResolveSteps
	_, ok := u.resolve(slices.Clone(dir), target, &steps)
	return ok
}

// resolve appends target's elements to cur, following known links, and
// returns where it ends; false when it leaves the root, is absolute, or
// takes more than *steps elements to follow. Elements not made yet are
// taken as they read: the pass over all links after the last entry sees
// them.
func (u *unpacker) resolve(cur []string, target string, steps *int) ([]string, bool) {
	if strings.HasPrefix(target, "/") {
		return nil, false
	}
	for el := range strings.SplitSeq(target, "/") {
		if *steps--; *steps < 0 {
			return nil, false
		}
		switch el {
		case "", ".":
		case "..":
			if len(cur) == 0 {
				return nil, false
			}
			cur = cur[:len(cur)-1]
		default:
			cur = append(cur, el)
			next, isLink := u.links[strings.Join(cur, "/")]
			if !isLink {
				continue
			}
			var ok bool
			if cur, ok = u.resolve(cur[:len(cur)-1], next, steps); !ok {
				return nil, false
			}
		}
	}
	return cur, true
}
