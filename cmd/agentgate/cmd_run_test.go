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

// TestHibernatedRunShown: get shows a hibernated run's activity and when
// it closes; agents says which agents hibernate.
func TestHibernatedRunShown(t *testing.T) {
	const closes = "2026-12-07T02:00:00Z"
	for _, tc := range []apiCase{
		{
			name:   "get",
			args:   []string{"get", "r-1"},
			want:   sentRequest{Method: "GET", Path: "/v1/runs/r-1"},
			status: 200, answer: `{"id":"r-1","agent":"claude","status":"running","activity":"hibernated","interactive":true,
				"created_at":"` + closes + `","hibernated_at":"` + closes + `","closes_at":"` + closes + `","usage":{}}`,
			code: exitOK,
			stdout: []string{"run r-1", "agent claude", "status running (hibernated)",
				"closes " + lt(t, closes) + " unless a message wakes it", "created " + lt(t, closes), "tokens 0 (0 in, 0 out)"},
		},
		{
			name:   "agents",
			args:   []string{"agents"},
			want:   sentRequest{Method: "GET", Path: "/v1/agents"},
			status: 200, answer: `{"agents":[{"name":"claude","installed":true,"version":"2.1.3","compatibility":"verified","enforcement":"sandbox",
				"interaction":{"steer":true,"deny_ends_turn":false,"message_attachments":true,"hibernate":true}},
				{"name":"qwen","installed":true,"version":"0.1.0","compatibility":"verified","enforcement":"sandbox",
				"interaction":{"steer":false,"deny_ends_turn":false,"message_attachments":true,"hibernate":false}}]}`,
			code: exitOK,
			stdout: []string{"NAME INSTALLED VERSION COMPATIBILITY ENFORCEMENT INTERACTION",
				"claude yes 2.1.3 verified sandbox steer yes, deny ends turn no, hibernates yes",
				"qwen yes 0.1.0 verified sandbox steer no, deny ends turn no, hibernates no"},
		},
	} {
		t.Run(tc.name, tc.check)
	}
}
