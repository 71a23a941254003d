// The runs list: GET /v1/runs with the status and agent filters, a page
// at a time by its cursor, refreshed in place. Rows are kept by run id and
// updated, not redrawn, so that a refresh neither moves the focus nor
// makes the list jump.

import { ApiError } from "./api.js";
import { h, byId, formatUSD, formatTime, clipText } from "./dom.js";

const PAGE = 25;
const REFRESH_MS = 5000;
// PROMPT_SHOWN bounds the prompt a row shows; PROMPT_TITLE, the prompt its
// title (the tooltip) holds.
const PROMPT_SHOWN = 60;
const PROMPT_TITLE = 200;

/**
 * promptPreview is what a row shows of a run's prompt (the run's
 * prompt_preview, the start of it on one line): its start, clipped, and
 * all of it for the row's title. It is set as text, never as markup.
 */
export function promptPreview(run) {
  const line = String(run?.prompt_preview ?? "").replace(/\s+/g, " ").trim();
  return { text: clipText(line, PROMPT_SHOWN), title: clipText(line, PROMPT_TITLE) };
}

/**
 * collectPages reads up to pages pages of runs with getPage(cursor),
 * following next_cursor from the first page, and returns their runs and
 * the cursor of the page after them ("" when there is none).
 */
export async function collectPages(getPage, pages) {
  const runs = [];
  let cursor = "";
  for (let p = 0; p < Math.max(1, pages); p++) {
    const page = await getPage(cursor);
    runs.push(...(page?.runs ?? []));
    cursor = page?.next_cursor ?? "";
    if (!cursor) break;
  }
  return { runs, next: cursor };
}

/** RunsList draws the list; onError is told of a failed request. */
export class RunsList {
  constructor({ api, onError }) {
    this.api = api;
    this.onError = onError;
    this.pages = 1;
    this.next = "";
    this.rows = new Map();
    this.timer = 0;
    this.loading = null;
    this.current = "";
    this.el = {
      form: byId("runs-filter"),
      status: byId("filter-status"),
      agent: byId("filter-agent"),
      auto: byId("runs-auto"),
      body: byId("runs-body"),
      empty: byId("runs-empty"),
      more: byId("runs-more"),
      error: byId("runs-error"),
    };
    this.el.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.pages = 1;
      this.refresh();
    });
    for (const sel of [this.el.status, this.el.agent]) {
      sel.addEventListener("change", () => {
        this.pages = 1;
        this.refresh();
      });
    }
    this.el.more.addEventListener("click", () => this.more());
    this.el.auto.addEventListener("change", () => this.schedule());
    document.addEventListener("visibilitychange", () => this.schedule());
  }

  /** setAgents fills the agent filter with the gateway's agents. */
  setAgents(agents) {
    const sel = this.el.agent;
    const keep = sel.value;
    sel.replaceChildren(h("option", { value: "", text: "any" }), ...agents.map((a) => h("option", { value: a.name, text: a.name })));
    sel.value = agents.some((a) => a.name === keep) ? keep : "";
  }

  /** select marks the open run's row. */
  select(id) {
    this.current = id;
    for (const [rid, row] of this.rows) {
      if (rid === id) row.tr.setAttribute("aria-current", "true");
      else row.tr.removeAttribute("aria-current");
    }
  }

  query(cursor) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (this.el.status.value) q.set("status", this.el.status.value);
    if (this.el.agent.value) q.set("agent", this.el.agent.value);
    if (cursor) q.set("cursor", cursor);
    return "/v1/runs?" + q;
  }

  /** refresh reloads as many pages as are shown, keeping their rows. */
  async refresh() {
    if (this.loading) return this.loading;
    this.loading = this.load().finally(() => {
      this.loading = null;
      this.schedule();
    });
    return this.loading;
  }

  async load() {
    let got;
    try {
      got = await collectPages((cursor) => this.api.json("GET", this.query(cursor)), this.pages);
    } catch (err) {
      this.el.error.textContent = err.message;
      this.onError?.(err);
      return;
    }
    this.el.error.textContent = "";
    this.next = got.next;
    this.draw(got.runs);
  }

  async more() {
    if (!this.next) return;
    try {
      const page = await this.api.json("GET", this.query(this.next));
      this.pages++;
      this.next = page.next_cursor ?? "";
      this.draw([...this.shown(), ...(page.runs ?? [])]);
    } catch (err) {
      this.el.error.textContent = err.message;
      if (!(err instanceof ApiError)) throw err;
    }
  }

  shown() {
    return [...this.el.body.children].map((tr) => this.rows.get(tr.dataset.runId)?.run).filter(Boolean);
  }

  draw(runs) {
    const body = this.el.body;
    const seen = new Set();
    let before = body.firstElementChild;
    for (const run of runs) {
      if (seen.has(run.id)) continue;
      seen.add(run.id);
      let row = this.rows.get(run.id);
      if (!row) {
        row = this.newRow(run.id);
        this.rows.set(run.id, row);
      }
      this.fill(row, run);
      if (row.tr !== before) body.insertBefore(row.tr, before);
      else before = before.nextElementSibling;
    }
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
      }
    }
    this.el.empty.hidden = runs.length > 0;
    this.el.more.hidden = !this.next;
    this.select(this.current);
  }

  newRow(id) {
    const link = h("a", { href: "#/runs/" + encodeURIComponent(id), class: "run-link", title: id, text: id.slice(0, 8) + "…" });
    link.setAttribute("aria-label", "Run " + id);
    const cells = { prompt: h("td", { class: "run-prompt" }), agent: h("td"), status: h("td"), created: h("td"), cost: h("td", { class: "num" }) };
    const badge = h("span", { class: "badge" });
    cells.status.append(badge);
    const tr = h("tr", { data: { runId: id } }, h("th", { scope: "row" }, link), cells.prompt, cells.agent, cells.status, cells.created, cells.cost);
    return { tr, cells, badge, run: null };
  }

  fill(row, run) {
    row.run = run;
    const set = (el, text) => {
      if (el.textContent !== text) el.textContent = text;
    };
    const prompt = promptPreview(run);
    set(row.cells.prompt, prompt.text);
    if (row.cells.prompt.title !== prompt.title) row.cells.prompt.title = prompt.title;
    set(row.cells.agent, run.agent ?? "");
    set(row.badge, run.status ?? "");
    row.badge.className = "badge status-" + (run.status ?? "");
    set(row.cells.created, formatTime(run.created_at));
    set(row.cells.cost, typeof run.cost_usd === "number" ? formatUSD(run.cost_usd) : "–");
  }

  // schedule refreshes the list every few seconds while the page is seen
  // and auto-refresh is on.
  schedule() {
    clearTimeout(this.timer);
    this.timer = 0;
    if (!this.el.auto.checked || document.visibilityState === "hidden") return;
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }
}
