// Package agui translates a run's stored events into AG-UI events, the
// Agent-User Interaction protocol that CopilotKit and other front ends
// speak, and decodes AG-UI's RunAgentInput. It does no I/O: the API feeds
// a Translator one stored envelope at a time and writes what it returns.
//
// # One run, several AG-UI runs
//
// An AG-UI run ends with RUN_FINISHED or RUN_ERROR, and a run that needs a
// person's answer ends with RUN_FINISHED whose outcome is an interrupt; the
// client answers in a new RunAgentInput (its resume field), which starts
// the next AG-UI run on the same thread. An agentgate run that asks for
// approvals keeps running while it waits, so its events become a sequence
// of AG-UI runs: the first opens at run.started, each approval.requested
// ends the current one with an interrupt naming the approval, and the
// approval's approval.resolved opens the next. What the run emits while no
// AG-UI run is open (between an interrupt and its answer, or before
// run.started) is held and translated once the next one opens; what only
// changes the state is applied at once and appears in the next snapshot.
// run.completed always ends an AG-UI run, opening one first if none is
// open.
//
// # Mapping
//
//	run.queued, session.started,     STATE_SNAPSHOT when an AG-UI run opens, STATE_DELTA
//	usage.updated, plan.updated,     (RFC 6902) while one is open, of the state object
//	file.changed                     {run_id, agent, session_id, model, status, usage,
//	                                 cost_usd, plan, files_changed, pending_approval}
//	run.started                      RUN_STARTED (its input echoes the prompt as a user
//	                                 message), then STATE_SNAPSHOT
//	message.delta                    TEXT_MESSAGE_START (first delta) + TEXT_MESSAGE_CONTENT
//	message.completed                TEXT_MESSAGE_CONTENT of any text the deltas did not
//	                                 carry, TEXT_MESSAGE_END (START first if no delta came)
//	reasoning.delta                  REASONING_START + REASONING_MESSAGE_START (first delta)
//	                                 + REASONING_MESSAGE_CONTENT
//	reasoning.completed              the rest of the text, REASONING_MESSAGE_END,
//	                                 REASONING_END (a whole span if no delta came)
//	tool_call.started                TOOL_CALL_START + TOOL_CALL_ARGS (the input as JSON
//	                                 text) + TOOL_CALL_END: the arguments are complete
//	tool_call.output_delta           nothing: tool_call.completed carries the whole output
//	tool_call.progress               CUSTOM agentgate.tool_call.progress, value = the
//	                                 event's data and toolCallId, the call's AG-UI id
//	tool_call.completed              TOOL_CALL_RESULT (a tool message)
//	approval.requested               STATE_DELTA (status awaiting_approval, pending_approval),
//	                                 then RUN_FINISHED with outcome {type: interrupt}
//	approval.resolved                of the interrupt: RUN_STARTED of the next AG-UI run,
//	                                 STATE_SNAPSHOT; then CUSTOM agentgate.approval.resolved
//	turn.started, turn.completed     STEP_STARTED / STEP_FINISHED "turn N"; a later turn's
//	                                 text also becomes a user TEXT_MESSAGE
//	warning, rate_limit,             CUSTOM named agentgate.<type>, value = the event's data
//	message.queued
//	agent.unparsed                   RAW (event = the data, source = the agent)
//	run.completed                    STATE_DELTA, then RUN_FINISHED (succeeded; result =
//	                                 structured_output or result, usage) or RUN_ERROR
//	                                 (message, code = the error class, usage)
//
// Text, reasoning and steps still open when an AG-UI run ends are closed
// first, as AG-UI requires (a tool call is closed as soon as its arguments
// are out: its result may come in the next AG-UI run, as AG-UI's
// tool-bound interrupts expect); text that continues after an interrupt
// goes on in a new message. Every message, reasoning span and tool call
// id starts with the run id ("<run id>/m3", "<run id>/r1",
// "<run id>/tool/toolu_01"), so that ids stay unique on a thread of
// several runs. Only event types that AG-UI 0.0.x and 1.0 clients both
// know are produced.
//
// # Determinism
//
// A Translator's output is a function of the envelopes it was fed, in
// order, and its Options: replaying a run's log from its first event gives
// the same AG-UI events, byte for byte, which is what lets a stream resume
// by Last-Event-ID without duplicating or dropping one.
package agui
