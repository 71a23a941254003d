package adapterkit

import "github.com/agentgate/agentgate/internal/runs"

// StatusClass is the error class of a failed model request's HTTP
// status, the same for every CLI: 401 and 403 are NotAuthenticated, 429
// RateLimited, 408 and 5xx TransientAPIError (worth another try), any
// other 4xx APIError. ok is false for a status that names no failure: 0,
// when the CLI reported none, or one below 400. The adapter then reads
// the CLI's own words, and may refine a 4xx it knows more about.
func StatusClass(status int) (class runs.Class, ok bool) {
	switch {
	case status == 401 || status == 403:
		return runs.NotAuthenticated, true
	case status == 429:
		return runs.RateLimited, true
	case status == 408 || status >= 500:
		return runs.TransientAPIError, true
	case status >= 400:
		return runs.APIError, true
	}
	return "", false
}
