package runs

// Quotas bound what one tenant may use, on every replica together. A zero
// field is no limit.
type Quotas struct {
	// MaxRunning is the most runs of a tenant that run at once.
	MaxRunning int
	// MaxQueued is the most runs of a tenant waiting in the shared queue.
	MaxQueued int
	// DailyBudgetUSD is the cost a tenant's runs may reach in a UTC day;
	// past it, new runs are refused until the next day.
	DailyBudgetUSD float64
}
