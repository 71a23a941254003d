// The live view of one run: its record, its events as a transcript
// (messages as Markdown, reasoning folded, tool calls with their input and
// output, approvals with their buttons), its usage and cost, the controls
// of an interactive session, and what it changed.
//
// Events are applied in batches, one per animation frame, and each only
// adds to or updates its own entry: a long stream appends, it never
// redraws the transcript.

import { ApiError, runPath } from "./api.js";
import { h, byId, FrameBatcher, formatCount, formatUSD, formatTime, formatElapsed, clipText } from "./dom.js";
import { setMarkdown } from "./markdown.js";
import { parseDiff, renderDiff } from "./diff.js";
import { RunStream } from "./stream.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out"]);

const DECISION_LABELS = {
  allow: "Approve",
  allow_session: "Approve for the session",
  deny: "Deny",
  deny_and_stop: "Deny and stop the turn",
};

const RESOLUTION_TEXT = {
  allow: "Approved",
  allow_session: "Approved for the session",
  deny: "Denied",
  deny_and_stop: "Denied, turn stopped",
};

const REASON_TEXT = {
  client: "",
  timeout: " (no answer in time)",
  withdrawn: " (withdrawn by the agent)",
  run_ended: " (the run ended)",
};

/** HIBERNATED_WHY says, by run.hibernated's reason, why the run slept. */
const HIBERNATED_WHY = {
  idle: "idle",
  shutdown: "its replica shut down",
  replica_lost: "taken over",
};

const STREAM_TEXT = {
  idle: "not connected",
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  reconnected: "reconnected",
  ended: "ended",
  error: "stopped",
};

// How close to the bottom of the transcript counts as following it.
const STICKY_PX = 48;

// A streaming message longer than this many characters is drawn at most
// once per LONG_MESSAGE_MS.
const LONG_MESSAGE = 16384;
const LONG_MESSAGE_MS = 200;

/**
 * RunView shows one run in the page's run panel. agents returns GET
 * /v1/agents' list, for what the run's agent can do; onChange is told
 * when the run's status changes, so that the list can refresh.
 */
export class RunView {
  constructor(runId, { api, agents, onChange }) {
    this.runId = runId;
    this.api = api;
    this.agents = agents;
    this.onChange = onChange;
    this.run = null;
    this.ended = false;
    this.activity = "";
    this.pendingApprovals = new Map();
    this.approvalCount = 0;
    this.sessionId = "";
    this.turnCost = 0;
    // Open entries by the id that groups their events.
    this.messages = new Map();
    this.reasoning = new Map();
    this.lastReasoning = null;
    this.tools = new Map();
    this.userMessages = new Map();
    this.dirtyMessages = new Set();
    this.batch = new FrameBatcher((events) => this.applyBatch(events));
    this.stream = new RunStream(runId, {
      api,
      onEvent: (env) => this.batch.push(env),
      onState: (state, info) => this.showStreamState(state, info),
    });
    this.el = {
      title: byId("run-title"),
      placeholder: byId("run-placeholder"),
      body: byId("run-body"),
      status: byId("run-status"),
      activity: byId("run-activity"),
      agent: byId("run-agent-name"),
      model: byId("run-model-name"),
      usageIn: byId("usage-input"),
      usageOut: byId("usage-output"),
      cacheRead: byId("usage-cache-read"),
      cacheWrite: byId("usage-cache-write"),
      cost: byId("usage-cost"),
      streamStatus: byId("stream-status"),
      transcript: byId("transcript"),
      controls: byId("controls"),
      messageForm: byId("message-form"),
      messageText: byId("message-text"),
      messageMode: byId("message-mode"),
      interrupt: byId("btn-interrupt"),
      close: byId("btn-close"),
      cancel: byId("btn-cancel"),
      error: byId("run-error"),
      changesNote: byId("changes-note"),
      files: byId("files"),
      archive: byId("archive-link"),
      diffSection: byId("diff-section"),
      diffSummary: byId("diff-summary"),
      diff: byId("diff"),
    };
    this.listeners = [];
  }

