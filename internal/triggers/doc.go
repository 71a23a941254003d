// Package triggers holds the parts of inbound triggers that need neither
// a server nor a store: how a delivery proves it comes from the trigger's
// sender, how a trigger's signing secret is kept at rest, and how a
// delivery becomes a run's prompt.
//
// # Proofs
//
// A trigger has one Verify, fixed when it is made:
//
//   - token: "Authorization: Bearer <secret>", the secret TokenPrefix and
//     32 random bytes. Only its hash is kept (HashToken), and Check
//     compares hashes.
//   - github: "X-Hub-Signature-256: sha256=<hex>", HMAC-SHA256 of the body
//     keyed with the secret, as GitHub signs its webhooks.
//   - standard_webhooks: webhook-id, webhook-timestamp and
//     webhook-signature, per the Standard Webhooks specification, checked
//     by package webhooks with its five minutes' tolerance.
//
// Check answers nil or ErrBadProof, the same error whatever failed, and
// compares in constant time. After a rotation the previous secret is
// accepted until Secrets.PreviousUntil. DeliveryID and Event read the
// sender's id of a delivery (X-GitHub-Delivery, webhook-id,
// Idempotency-Key) and GitHub's event name, within MaxDeliveryIDBytes of
// printable text.
//
// # Secrets at rest
//
// An HMAC needs its key, so the github and standard_webhooks secrets are
// kept sealed with the operator's key (internal/seal: AES-256-GCM, the
// trigger's id bound in, so a sealed secret copied to another trigger does
// not open). A token is kept as its hash only.
//
// # The prompt
//
// A trigger's prompt is a Go text/template over {"payload": the body,
// "headers": the headers, less those that carry secrets} (Template). It
// is checked when parsed: a few comparison and formatting functions only,
// no template definitions or calls, no range inside a range, ranges over
// the delivery's data only; and bounded when rendered: its output, its
// ranges' steps and what its functions compute. A missing key or JSON null
// prints as nothing, numbers, lists and objects as JSON, and the payload's
// text is only ever data.
package triggers
