// Package webhooks sends runs' webhooks: run.completed and
// approval.requested, POSTed to the URL a run names (its webhook_url) and
// to the one the operator sets for the run's tenant, signed per the
// Standard Webhooks specification (https://www.standardwebhooks.com).
//
// It owns the signing (Secret, SignatureHeader, and Verifier, what a
// receiver does, which the tests use as one), where webhooks may go (Policy), the
// operator's tenants file (ParseTenants, WatchTenants), the payloads, and
// the Deliverer, which implements runs.Webhooks for the supervisor. It
// declares the Store it consumes; internal/store implements it on NATS
// JetStream. It imports runs, never store or api.
//
// # Signing
//
// Every request carries webhook-id (one per event and URL, the same on
// every retry: "msg_" and 32 hex digits, derived from the run, the event's
// seq and the URL, so that replicas that see one event record one
// delivery), webhook-timestamp (the attempt's Unix seconds) and
// webhook-signature, "v1,<base64 HMAC-SHA256>" of "<id>.<timestamp>.<body>"
// keyed with the secret's bytes, one signature per secret, space-separated,
// while a secret rotates. A secret is written "whsec_<base64>", 24 to 64
// bytes. A tenant's own secret (tenants file) signs all its webhooks, its
// runs' URLs too; otherwise the gateway's (AGENTGATE_WEBHOOK_SECRET, and
// AGENTGATE_WEBHOOK_SECRET_PREVIOUS). With neither, a run naming a
// webhook_url is refused with 400 webhooks_disabled: the gateway does not
// make up a secret a receiver could not know.
//
// # Payloads
//
// {"type", "timestamp", "data"}: timestamp is the event's time. For
// run.completed, data is the run as GET /v1/runs/{id} returns it, without
// its diff, plus "seq"; a body past MaxPayloadBytes loses result,
// structured_output and files, and says "truncated": true. For
// approval.requested, data is {run_id, agent, tenant, metadata, approval
// (the event's data), answer_path, seq}. See the types Payload,
// RunCompleted and ApprovalRequested.
//
// # Where webhooks may go
//
// A URL must be https, with a host, no user info and no fragment, at most
// MaxURLBytes. Plain http, and any internal address, only to a host the
// operator allows (AGENTGATE_WEBHOOK_ALLOW_HOSTS: names, addresses,
// CIDRs). Internal is loopback, RFC 1918 and ULA, link-local (the clouds'
// metadata service 169.254.169.254 among them), CGNAT, multicast,
// unspecified, documentation and reserved ranges, and the IPv6 forms that
// reach IPv4 (mapped, compatible, translated, 6to4, Teredo; NAT64 is what
// its embedded IPv4 address is): package ipclass's table, which runs'
// egress shares. At
// submission a literal address in any form a reader takes for one
// (2130706433, 0x7f.1, 127.1, [::ffff:7f00:1], percent-encoded,
// full-width), or a name internal by definition (localhost, .internal,
// .local, .home.arpa), is refused as its plain form is (400
// webhook_url_refused over https); a host in such a form is never
// accepted, lest the check and the resolver read two hosts. At delivery
// the transport resolves the name itself, dials only addresses it checked,
// and checks each socket's address again as it connects, so DNS rebinding
// cannot reach a refused address: such a delivery ends refused. No proxy
// from the environment is used, and redirects are not followed (a 3xx is a
// failed attempt). Recorded URLs keep no query ("?…"), and recorded errors
// no URL.
//
// # Delivery
//
// NotifyWebhooks never blocks: it puts the event in a bounded intake (a
// full one drops it, logged and counted "dropped"). One goroutine records
// each event's deliveries in the Store, which also queues their messages.
// Workers goroutines take the messages due from the queue that every
// replica shares and POST them, Timeout bounding each attempt. 2xx is
// delivered; 410 ends the delivery gone; anything else, a timeout or a
// network error is retried after Backoff (RetryMin doubling up to RetryMax,
// less up to half at random), or after a 429's or 503's Retry-After when
// that is later, until MaxAttempts or RetryFor after the event; then the
// delivery failed. Every attempt is recorded: time, status or error,
// duration, next retry. A retry waits in the Store's queue, not in a
// goroutine: any replica takes it when it is due, so a replica that stops
// leaves nothing behind. Close records what the intake still holds (for a
// few seconds), cuts an attempt under way without recording it and gives
// its message back, due at once, and returns once its goroutines have
// ended.
//
// # Tenants file
//
// AGENTGATE_WEBHOOKS_FILE: one tenant a line, "<tenant> <url>
// [<secret>[,<previous>…]]", "-" for the one tenant of a gateway without
// API keys; blank lines and # comments ignored. It is read again when it
// changes (polled every second); a version that is not valid is logged
// with its line and the last valid one kept.
package webhooks
