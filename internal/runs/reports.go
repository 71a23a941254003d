package runs

// Reports says how much of a run's bill and failures the agent's CLI tells
// the gateway, so that a client knows which figures of a run it can trust
// rather than reading a zero as "free". The zero value is a first-class
// adapter's: usage exact, failures classified from the model API's status.
type Reports struct {
	// Usage is UsageExact, UsagePartial or UsageUnknown; empty means exact.
	Usage string `json:"usage"`
	// Cost is CostReported or CostUnknown, from Description.ReportsCost.
	Cost string `json:"cost"`
	// ErrorClasses is ErrorClassesHTTPStatus or ErrorClassesGeneric;
	// empty means by HTTP status.
	ErrorClasses string `json:"error_classes"`
}

// The values of Reports.
const (
	// UsageExact: a run's usage equals what the model API billed.
	UsageExact = "exact"
	// UsagePartial: the CLI reports only part of the bill (its doc says
	// which part).
	UsagePartial = "partial"
	// UsageUnknown: the CLI reports no usage; a run's usage stays zero and
	// the run says usage_unknown, and max_total_tokens is refused.
	UsageUnknown = "unknown"

	CostReported = "reported"
	CostUnknown  = "unknown"

	// ErrorClassesHTTPStatus: a model API failure is classified by its
	// status (not_authenticated, rate_limited, transient_api_error).
	ErrorClassesHTTPStatus = "http_status"
	// ErrorClassesGeneric: the adapter can only say the agent failed
	// (api_error, agent_crashed).
	ErrorClassesGeneric = "generic"
)

// The sources of an agent, in AgentInfo.Source.
const (
	// SourceBuiltin: an adapter compiled into the gateway.
	SourceBuiltin = "builtin"
	// SourceConfigured: an agent an operator named in the agents file,
	// driven by the generic ACP client.
	SourceConfigured = "configured"
)

// Reporting returns d's Reports with every value filled in.
func (d Description) Reporting() Reports {
	r := d.Reports
	if r.Usage == "" {
		r.Usage = UsageExact
	}
	r.Cost = CostUnknown
	if d.ReportsCost {
		r.Cost = CostReported
	}
	if r.ErrorClasses == "" {
		r.ErrorClasses = ErrorClassesHTTPStatus
	}
	return r
}

// ReportsUsage says the agent reports some usage, so that the gateway can
// hold a run to max_total_tokens.
func (d Description) ReportsUsage() bool { return d.Reporting().Usage != UsageUnknown }