  /** open shows the run and starts following its events. */
  async open() {
    const el = this.el;
    el.title.textContent = "Run " + this.runId;
    el.placeholder.hidden = true;
    el.body.hidden = false;
    el.transcript.replaceChildren();
    el.files.replaceChildren();
    el.diff.replaceChildren();
    el.diffSection.hidden = true;
    el.diffSection.open = false;
    el.changesNote.hidden = false;
    el.changesNote.textContent = "Available when the run ends.";
    el.error.textContent = "";
    el.cost.dataset.usd = "0";
    el.cost.textContent = "–";
    for (const id of ["usageIn", "usageOut", "cacheRead", "cacheWrite"]) el[id].textContent = "0";
    el.activity.textContent = "–";
    el.model.textContent = "–";
    el.streamStatus.dataset.reconnects = "0";
    this.setDownload(el.archive, runPath(this.runId, "archive"), `run-${this.runId}.tar.gz`);
    this.bind();
    try {
      this.run = await this.api.json("GET", runPath(this.runId));
    } catch (err) {
      if (this.closed) return;
      this.showError(err);
      if (err instanceof ApiError && err.status === 404) return;
    }
    // Another run may have been opened meanwhile: the page is its now.
    if (this.closed) return;
    if (this.run) this.showRecord(this.run);
    this.stream.start();
  }

  /** close stops the stream and the view's listeners. */
  close() {
    this.closed = true;
    this.stream.stop();
    this.batch.cancel();
    clearTimeout(this.wake);
    for (const [target, type, fn] of this.listeners) target.removeEventListener(type, fn);
    this.listeners = [];
  }

  listen(target, type, fn) {
    target.addEventListener(type, fn);
    this.listeners.push([target, type, fn]);
  }

