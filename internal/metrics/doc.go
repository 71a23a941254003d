// Package metrics owns agentgate's Prometheus metrics: a Recorder holds
// every collector, registered on a prometheus.Registerer its caller injects,
// never the default registry.
//
// A Recorder implements runs.Observer for the supervisor and the HTTP edge's
// observer (HTTPRequest, SSEClientsAdd) for the api package, which declares
// that interface itself. Every label value comes from a bounded set: agents
// and models pass through allow-lists given in Options, the states, error
// classes and event types through the closed enums of package runs, and
// anything else becomes "other". No label ever carries a run id, a prompt or
// any other value a client chooses freely, so a client cannot grow the
// number of series.
//
// New registers nothing but agentgate's own metrics; NewRegistry is the
// registry cmd/gateway serves, with the Go runtime and process collectors
// added.
package metrics
