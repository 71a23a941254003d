// Package auth is who may call the gateway: API keys, the tenants they
// belong to and the roles they hold, the keys file that lists them, and
// the short-lived stream tokens that let a browser's EventSource (which
// cannot set headers) read one run. It is pure: it parses, hashes, signs
// and verifies; the HTTP API decides what each route needs.
//
// # Keys file
//
// The file named by AGENTGATE_API_KEYS_FILE has one key a line:
//
//	# key-id      tenant  role   sha256 of the secret
//	acme-ci       acme    write  sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//	acme-dash     acme    read   sha256:…
//	ops           ops     admin  sha256:…
//
// Fields are separated by spaces or tabs. Blank lines and lines whose
// first non-blank character is # are ignored. Key-ids and tenants match
// [a-z0-9][a-z0-9_.-]{0,62}; a key-id is unique in the file, and so is a
// hash. The file holds hashes only, never secrets: a leaked keys file
// grants nothing. Any error names its line and never quotes it.
//
// Watch rereads the file when it changes (polling its size, times and
// inode every second by default, so an atomic rename, an edit in place and
// a Kubernetes secret's symlink swap are all seen): a revoked key stops
// working within one interval, without a restart. A version that does not
// parse, or is empty (an editor saving in place truncates first), is
// logged with its line and ignored; the last valid one stays. Replace the
// file by a rename; to revoke every key, leave only a comment.
//
// The gateway's `keys new --tenant acme --role write` makes a secret
// (SecretPrefix and 32 random bytes, base64url) and prints it once, with
// the line to add to the file.
//
// # Roles
//
// admin ⊇ write ⊇ read: Role.Allows(needed) is true when a key's role is
// needed or above it. read sees its tenant's runs; write also creates and
// cancels them; admin also deletes them. Every role is its tenant's:
// no key sees another tenant's runs.
//
// # Requests
//
// A request carries its key as "Authorization: Bearer <secret>"
// (ParseBearer). The secret is looked up by its SHA-256 (Keyring.Lookup).
//
// # Stream tokens
//
// POST /v1/runs/{id}/stream-token gives a token that grants read of that
// one run, to be sent as ?token= on its events URL. The token is
//
//	v1.<base64url(JSON {"run","ten","kid","exp"})>.<base64url(HMAC-SHA256)>
//
// (unpadded base64url; exp in Unix seconds). The MAC covers "v1." and the
// payload, with a key derived from the operator's secret; there is no
// algorithm field to choose, and a token over MaxTokenLen bytes is refused
// unread. Tokens live DefaultStreamTokenTTL (10 minutes) unless the API
// chooses otherwise. Verify on any replica accepts them if that replica
// holds the same secret. The token names the key that asked for it, so the
// API can refuse tokens of a revoked key.
//
// Rotation: NewSigner takes the current secret and any previous ones.
// Start every replica with the new secret current and the old one
// previous; after one token lifetime no live token is signed with the old
// secret, and it can be dropped.
package auth
