// Package redact removes secrets from text before the gateway stores,
// streams or logs it.
//
// What is a secret: the literal values a Redactor is given (the gateway
// gives each run's Redactor the values of every credential variable it
// passes to the run's agent, and whatever else a run adds with With, such
// as MCP env and header values); the patterns the operator configures
// (Go regular expressions); and built-in patterns for common credential
// shapes (the builtins table: vendors' keys and tokens, AWS access key ids
// and secret access keys, private key blocks, JSON web tokens, passwords
// in URLs, the values of Bearer and Basic authorization and of names such
// as password= or "api_key":), which Options.NoBuiltin turns off.
// docs/security.md lists them, and what they miss.
//
// Where: the supervisor applies a run's Redactor to every event before it
// is encoded and stored (Events, which also holds back the end of a delta
// so that a secret split across two is whole in one), to the text of the
// run's record before each write (Run: result, error, diff, turns, pending
// approvals) and to the stderr tail its decoder classifies; Core and Log
// wrap a logger so that log lines are redacted too. runs.go holds what
// applies a Redactor to the parts of a run, and CommandSecrets, which
// finds the values of a run's command that are secrets. Each secret found becomes Mark, so that a reader sees that
// something was removed.
//
// Literals are found as they are and in their JSON-escaped forms (a
// secret holding '/', '"', '\' or non-ASCII text is escaped inside an
// event's JSON, and escaped again inside an agent.unparsed line that
// quotes the CLI's own JSON). Bytes keeps valid JSON valid: inside a
// string it replaces only whole characters (never half of an escape, never
// a closing quote), and a secret found in a bare number or literal outside
// any string replaces that whole value by the string Mark.
//
// Limits, on purpose:
//   - A literal shorter than Options.MinLiteral (default 8) bytes, or
//     without a letter or digit, is not a secret: values such as "mock"
//     or "1" would turn every occurrence of common text into a mark.
//   - Only JSON escaping is undone. A secret the agent prints encoded
//     otherwise (base64, hex, URL-encoded, reversed, split by spaces) is
//     not found, unless a pattern matches the encoding.
//   - Text that arrives in pieces (streamed deltas) is redacted by a
//     Stream, which holds back the end of each piece that could begin a
//     secret; a pattern's match longer than StreamHold bytes, or whose
//     name is more than three words before its value, can still be
//     split (a private key block is held whole).
//   - Patterns are matched on the text given; in JSON, a pattern sees the
//     escaped text, so a match that spans an escape is cut at it or
//     missed. The built-in patterns stop at '"' and '\'.
package redact
