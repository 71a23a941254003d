// Command agentgate is the command-line client of an agentgate gateway. It
// speaks only the gateway's HTTP API (openapi.yaml): it creates runs and
// follows their events over SSE, answers approvals, sends follow-up
// messages, lists runs and agents, fetches what a run changed, and keeps
// the schedules and triggers that start runs by themselves.
//
//	agentgate [--url URL] [--api-key KEY] [--json] [--no-color] COMMAND [flags] [args]
//
//	run [flags] PROMPT... | -        create a run and follow it (prompt from stdin with -)
//	watch [--after SEQ] ID           follow an existing run
//	get ID                           show a run
//	ls [--status S] [--agent A] [--limit N] [--cursor C]
//	approve [--session] ID APPROVAL_ID
//	deny [--reason TEXT] [--stop] ID APPROVAL_ID
//	send [--steer] ID MESSAGE... | -
//	interrupt ID                     end the running turn; the session stays
//	close ID                         end an interactive run's session
//	cancel ID
//	agents
//	files ID [PATH] [--diff | --archive] [-o FILE]
//	acp [--agent A] [--model M] [--permission P] [--approvals ask|never] [--workspace W] [--timeout S]
//	                                 an ACP agent on stdin/stdout for editors (Zed)
//	schedule create|ls|get|fires|pause|resume|fire|set|rm     runs on a clock
//	trigger create|ls|get|rm|pause|resume|rotate|deliveries   runs on webhooks
//	version, help [COMMAND]
//
// The gateway is $AGENTGATE_URL (default http://127.0.0.1:8080) and the API
// key, sent as a Bearer token, $AGENTGATE_API_KEY; --url and --api-key
// override them. Flags may come anywhere among the arguments, until "--".
//
// run and watch print the agent's text as it streams, one line per tool
// call (its name and a short form of its input), approval, file change,
// plan and turn, warnings on stderr, and a summary on stderr at the end:
// status, time, turns, tokens, cost and the error with its hint. Colour and
// a progress line redrawn with \r (spinner, what the agent does, tokens and
// cost so far) appear only when stdout is a terminal, and colour not with
// NO_COLOR or --no-color; in a pipe the lines are plain. With --json they
// print each event's envelope, as the gateway sent it, one a line.
//
// A dropped stream is resumed with Last-Event-ID set to the last seq seen,
// after a backoff from 250 ms doubling to 5 s (longer when the gateway asks
// with Retry-After), for up to two minutes of failures in a row; events seen
// already are dropped, so none is shown twice and none is skipped. A
// gateway's 204 means the run has ended: its record has the outcome.
//
// Ctrl-C during run or watch stops watching, leaves the run going and says
// how to resume (agentgate watch ID); with --cancel-on-interrupt it cancels
// the run and waits for its end. A second Ctrl-C exits at once.
//
// Exit codes; for run and watch the run's final status (the statuses of
// internal/runs):
//
//	0    done; for run and watch: the run succeeded
//	1    the run failed
//	2    usage error
//	3    the run was cancelled
//	4    the run timed out
//	5    the gateway answered with an error, printed as "error: <code>: <message>"
//	6    cannot connect to the gateway (or the connection failed), "error: cannot_connect: …"
//	7    any other error
//	130  interrupted (Ctrl-C): stopped watching, the run goes on
//
// The code is split by concern: client.go is the HTTP client and the
// decoding of the gateway's errors, stream.go the SSE reader and the
// follower that resumes it, render.go what a person sees, term_*.go how a
// terminal is told from a pipe, main.go the commands, help.go their help,
// exit.go the exit codes, cmd_acp.go the editors' ACP agent (the
// protocol and its mapping are internal/acpbridge's).
package main
