// Package acpbridge is the agent side of the Agent Client Protocol (ACP:
// JSON-RPC 2.0, one object a line, on stdin and stdout), so that an
// editor that runs ACP agents (Zed, and others) can run agents on an
// agentgate gateway. It owns the protocol and the mapping; the gateway's
// HTTP API reaches it through the small Gateway interface, which the
// agentgate command implements with its HTTP client and its resuming
// event follower.
//
// Conn is the JSON-RPC layer: it reads lines bounded by MaxLineBytes,
// answers a line that is not JSON with -32700, one that is no message
// with -32600 and an unknown method with -32601, and never stops on
// either; it answers each request in a goroutine of its own and sends
// the bridge's own requests (session/request_permission) with their
// answers routed back by id.
//
// Agent is the mapping:
//
//	initialize              protocol 1, agentInfo agentgate, images and
//	                        embedded text resources in prompts
//	session/new             a local session id; the run starts with the
//	                        first prompt (the API needs one to create a
//	                        run); cwd is kept as the run's metadata
//	                        acp_cwd, mcpServers become its mcp_servers,
//	                        _meta.agentgate overrides the flags
//	session/prompt (first)  POST /v1/runs, interactive, approvals ask
//	                        unless told otherwise; images are uploaded
//	                        (POST /v1/files) and attached
//	session/prompt (later)  POST /v1/runs/{id}/messages
//	                        each answers at its turn.completed: end_turn,
//	                        cancelled, max_turn_requests, refusal, or a
//	                        JSON-RPC error -32000 whose data.code is the
//	                        gateway's error class or code
//	session/cancel          POST /v1/runs/{id}/interrupt
//	message.delta           agent_message_chunk
//	reasoning.delta         agent_thought_chunk
//	tool_call.started       tool_call (pending)
//	approval.requested      session/request_permission; the answer is
//	                        POSTed (allow, allow_session, deny; a
//	                        cancelled request is deny)
//	approval.resolved       tool_call_update in_progress (allowed) or
//	                        failed (refused); a permission request still
//	                        open (its deadline passed, another client
//	                        answered) is withdrawn with $/cancel_request
//	tool_call.completed     tool_call_update completed or failed
//	plan.updated            plan
//	end of input            every session's run is closed
//
// One prompt per session waits at a time (ACP's editors wait for the
// answer); several sessions run side by side.
package acpbridge
