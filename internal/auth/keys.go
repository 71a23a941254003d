package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Key is one API key as the gateway knows it: never the secret, only who
// it is and what it may do.
type Key struct {
	// ID names the key in logs and the audit trail; unique in the file.
	ID string
	// Tenant owns the key: its runs are the tenant's runs.
	Tenant string
	// Role is what the key may do.
	Role Role
}

// SecretPrefix begins every secret NewKey makes, so that a leaked key is
// recognisable (by people and by secret scanners) for what it is.
const SecretPrefix = "agk_"

// Limits of the keys file, so that a wrong path (a log, a device) fails
// fast instead of being read whole.
const (
	maxLineLen = 4 << 10
	maxKeys    = 100_000
)

const hashPrefix = "sha256:"

// ParseError is a keys file that is not valid: Line (from 1) says where.
// Its message never quotes the offending text, which could be a secret
// pasted into the wrong place.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Keyring is a parsed keys file: immutable, safe for concurrent use.
type Keyring struct {
	// byHash maps SHA-256 of a secret to its key. A map lookup is not
	// constant time, and that is fine here: the lookup's timing depends
	// on the hash of the presented secret, never on how many of its
	// bytes match a real secret, and the secrets are 256-bit random, so
	// learning which hashes are near a stored one tells an attacker
	// nothing about any stored secret (that would need a SHA-256
	// preimage).
	byHash  map[[sha256.Size]byte]Key
	byID    map[string]Key
	tenants []string
}

// ParseKeys reads a keys file: one key a line,
//
//	<key-id> <tenant> <role> sha256:<64 lowercase hex>
//
// fields separated by spaces or tabs; blank lines and lines whose first
// non-blank character is # are ignored. Key-ids and tenants match
// [a-z0-9][a-z0-9_.-]{0,62}; role is admin, write or read. A duplicate
// key-id or hash is an error. Any error is a *ParseError naming the line,
// except a read error. A file with no keys is valid: every key revoked.
func ParseKeys(r io.Reader) (*Keyring, error) {
	kr := &Keyring{byHash: map[[sha256.Size]byte]Key{}, byID: map[string]Key{}}
	idLine := map[string]int{}
	hashLine := map[[sha256.Size]byte]int{}
	br := bufio.NewReaderSize(r, maxLineLen)
	tenants := map[string]bool{}
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, errLineTooLong) {
			return nil, &ParseError{n, fmt.Sprintf("longer than %d bytes", maxLineLen)}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read keys: %w", err)
		}
		if errors.Is(err, io.EOF) && line == "" {
			break
		}
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		k, sum, perr := parseLine(line)
		if perr != "" {
			return nil, &ParseError{n, perr}
		}
		if k.ID != "" {
			if first, dup := idLine[k.ID]; dup {
				return nil, &ParseError{n, fmt.Sprintf("duplicate key id %q (first on line %d)", k.ID, first)}
			}
			if first, dup := hashLine[sum]; dup {
				return nil, &ParseError{n, fmt.Sprintf("key %q has the same hash as key %q on line %d", k.ID, kr.byHash[sum].ID, first)}
			}
			if len(kr.byID) >= maxKeys {
				return nil, &ParseError{n, fmt.Sprintf("more than %d keys", maxKeys)}
			}
			idLine[k.ID], hashLine[sum] = n, n
			kr.byHash[sum], kr.byID[k.ID] = k, k
			tenants[k.Tenant] = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	for t := range tenants {
		kr.tenants = append(kr.tenants, t)
	}
	slices.Sort(kr.tenants)
	return kr, nil
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its \n or \r\n, bounded by
// maxLineLen; io.EOF comes with the last line when it has no newline.
func readLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errLineTooLong
	}
	s := strings.TrimSuffix(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	return s, err
}

// parseLine parses one line; a blank or comment line is a zero Key. The
// message, when not "", says what is wrong without quoting the line.
func parseLine(line string) (Key, [sha256.Size]byte, string) {
	var sum [sha256.Size]byte
	f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return Key{}, sum, ""
	}
	if len(f) != 4 {
		return Key{}, sum, fmt.Sprintf("%d fields, want 4: <key-id> <tenant> <role> sha256:<hex>", len(f))
	}
	if !ValidName(f[0]) {
		return Key{}, sum, "key id is not [a-z0-9][a-z0-9_.-]{0,62}"
	}
	if !ValidName(f[1]) {
		return Key{}, sum, "tenant is not [a-z0-9][a-z0-9_.-]{0,62}"
	}
	role := Role(f[2])
	if !role.Valid() {
		return Key{}, sum, "role is not admin, write or read"
	}
	h, ok := strings.CutPrefix(f[3], hashPrefix)
	if !ok || len(h) != hex.EncodedLen(sha256.Size) || strings.ToLower(h) != h {
		return Key{}, sum, "hash is not sha256: and 64 lowercase hex digits"
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return Key{}, sum, "hash is not sha256: and 64 lowercase hex digits"
	}
	return Key{ID: f[0], Tenant: f[1], Role: role}, sum, ""
}

// ValidName reports whether s may be a key-id or a tenant:
// [a-z0-9][a-z0-9_.-]{0,62}.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Lookup returns the key whose secret is secret. See Keyring for why a
// map lookup by hash is safe against timing attacks.
func (kr *Keyring) Lookup(secret string) (Key, bool) {
	if kr == nil || secret == "" {
		return Key{}, false
	}
	k, ok := kr.byHash[sha256.Sum256([]byte(secret))]
	return k, ok
}

// ByID returns the key named id, so that a holder of a credential derived
// from a key (a stream token) can check that the key is still there.
func (kr *Keyring) ByID(id string) (Key, bool) {
	if kr == nil {
		return Key{}, false
	}
	k, ok := kr.byID[id]
	return k, ok
}

// Tenants returns the tenants that have at least one key, sorted. The
// caller may modify the slice.
func (kr *Keyring) Tenants() []string {
	if kr == nil {
		return nil
	}
	return slices.Clone(kr.tenants)
}

// Len is the number of keys.
func (kr *Keyring) Len() int {
	if kr == nil {
		return 0
	}
	return len(kr.byID)
}

// NewKey returns a fresh secret: SecretPrefix and 32 random bytes in
// unpadded base64url (47 characters in all).
func NewKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new key: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Line returns the keys file line for a key with this secret; it holds
// the secret's SHA-256, never the secret. It does not validate id, tenant
// or role: ParseKeys of the line does.
func Line(id, tenant string, role Role, secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return fmt.Sprintf("%s %s %s %s%x", id, tenant, role, hashPrefix, sum)
}
