// The form of a new run: the agents from GET /v1/agents (those not
// installed cannot be picked), the prompt, and the fields of the create
// request the chosen agent takes; POST /v1/runs with an Idempotency-Key,
// so that a double submit makes one run.

import { h, byId } from "./dom.js";

// The form's optional controls, by the request field each sets.
const OPTIONAL = { model: "run-model", effort: "run-effort", interactive: "run-interactive", approvals: "run-approvals" };

/** NewRunForm draws the form; onCreated gets the created run. */
export class NewRunForm {
  constructor({ api, onCreated }) {
    this.api = api;
    this.onCreated = onCreated;
    this.agents = [];
    this.pendingKey = "";
    this.el = {
      form: byId("run-form"),
      agent: byId("run-agent"),
      agentHelp: byId("run-agent-help"),
      prompt: byId("run-prompt"),
      permission: byId("run-permission"),
      approvals: byId("run-approvals"),
      model: byId("run-model"),
      effort: byId("run-effort"),
      interactive: byId("run-interactive"),
      error: byId("run-form-error"),
    };
    this.el.agent.addEventListener("change", () => this.agentChanged());
    this.el.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    // Any change to the form makes the next submit a new request.
    this.el.form.addEventListener("input", () => {
      this.pendingKey = "";
    });
  }

  /** setAgents fills the agent choice; an agent that is not installed is shown but cannot be chosen. */
  setAgents(agents) {
    this.agents = agents;
    const sel = this.el.agent;
    const keep = sel.value;
    sel.replaceChildren(
      ...agents.map((a) => {
        const state = a.installed ? `${a.version ?? ""} ${a.compatibility}`.trim() : "not installed";
        return h("option", { value: a.name, disabled: !a.installed, text: `${a.name} (${state})` });
      }),
    );
    const usable = agents.filter((a) => a.installed);
    sel.value = usable.some((a) => a.name === keep) ? keep : (usable[0]?.name ?? "");
    this.agentChanged();
  }

  agentChanged() {
    const a = this.agents.find((x) => x.name === this.el.agent.value);
    const help = this.el.agentHelp;
    if (!a) {
      help.textContent = this.agents.length ? "No agent is installed on this gateway." : "";
      return;
    }
    const sentence = (t) => (t && !/[.!?]$/.test(t) ? t + "." : t);
    const confined = a.enforcement === "sandbox" ? `Confined by ${a.sandbox || "the gateway's sandbox"}.` : "Only the CLI enforces the permission.";
    help.textContent = [sentence(a.advisory), confined].filter(Boolean).join(" ");
    const caps = new Set(a.capabilities ?? []);
    for (const [field, id] of Object.entries(OPTIONAL)) {
      const el = byId(id);
      const ok = caps.has(field);
      el.disabled = !ok;
      el.title = ok ? "" : `${a.name} does not take ${field}`;
    }
  }

  body() {
    const el = this.el;
    const b = { agent: el.agent.value, prompt: el.prompt.value };
    if (el.permission.value) b.permission = el.permission.value;
    if (!el.model.disabled && el.model.value.trim()) b.model = el.model.value.trim();
    if (!el.effort.disabled && el.effort.value) b.effort = el.effort.value;
    if (!el.interactive.disabled && el.interactive.checked) b.interactive = true;
    if (!el.approvals.disabled && el.approvals.value !== "never") b.approvals = el.approvals.value;
    return b;
  }

  async submit() {
    const el = this.el;
    el.error.textContent = "";
    if (!el.agent.value) {
      el.error.textContent = "Choose an installed agent.";
      el.agent.focus();
      return;
    }
    if (!el.prompt.value.trim()) {
      el.error.textContent = "Write a prompt.";
      el.prompt.focus();
      return;
    }
    const submit = el.form.querySelector('button[type="submit"]');
    submit.disabled = true;
    submit.setAttribute("aria-busy", "true");
    // The same key for retries of the same form: a second click after a
    // lost answer returns the run the first made.
    this.pendingKey ||= crypto.randomUUID();
    try {
      const run = await this.api.json("POST", "/v1/runs", { body: this.body(), headers: { "Idempotency-Key": this.pendingKey } });
      this.pendingKey = "";
      this.onCreated(run);
    } catch (err) {
      el.error.textContent = err.message;
      const field = { agent: el.agent, prompt: el.prompt, permission: el.permission, model: el.model, effort: el.effort,
        interactive: el.interactive, approvals: el.approvals }[err.field];
      field?.focus();
    } finally {
      submit.disabled = false;
      submit.removeAttribute("aria-busy");
    }
  }
}
