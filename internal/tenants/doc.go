// Package tenants is what the gateway keeps per tenant: its quotas
// (Quotas), counted by a Ledger in one usage record per tenant (Usage)
// that every replica shares. A tenant's name is the keys file's
// (auth.ValidName), which the supervisor also relies on to make it a
// directory of its own.
//
// A Ledger admits a tenant's new run or refuses it with a *QuotaError
// (Admit), lets a queued run start or keeps it in the queue
// (StartAllowed), and gives back a finished run's place, adding its cost
// to the tenant's day (CountOut). The supervisor calls it; the API maps a
// QuotaError to a 429 with the limit's code and a Retry-After.
//
// It imports runs, never supervisor, store or api. It declares the Store
// it consumes; internal/store implements it on NATS JetStream.
package tenants
