package main

import "testing"

// TestRunIdleFlags: --idle-timeout and --hibernate-after take seconds or
// a duration and land in the request as whole seconds.
func TestRunIdleFlags(t *testing.T) {
	for _, tc := range []apiCase{
		{
			name: "durations",
			args: []string{"run", "--detach", "--interactive", "--idle-timeout", "2h", "--hibernate-after", "90s", "fix", "it"},
			want: sentRequest{Method: "POST", Path: "/v1/runs", Body: `{"agent":"claude","prompt":"fix it","interactive":true,
				"idle_timeout_seconds":7200,"hibernate_after_seconds":90}`},
			status: 201, answer: `{"id":"r-1","agent":"claude","status":"queued","interactive":true}`, code: exitOK, stdout: []string{"r-1"},
		},
		{
			name: "seconds",
			args: []string{"run", "-d", "-i", "--hibernate-after", "300", "hi"},
			want: sentRequest{Method: "POST", Path: "/v1/runs", Body: `{"agent":"claude","prompt":"hi","interactive":true,
				"hibernate_after_seconds":300}`},
			status: 201, answer: `{"id":"r-2","agent":"claude","status":"queued","interactive":true}`, code: exitOK, stdout: []string{"r-2"},
		},
	} {
		t.Run(tc.name, tc.check)
	}
	checkUsageCases(t, []usageCase{
		{args: []string{"run", "-i", "--hibernate-after", "later", "hi"}, stderr: "want seconds or a duration"},
		{args: []string{"run", "-i", "--hibernate-after", "0", "hi"}, stderr: "must be positive"},
	})
}
