// Package acp is the gateway's client of the Agent Client Protocol (ACP:
// JSON-RPC 2.0, one object per line on the CLI's stdin and stdout), spoken
// by `gemini --acp`, `opencode acp` and `copilot --acp`. It owns the
// protocol and nothing of a particular CLI: a Decoder implements
// runs.Session (and so runs.Conversation and runs.Decoder) over it, and a
// small Profile, filled by each adapter, says how one CLI differs. Like
// every adapter it is pure: it builds bytes to write and decodes lines;
// the supervisor does the I/O.
//
// # Using it from an adapter
//
// For a run whose Spec.Session() is true:
//
//	func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
//		// argv of the CLI's ACP mode, e.g. {"acp"}; Stdin nil: the
//		// supervisor keeps stdin open for a Conversation.
//	}
//	func (a *Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
//		if inv.Spec.Session() {
//			return acp.NewDecoder(inv, acp.Profile{
//				Agent:     "opencode",
//				Counting:  acp.LastRequest,                 // see Counting
//				ReadUsage: readUsage,                       // result JSON → runs.Usage, normalized
//				Steering:  acp.SteerMerges,                 // see Steering
//				DenyEndsTurn: true,
//				ClassifyError: classifyRPC,                 // JSON-RPC error → *runs.RunError
//				ClassifyExit:  classifyExit,                // exit + stderr tail → *runs.RunError
//			})
//		}
//		return newOneShotDecoder(inv)
//	}
//
// and in Describe list runs.FieldInteractive and runs.FieldApprovals and
// set Interaction{Steer: Steering == SteerMerges, DenyEndsTurn: …}. Every
// Profile hook is optional; the defaults are in Profile's comments. An
// adapter that needs more than the hooks give can wrap the Decoder: its
// methods are all the Session there is.
//
// # What the Decoder does
//
//	Open            initialize (protocolVersion 1, fs and terminal advertised false)
//	initialize ok   session/new {cwd: Profile.Cwd or inv.Dir, mcpServers: Profile.MCPServers or []}
//	                with Spec.ResumeSessionID: session/load {sessionId, cwd, mcpServers}
//	                instead, if agentCapabilities.loadSession is true; else turn 1
//	                fails (api_error, as a failed handshake below)
//	session/load    every session/update until its answer is the session's history
//	pending         replayed, and dropped: the earlier turns' events are in the run's
//	                log already
//	session/new ok  session.started (sessionId, models.currentModelId; a loaded
//	or load ok      session keeps the resumed id: the answer has none), after a load
//	                Profile.SessionLoaded's events; session/set_mode
//	                Profile.Mode if set; session/set_config_option for each of
//	                Profile.ConfigOptions, in order, each once the last was accepted;
//	                then turn 1: session/prompt with the Spec's prompt
//	an error answer to initialize, session/new, session/load, set_mode or
//	                set_config_option
//	                turn.completed failed (Profile.ClassifyError, else api_error; for
//	                session/load an api_error is session_not_found); Pending
//	                reports done, so stdin closes and the CLI exits
//
// session/update kinds (Profile.Update sees each first and may take it):
//
//	agent_message_chunk      message.delta; the text since the last boundary becomes
//	                         message.completed at a tool call, a thought or the turn's end
//	agent_thought_chunk      reasoning.delta, then reasoning.completed (Profile.Reasoning)
//	tool_call                tool_call.started, and .completed if its status is final
//	tool_call_update         .started if the call is new, .completed at completed/failed
//	                         (output: the text of its content, else rawOutput); a diff
//	                         content also gives file.changed
//	plan                     plan.updated
//	user_message_chunk, available_commands_update, current_mode_update,
//	config_option_update, session_info_update, usage_update: nothing
//	anything else            agent.unparsed
//
// Agent → client requests:
//
//	session/request_permission  tool_call.started if the call is new (Gemini asks before any
//	                            tool_call), then approval.requested {id "acp-<n>", tool_call_id,
//	                            tool (Profile.ToolName, else the call's kind), input
//	                            (Profile.ToolInput, else rawInput, else title/kind/content),
//	                            options}. Options are picked by kind, never by optionId:
//	                            allow → allow_once, allow_session → allow_always (offered
//	                            only when the CLI lists one), deny → reject_once (the
//	                            cancelled outcome if none), deny_and_stop → reject_once
//	                            then session/cancel. With Profile.RefuseAll every request is
//	                            answered reject_once at once, with a warning. The decision's message has no field
//	                            in ACP and is dropped. A request while no turn runs is
//	                            answered cancelled.
//	fs/*, terminal/*, others    a JSON-RPC error (-32601) at once, and a warning: the CLI
//	                            never waits on the gateway
//
// The end of a turn is the session/prompt answer: turn.completed with the
// turn's result (its last completed message), usage (Profile.ReadUsage and
// Counting; usage.updated carries the run's sum so far) and status:
//
//	end_turn                    succeeded
//	cancelled                   cancelled (class interrupted): InterruptTurn, deny_and_stop
//	max_tokens                  failed, context_exceeded
//	max_turn_requests           failed, max_turns
//	refusal                     failed, refused
//	other                       failed, agent_crashed
//	a JSON-RPC error            failed, Profile.ClassifyError (else api_error)
//
// Tool calls still open at the end of a turn are completed as failed,
// approvals still pending are reported approval.resolved "withdrawn". A
// denied call that the CLI says nothing more about (Gemini goes on after a
// deny) is completed as failed when the next tool call starts.
//
// Session methods:
//
//	Send(text, false)   while idle: session/prompt, the next turn. During a turn: a
//	                    runs.ErrConflict (the supervisor queues messages).
//	Send(text, true)    during a turn, with SteerMerges: another session/prompt that joins
//	                    the running turn, which ends once every prompt of it answered;
//	                    with SteerCancels: runs.ErrUnsupported, because the CLI would
//	                    cancel the running turn.
//	InterruptTurn()     session/cancel (a notification), after answering every pending
//	                    approval cancelled as ACP requires; the prompt then answers
//	                    cancelled. Idle: runs.ErrConflict.
//	Answer(id, d, msg)  as above; an unknown, answered or withdrawn id wraps runs.ErrNotFound.
//	Close()             Pending reports done once no turn runs (at once if idle).
//	Interrupt()         (the whole run; any goroutine) session/cancel of the running turn;
//	                    Pending reports done once it ended. nil when no turn runs: the
//	                    supervisor then signals.
//	Finish(exit, tail)  a turn still running fails (Profile.ClassifyExit, else
//	                    process_killed for a signal, agent_crashed otherwise), as does a
//	                    run that ended before turn 1 did. The Outcome's Usage is the sum
//	                    of the turns, NumTurns their number, Status/StopReason/Result/Error
//	                    the last turn's. CostUSD is the sum of the turns' costs, which
//	                    only Profile.TurnBill gives (no ACP prompt result has one).
//
// Every method takes one lock, so the Decoder is safe for Interrupt from
// another goroutine.
//
// # MCP servers
//
// MCPServers turns a run's Spec.MCPServers into session/new's entries
// (stdio {name, command, args, env: [{name, value}]}, remote {type:
// "http", name, url, headers: [{name, value}]}) for Profile.MCPServers,
// and MCPSecrets lists the env and header values they carry, for
// Command.Secrets. Profile.MCPTool tells a call of an MCP tool (a name of
// the CLI's, split by SplitMCPName): tool_call.started then carries
// mcp_server (the key of Spec.MCPServers) and mcp_tool, and
// approval.requested mcp_server. With Profile.RefuseAll and AllowMCP, a
// run that asks for no approvals has its MCP tools allowed once each,
// unasked, while whatever else its mode asks for is refused.
//
// # Usage counting
//
// Usage is read only from the session/prompt result, by ReadUsage, which
// must normalize to the gateway's convention (input includes cache reads,
// output includes reasoning). PerTurn takes it as the turn's; Cumulative
// subtracts the previous turn's figure (a zero report, as a cancelled turn
// may give, leaves the running figure alone); LastRequest takes it as the
// turn's although it covers only the last model request: the adapter's
// doc must state the gap.
//
// A CLI whose result falls short of the bill and that keeps the whole of
// it elsewhere sets Profile.TurnUsage instead (Gemini, which reads its
// own chat recording): it is asked once per turn, at every end of one
// (a result, an error answer, the process's end in Finish), with the
// session id and the result (nil but for a result), and its usage is
// the turn's; the events it returns (a warning when its source could not
// be read) precede usage.updated. Profile.TurnBill is the same hook with
// the turn's cost beside its usage (OpenCode, which reads its own store,
// where every model request is priced): turn.completed carries the cost,
// usage.updated and the Outcome their sum; a NaN or negative cost is
// dropped.
//
// Profile.UsageSoFar, when set, is asked at every tool call's start for
// the running turn's usage so far; usage.updated then carries the run's
// sum with it, so that a token budget sees a long turn before it ends.
// The turn's own figure at its end still comes from TurnUsage.
//
// # Testing an adapter
//
// Package acptest drives a Session over a real CLI the way the supervisor
// does (Open, Pending after each line and each call, stdin closed at
// done), with Do for Answer/Send/InterruptTurn/Close and Wait* helpers
// that wait for events. This package's own tests play a scripted agent
// (decoder_test.go) and fuzz the line parser (FuzzDecode).
package acp