  bind() {
    const el = this.el;
    this.listen(el.messageForm, "submit", (e) => {
      e.preventDefault();
      this.sendMessage();
    });
    this.listen(el.messageText, "keydown", (e) => {
      // Ctrl+Enter (or Cmd+Enter) sends, as in most chat boxes.
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.sendMessage();
      }
    });
    this.listen(el.interrupt, "click", () => this.post("interrupt", "Interrupting the turn…"));
    this.listen(el.close, "click", () => this.post("close", "Closing the session…"));
    this.listen(el.cancel, "click", () => this.post("cancel", "Cancelling the run…"));
  }

  agent() {
    return this.agents().find((a) => a.name === this.run?.agent);
  }

  showRecord(run) {
    const el = this.el;
    el.agent.textContent = run.agent;
    if (run.model) el.model.textContent = run.model;
    this.setStatus(run.status);
    if (run.activity) this.setActivity(run.activity);
    if (run.usage) this.showUsage(run.usage, run.cost_usd);
    const steer = this.agent()?.interaction?.steer === true;
    const steerOption = el.messageMode.querySelector('option[value="steer"]');
    steerOption.disabled = !steer;
    if (!steer) el.messageMode.value = "queue";
    this.updateControls();
  }

  setStatus(status) {
    // The replay of an ended run's events does not take it back to
    // queued or running.
    if (!status || (this.ended && !TERMINAL.has(status))) return;
    const el = this.el;
    const changed = el.status.dataset.status !== status;
    el.status.textContent = status;
    el.status.dataset.status = status;
    el.status.className = "badge status-" + status;
    if (TERMINAL.has(status)) {
      this.ended = true;
      this.setActivity("");
    }
    this.updateControls();
    if (changed) this.onChange?.();
  }

  setActivity(activity) {
    this.activity = activity;
    this.el.activity.textContent = activity || "–";
    this.updateControls();
  }

  updateControls() {
    const el = this.el;
    const interactive = this.run?.interactive === true;
    el.controls.hidden = !interactive || this.ended;
    el.cancel.hidden = this.ended;
    el.interrupt.disabled = !(this.activity === "in_turn" || this.activity === "awaiting_approval");
  }

  showStreamState(state, { reconnects, detail }) {
    const s = this.el.streamStatus;
    s.dataset.state = state;
    s.dataset.reconnects = String(reconnects);
    let text = STREAM_TEXT[state] ?? state;
    if (state === "reconnected" && reconnects > 1) text += ` (${reconnects} times)`;
    if (state === "error" && detail) text += ": " + detail;
    s.textContent = text;
  }

  showUsage(u, cost) {
    const el = this.el;
    el.usageIn.textContent = formatCount(u.input_tokens);
    el.usageOut.textContent = formatCount(u.output_tokens);
    el.cacheRead.textContent = formatCount(u.cache_read_tokens);
    el.cacheWrite.textContent = formatCount(u.cache_write_tokens);
    if (typeof cost === "number") {
      el.cost.dataset.usd = String(cost);
      el.cost.textContent = formatUSD(cost);
    }
  }

  showError(err) {
    this.el.error.textContent = err instanceof Error ? err.message : String(err);
  }

  // applyBatch applies one frame's events, then renders the messages they
  // touched once each, and keeps the transcript at its end if the reader
  // was there.
  applyBatch(events) {
    const t = this.el.transcript;
    const follow = t.scrollHeight - t.scrollTop - t.clientHeight < STICKY_PX;
    for (const env of events) {
      if (!env) continue; // a wake-up for a deferred message
      try {
        this.apply(env);
      } catch (err) {
        console.error("event", env?.seq, env?.type, err);
      }
    }
    const now = performance.now();
    for (const m of this.dirtyMessages) {
      // A long message still streaming is drawn a few times a second, not
      // at every frame: each drawing renders all of it.
      if (!m.complete && m.text.length > LONG_MESSAGE && now - m.drawnAt < LONG_MESSAGE_MS) {
        clearTimeout(this.wake);
        this.wake = setTimeout(() => this.batch.push(null), LONG_MESSAGE_MS);
        continue;
      }
      setMarkdown(m.body, m.text, { headingOffset: 3 });
      m.drawnAt = now;
      this.dirtyMessages.delete(m);
    }
    if (follow) t.scrollTop = t.scrollHeight;
  }

  add(entry) {
    this.el.transcript.append(entry);
    return entry;
  }

  apply(env) {
    const d = env.data ?? {};
    switch (env.type) {
      case "run.queued":
        this.setStatus("queued");
        this.note("queued", d.position ? `Queued (position ${d.position})` : "Queued");
        break;
      case "run.started":
        this.setStatus("running");
        if (d.model) this.el.model.textContent = d.model;
        this.note("started", `Started: ${d.permission ?? ""}${d.cli_version ? ", CLI " + d.cli_version : ""}` +
          (d.version_status && d.version_status !== "verified" ? ` (${d.version_status})` : ""));
        if (!this.run?.interactive && d.prompt) this.userMessage("prompt", d.prompt, "");
        break;
      case "session.started":
        if (d.model) this.el.model.textContent = d.model;
        // Some CLIs announce their session again at every turn.
        if (d.session_id !== this.sessionId) this.note("session", `Session ${d.session_id}${d.model ? " · " + d.model : ""}`);
        this.sessionId = d.session_id;
        break;
      case "turn.started":
        this.setActivity("in_turn");
        this.userMessage(d.message_id || `turn-${d.turn}`, d.text, "", d.turn);
        break;
      case "message.queued":
        this.userMessage(d.message_id, d.text, d.mode === "steer" ? "steered into the turn" : "queued");
        break;
      case "run.resumed":
        if (d.reason === "woken") {
          // The waking message's turn.started follows.
          this.note("resumed", `Woken on ${d.replica}; the session goes on from turn ${d.turn}`);
          break;
        }
        this.setActivity("idle");
        this.note("resumed", `Taken over by ${d.replica} after ${d.previous_replica} stopped answering; goes on from turn ${d.turn}`);
        break;
      case "run.hibernated":
        this.setActivity("hibernated");
        this.note("hibernated", `Hibernated after turn ${d.turn} (${HIBERNATED_WHY[d.reason] ?? d.reason}): ` +
          `the next message wakes it${d.closes_at ? "; closes at " + formatTime(d.closes_at) : ""}`);
        break;
      case "message.delta":
        this.messageDelta(d.message_id, d.text);
        break;
      case "message.completed":
        this.messageCompleted(d.message_id, d.text);
        break;
      case "reasoning.delta":
        this.reasoningDelta(d.id, d.text);
        break;
      case "reasoning.completed":
        this.reasoningCompleted(d.text, d.visibility);
        break;
      case "tool_call.started":
        this.toolStarted(d, env.parent_tool_call_id);
        break;
      case "tool_call.output_delta":
        this.toolOutput(d.id, d.text);
        break;
      case "tool_call.progress":
        this.toolProgress(d);
        break;
      case "tool_call.completed":
        this.toolCompleted(d);
        break;
      case "approval.requested":
        this.approvalRequested(d);
        break;
      case "approval.resolved":
        this.approvalResolved(d);
        break;
      case "turn.completed":
        this.turnCompleted(d);
        break;
      case "usage.updated":
        this.showUsage(d.usage ?? {}, typeof d.cost_usd === "number" ? Math.max(d.cost_usd, this.turnCost) : undefined);
        break;
      case "file.changed":
        this.note("file", `${d.kind ?? "changed"}: ${d.path}${d.move_path ? " → " + d.move_path : ""}${d.status ? " (" + d.status + ")" : ""}`);
        break;
      case "plan.updated":
        this.plan(d);
        break;
      case "rate_limit":
        this.note("warning", `Rate limited${d.status ? " (" + d.status + ")" : ""}` +
          (d.attempt ? `: retry ${d.attempt}${d.max_retries ? " of " + d.max_retries : ""}` : "") +
          (d.retry_delay_ms ? ` in ${(d.retry_delay_ms / 1000).toFixed(1)} s` : "") + (d.error ? ` — ${d.error}` : ""));
        break;
      case "warning":
        this.note("warning", `Warning ${d.code}: ${d.message}`);
        break;
      case "agent.unparsed":
        this.unparsed(d);
        break;
      case "run.completed":
        this.runCompleted(d);
        break;
      default:
        break;
    }
  }

  note(kind, text) {
    return this.add(h("li", { class: `entry note note-${kind}` }, h("p", { text })));
  }

  userMessage(id, text, badge, turn) {
    let m = id ? this.userMessages.get(id) : null;
    // Turn 1 of a one-shot run shows the prompt from run.started.
    if (!m && turn === 1) m = this.userMessages.get("prompt");
    if (m) {
      m.badge.textContent = badge;
      m.badge.hidden = !badge;
      return;
    }
    const badgeEl = h("span", { class: "badge muted", text: badge, hidden: !badge });
    const entry = this.add(
      h("li", { class: "entry user", data: { messageId: id ?? "" } },
        h("p", { class: "who" }, "You ", badgeEl),
        h("div", { class: "plain", text })),
    );
    m = { entry, badge: badgeEl };
    if (id) this.userMessages.set(id, m);
  }

  // newMessage starts an assistant message. Its body is rendered as
  // Markdown once per frame while it streams; aria-busy keeps a screen
  // reader from reading every delta.
  newMessage(id) {
    const body = h("div", { class: "md" });
    const entry = this.add(
      h("li", { class: "entry assistant", "aria-busy": "true", data: { messageId: id ?? "" } },
        h("p", { class: "who", text: this.run?.agent ?? "agent" }), body),
    );
    const m = { entry, body, text: "", complete: false, drawnAt: 0 };
    this.messages.set(id ?? "", m);
    return m;
  }

  messageDelta(id, text) {
    const m = this.messages.get(id ?? "") ?? this.newMessage(id);
    m.text += text ?? "";
    this.dirtyMessages.add(m);
  }

  messageCompleted(id, text) {
    const m = this.messages.get(id ?? "") ?? this.newMessage(id);
    m.text = text ?? "";
    m.complete = true;
    this.dirtyMessages.add(m);
    m.entry.setAttribute("aria-busy", "false");
    m.entry.classList.add("complete");
    // The id may open another message later (a text block after a tool).
    this.messages.delete(id ?? "");
  }

  newReasoning(id) {
    const text = h("div", { class: "plain reasoning-text" });
    const summary = h("summary", { text: "Reasoning…" });
    const entry = this.add(h("li", { class: "entry reasoning" }, h("details", {}, summary, text)));
    const r = { entry, text, summary, id };
    if (id) this.reasoning.set(id, r);
    this.lastReasoning = r;
    return r;
  }

  reasoningDelta(id, text) {
    const r = (id && this.reasoning.get(id)) || this.newReasoning(id);
    r.text.append(text ?? "");
  }

  // reasoning.completed names no block: it closes the one that streamed
  // last, or stands alone when none did (hidden reasoning).
  reasoningCompleted(text, visibility) {
    let r = this.lastReasoning;
    if (!r || r.done) r = this.newReasoning("");
    r.done = true;
    if (r.id) this.reasoning.delete(r.id);
    if (visibility === "redacted" || !text) {
      r.summary.textContent = "Reasoning (hidden by the agent)";
      if (!text) r.text.textContent = "The agent's reasoning was not shown.";
      else r.text.textContent = text;
    } else {
      r.summary.textContent = visibility === "summary" ? "Reasoning (summary)" : "Reasoning";
      r.text.textContent = text;
    }
  }

  toolStarted(d, parent) {
    const input = formatInput(d.input);
    const name = d.mcp_server ? `${d.mcp_server} · ${d.mcp_tool || d.name}` : d.name;
    const status = h("span", { class: "badge tool-status", text: "running" });
    const output = h("pre", { class: "tool-output", tabindex: "0", "aria-label": `Output of ${name}` },
      h("span", { class: "placeholder", text: "waiting for output…" }));
    const entry = this.add(
      h("li", { class: "entry tool-call", data: { toolCallId: d.id ?? "", status: "running", parent: parent ?? "" } },
        h("details", { open: true },
          h("summary", {},
            h("span", { class: "tool-name", text: name }), " ",
            h("code", { class: "tool-brief", text: clipText(briefInput(d.input), 90) }), " ", status),
          h("p", { class: "label", text: "Input" }),
          h("pre", { class: "tool-input", tabindex: "0", "aria-label": `Input of ${name}`, text: input }),
          h("p", { class: "label", text: "Output" }),
          output)),
    );
    this.tools.set(d.id, { entry, output, status, streamed: false });
    if ([...this.pendingApprovals.values()].includes(d.id)) this.toolAwaitsApproval(d.id);
  }

  // toolAwaitsApproval shows a tool call whose approval is pending as
  // waiting for it: it does not run yet.
  toolAwaitsApproval(id) {
    const t = id ? this.tools.get(id) : null;
    if (!t || t.entry.dataset.status !== "running") return;
    this.setToolState(t, "awaiting_approval", "waiting for approval", "waiting for approval…");
  }

  // toolApprovalResolved shows a tool call that waited for its approval as
  // running once allowed, and as not run when refused, withdrawn or ended.
  toolApprovalResolved(id, decision) {
    const t = id ? this.tools.get(id) : null;
    if (!t || t.entry.dataset.status !== "awaiting_approval") return;
    if (String(decision ?? "").startsWith("allow")) this.setToolState(t, "running", "running", "waiting for output…");
    else this.setToolState(t, "not_run", "not run", "not run: it was not approved");
  }

  setToolState(t, state, label, placeholder) {
    t.entry.dataset.status = state;
    t.status.textContent = label;
    t.status.className = `badge tool-status status-${state}`;
    if (!t.streamed) t.output.replaceChildren(h("span", { class: "placeholder", text: placeholder }));
  }

  tool(id) {
    let t = this.tools.get(id);
    if (!t) {
      // Output of a call whose start this view did not see.
      this.toolStarted({ id, name: "tool", input: null });
      t = this.tools.get(id);
    }
    return t;
  }

  toolOutput(id, text) {
    const t = this.tool(id);
    if (!t.streamed) t.output.replaceChildren();
    t.output.append(text ?? "");
    t.streamed = true;
  }

  // toolProgress shows how long a call has run, while it runs.
  toolProgress(d) {
    const t = this.tool(d.id);
    const elapsed = formatElapsed(d.elapsed_ms);
    if (t.entry.dataset.status !== "running" || !elapsed) return;
    t.status.textContent = `running · ${elapsed}`;
  }

  toolCompleted(d) {
    const t = this.tool(d.id);
    t.output.textContent = d.output ?? "";
    if (!d.output) t.output.textContent = "(no output)";
    const state = d.is_error ? "error" : "ok";
    t.entry.dataset.status = state;
    t.status.textContent = d.is_error ? "error" : "done";
    t.status.className = `badge tool-status ${d.is_error ? "status-failed" : "status-succeeded"}`;
  }

  approvalRequested(d) {
    this.pendingApprovals.set(d.id, d.tool_call_id ?? "");
    this.setActivity("awaiting_approval");
    this.toolAwaitsApproval(d.tool_call_id);
    const options = Array.isArray(d.options) && d.options.length ? d.options : ["allow", "deny"];
    const tool = d.mcp_server ? `${d.mcp_server} · ${d.tool}` : d.tool;
    const messageId = `approval-msg-${++this.approvalCount}`;
    const message = h("input", { id: messageId, type: "text", class: "approval-message", autocomplete: "off" });
    const buttons = h("div", { class: "row buttons approval-buttons" });
    const entry = h("li", { class: "entry approval", data: { approvalId: d.id, state: "pending" } },
      h("p", { class: "approval-title" }, h("strong", { class: "approval-ask", text: "Approval needed: " }), tool),
      h("pre", { class: "tool-input", tabindex: "0", "aria-label": `Input of ${tool}`, text: formatInput(d.input) }),
      d.expires_at ? h("p", { class: "help", text: `Denied unless answered by ${formatTime(d.expires_at)}.` }) : null,
      h("div", { class: "field approval-field" },
        h("label", { for: messageId, text: "Message to the model with a deny (optional)" }), message),
      buttons);
    for (const decision of options) {
      buttons.append(h("button", {
        type: "button",
        class: decision.startsWith("allow") ? "primary" : "danger",
        data: { decision },
        text: DECISION_LABELS[decision] ?? decision,
        on: { click: () => this.answer(d.id, decision, message.value, entry) },
      }));
    }
    this.add(entry);
  }

  async answer(approvalId, decision, message, entry) {
    // The answer takes the focus when it comes, by this request or by the
    // approval.resolved event, whichever is first: disabling the button
    // drops the focus it had.
    entry.dataset.answering = "true";
    const buttons = entry.querySelectorAll("button");
    for (const b of buttons) b.disabled = true;
    const body = { decision };
    if (message && decision.startsWith("deny")) body.message = message;
    try {
      const res = await this.api.json("POST", runPath(this.runId, "approvals", encodeURIComponent(approvalId)), { body });
      this.resolveApproval(entry, res.decision, res.reason, true);
    } catch (err) {
      if (err instanceof ApiError && err.code === "approval_resolved") {
        // Answered elsewhere, timed out or withdrawn: approval.resolved says which.
        return;
      }
      delete entry.dataset.answering;
      for (const b of buttons) b.disabled = false;
      this.showError(err);
    }
  }

  approvalResolved(d) {
    this.toolApprovalResolved(this.pendingApprovals.get(d.id), d.decision);
    this.pendingApprovals.delete(d.id);
    const entry = this.el.transcript.querySelector(`li.approval[data-approval-id="${CSS.escape(d.id ?? "")}"]`);
    if (entry) this.resolveApproval(entry, d.decision, d.reason, false);
    if (this.pendingApprovals.size === 0 && this.activity === "awaiting_approval") this.setActivity("in_turn");
  }

  // resolveApproval replaces the buttons with the answer. When the reader
  // answered here, focus moves to that answer, since the button it was on
  // is gone.
  resolveApproval(entry, decision, reason, answeredHere) {
    if (entry.dataset.state === "resolved") return;
    const hadFocus = entry.contains(document.activeElement) || entry.dataset.answering === "true";
    delete entry.dataset.answering;
    entry.dataset.state = "resolved";
    entry.dataset.decision = decision ?? "";
    for (const el of entry.querySelectorAll(".approval-buttons, .approval-field, .help")) el.remove();
    const ask = entry.querySelector(".approval-ask");
    if (ask) ask.textContent = "Approval: ";
    const text = (RESOLUTION_TEXT[decision] ?? decision ?? "Resolved") + (REASON_TEXT[reason] ?? "");
    const result = h("p", { class: "approval-result", tabindex: "-1", text });
    entry.append(result);
    if (answeredHere || hadFocus) result.focus();
  }

  turnCompleted(d) {
    if (this.pendingApprovals.size === 0) this.setActivity(this.run?.interactive ? "idle" : "");
    // A run's cost is the sum of its turns'; usage.updated may carry
    // none while a session runs.
    if (typeof d.cost_usd === "number") {
      this.turnCost += d.cost_usd;
      if (this.turnCost > Number(this.el.cost.dataset.usd)) {
        this.el.cost.dataset.usd = String(this.turnCost);
        this.el.cost.textContent = formatUSD(this.turnCost);
      }
    }
    const u = d.usage ?? {};
    let text = `Turn ${d.turn} ${d.status}`;
    if (d.usage) text += ` · ${formatCount(u.input_tokens)} in, ${formatCount(u.output_tokens)} out`;
    if (typeof d.cost_usd === "number") text += ` · ${formatUSD(d.cost_usd)}`;
    const entry = this.note("turn", text);
    if (d.error) entry.append(errorDetails(d.error));
  }

  plan(d) {
    const list = h("ol", { class: "plan" });
    for (const s of d.steps ?? []) {
      list.append(h("li", { data: { status: s.status } }, h("span", { class: "badge muted", text: s.status }), " ", s.step));
    }
    this.add(h("li", { class: "entry note note-plan" }, h("p", { text: "Plan" + (d.explanation ? ": " + d.explanation : "") }), list));
  }

  unparsed(d) {
    this.add(h("li", { class: "entry note note-unparsed" },
      h("details", {}, h("summary", { text: `Output the gateway did not understand (${formatCount(d.bytes)} bytes)` }),
        h("p", { class: "help", text: d.reason ?? "" }),
        h("pre", { tabindex: "0", text: d.line ?? "" }))));
  }

  runCompleted(d) {
    this.setStatus(d.status);
    if (d.usage) this.showUsage(d.usage, d.cost_usd);
    let text = `Run ${d.status}`;
    if (typeof d.duration_ms === "number") text += ` in ${(d.duration_ms / 1000).toFixed(1)} s`;
    if (d.num_turns) text += ` · ${d.num_turns} model turn${d.num_turns === 1 ? "" : "s"}`;
    const entry = this.note("end", text);
    entry.classList.add("status-" + d.status);
    if (d.error) entry.append(errorDetails(d.error));
    this.pendingApprovals.clear();
    for (const a of this.el.transcript.querySelectorAll('li.approval[data-state="pending"]')) {
      this.resolveApproval(a, "deny", "run_ended", false);
    }
    this.loadChanges(d);
  }

  async post(action, pending) {
    const el = this.el;
    el.error.textContent = "";
    const button = { interrupt: el.interrupt, close: el.close, cancel: el.cancel }[action];
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    try {
      await this.api.json("POST", runPath(this.runId, action));
      this.note("control", pending);
    } catch (err) {
      this.showError(err);
    } finally {
      button.removeAttribute("aria-busy");
      button.disabled = false;
      this.updateControls();
    }
  }

  async sendMessage() {
    const el = this.el;
    const text = el.messageText.value;
    if (!text.trim()) {
      el.error.textContent = "Write a message first.";
      el.messageText.focus();
      return;
    }
    el.error.textContent = "";
    const submit = el.messageForm.querySelector('button[type="submit"]');
    submit.disabled = true;
    try {
      await this.api.json("POST", runPath(this.runId, "messages"), { body: { text, mode: el.messageMode.value } });
      el.messageText.value = "";
    } catch (err) {
      this.showError(err);
      if (err.field === "text") el.messageText.focus();
    } finally {
      submit.disabled = false;
    }
  }

  // loadChanges shows the changed files, as download links, and the diff,
  // once the run has ended; the event's bounded copies stand in when the
  // whole ones cannot be had.
  async loadChanges(d) {
    const el = this.el;
    let files = d.files ?? [];
    try {
      files = (await this.api.json("GET", runPath(this.runId, "files"))).files ?? files;
    } catch (err) {
      if (!(err instanceof ApiError) || err.status === 401) return this.showError(err);
    }
    el.files.replaceChildren();
    el.changesNote.textContent = files.length ? `${files.length} file${files.length === 1 ? "" : "s"} changed.` : "No file changed.";
    for (const f of files) {
      const path = runPath(this.runId, "files", ...f.path.split("/").map(encodeURIComponent));
      const name = f.path.split("/").pop();
      const info = `${f.kind}${f.binary ? ", binary" : ""}${f.kind !== "delete" ? ", " + formatCount(f.size) + " bytes" : ""}`;
      const item = f.kind === "delete"
        ? h("li", {}, h("span", { text: f.path }), " ", h("span", { class: "help", text: `(${info})` }))
        : h("li", {}, this.setDownload(h("a", { text: f.path }), path, name), " ", h("span", { class: "help", text: `(${info})` }));
      el.files.append(item);
    }
    let diff = d.diff ?? "";
    let truncated = d.diff_truncated === true;
    try {
      const { text, resp } = await this.api.text(runPath(this.runId, "diff"));
      diff = text;
      truncated = resp.headers.get("X-Diff-Truncated") === "true";
    } catch (err) {
      if (!(err instanceof ApiError) || err.status === 401) return this.showError(err);
    }
    if (!diff) return;
    const parsed = parseDiff(diff);
    const added = parsed.reduce((n, f) => n + f.added, 0);
    const removed = parsed.reduce((n, f) => n + f.removed, 0);
    el.diffSummary.textContent = `Diff: ${parsed.length} file${parsed.length === 1 ? "" : "s"}, +${added} −${removed}` +
      (truncated ? " (cut at the gateway's bound)" : "");
    renderDiff(el.diff, parsed);
    el.diffSection.hidden = false;
  }

  // setDownload makes a an authenticated download of path: a plain link
  // without a key, or, with one, a fetch with the key whose bytes are
  // saved through an object URL (a link cannot carry the header).
  setDownload(a, path, name) {
    a.href = path;
    a.setAttribute("download", name);
    a.onclick = async (e) => {
      if (!this.api.key) return;
      e.preventDefault();
      try {
        const blob = await this.api.blob(path);
        const url = URL.createObjectURL(blob);
        const tmp = h("a", { href: url, download: name, hidden: true });
        document.body.append(tmp);
        tmp.click();
        tmp.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (err) {
        this.showError(err);
      }
    };
    return a;
  }
}

function errorDetails(e) {
  return h("div", { class: "run-error-details" },
    h("p", {}, h("strong", { text: e.class }), ": ", e.message ?? ""),
    e.hint ? h("p", { class: "help", text: e.hint }) : null);
}

// formatInput shows a tool's input: a command as it is, anything else as
// indented JSON.
function formatInput(input) {
  if (input === null || input === undefined) return "";
  if (typeof input === "string") return input;
  if (typeof input.command === "string" && Object.keys(input).length === 1) return input.command;
  try {
    return JSON.stringify(input, null, 2);
  } catch {
    return String(input);
  }
}

// briefInput is the one line a tool call's summary shows of its input.
function briefInput(input) {
  if (!input || typeof input !== "object") return typeof input === "string" ? input : "";
  for (const k of ["command", "file_path", "path", "pattern", "url", "query", "description"]) {
    if (typeof input[k] === "string") return input[k].split("\n")[0];
  }
  const first = Object.values(input).find((v) => typeof v === "string");
  return first ? first.split("\n")[0] : "";
}
