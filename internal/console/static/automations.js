// Runs that start themselves: the schedules (GET /v1/schedules) and the
// triggers (GET /v1/triggers) of the tenant, each with what it did last
// and a link to every run it started, and the buttons that pause and
// resume them and fire a schedule now.
//
// The pure part turns the API's answers into rows of text (tested under
// Node); the views draw those rows. Names, error messages and event names
// come from the API and are user-controlled: they only ever go in as
// text. Rows are kept by id and updated in place, so that a refresh after
// a click leaves the focus on the button that was pressed.

import { h, byId, formatTime } from "./dom.js";

/** automationPath is the path of a schedule's or trigger's resource: automationPath("schedules", id, "run"). */
export function automationPath(collection, id, ...rest) {
  return ["/v1", collection, encodeURIComponent(id), ...rest].join("/");
}

/**
 * tidyDuration drops the zero units a Go duration ends with, so that the
 * gateway's "1h0m0s" reads as the "1h" it was given: "1m30s" and "10s"
 * stay as they are.
 */
export function tidyDuration(d) {
  return String(d ?? "").replace(/([hm])0s$/, "$1").replace(/h0m$/, "h");
}

/**
 * scheduleWhen says when a schedule fires: its cron expression with its
 * time zone ("0 3 * * * (Europe/Paris)", UTC when none is given), or its
 * interval ("every 10s"); "–" for neither.
 */
export function scheduleWhen(s) {
  if (s?.cron) return `${s.cron} (${s.timezone || "UTC"})`;
  if (s?.every) return `every ${tidyDuration(s.every)}`;
  return "–";
}

// OUTCOMES are the words and tones of the outcomes a fire or a delivery
// can have. A tone picks a colour class; an outcome not in this table is
// shown as the gateway wrote it, in the neutral tone.
const OUTCOMES = {
  started: { label: "started", tone: "ok" },
  queued: { label: "queued", tone: "info" },
  skipped_busy: { label: "skipped: busy", tone: "warn" },
  missed: { label: "missed", tone: "warn" },
  refused: { label: "refused", tone: "bad" },
  ignored: { label: "ignored", tone: "muted" },
};

// VERIFY_TEXT says how a trigger checks that a delivery is genuine.
const VERIFY_TEXT = {
  token: "bearer token",
  github: "GitHub signature",
  standard_webhooks: "Standard Webhooks signature",
};

/** shortRunId is how a link shows a run's id: its first 8 characters. */
function shortRunId(id) {
  return id.length > 8 ? id.slice(0, 8) + "…" : id;
}

/**
 * describeOutcome says what a fire or a delivery did: its outcome's
 * label and tone, why (the error's message, or the run that was still
 * going), and the runs it names as links: the run it started, and the
 * run it found busy. Every string in it is text to show as text.
 */
export function describeOutcome(item) {
  const outcome = String(item?.outcome ?? "");
  const known = OUTCOMES[outcome] ?? { label: outcome || "unknown", tone: "neutral" };
  const runId = typeof item?.run_id === "string" ? item.run_id : "";
  const busyRunId = typeof item?.busy_run_id === "string" ? item.busy_run_id : "";
  let detail = "";
  if (item?.error?.message) detail = String(item.error.message);
  else if (outcome === "skipped_busy") detail = "a run of it was still going";
  else if (outcome === "queued" && !runId) detail = "waits for the run still going";
  const links = [];
  if (runId) links.push({ runId, text: "run " + shortRunId(runId), label: "Run " + runId });
  if (busyRunId && busyRunId !== runId) {
    links.push({ runId: busyRunId, text: "busy: run " + shortRunId(busyRunId), label: "Busy: run " + busyRunId });
  }
  return {
    outcome,
    label: known.label,
    tone: known.tone,
    detail,
    code: String(item?.error?.code ?? ""),
    links,
    manual: item?.manual === true,
    duplicate: item?.duplicate === true,
  };
}

/**
 * outcomeSentence is one line for the page's status: "started run 1234…",
 * "refused: the tenant's quota is spent".
 */
export function outcomeSentence(item) {
  const d = describeOutcome(item);
  const run = d.links[0] ? " " + d.links[0].text : "";
  return d.label + run + (d.detail ? ": " + d.detail : "");
}

// at is a time as a row shows it: the RFC 3339 value and its text, or
// null when the API gave none.
function at(iso, time) {
  return typeof iso === "string" && iso ? { iso, text: time(iso) } : null;
}

// byName sorts rows as the gateway lists schedules: by name, then id.
function byName(a, b) {
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * scheduleRows turns GET /v1/schedules' answer into the rows of the
 * list: name, when, the next fire (none while paused), paused, and the
 * last fires, newest first, each described by describeOutcome. time
 * formats an RFC 3339 time (the reader's local time by default).
 */
export function scheduleRows(answer, { time = formatTime } = {}) {
  return (answer?.schedules ?? [])
    .filter((s) => typeof s?.id === "string" && s.id)
    .map((s) => ({
      id: s.id,
      name: String(s.name ?? ""),
      when: scheduleWhen(s),
      paused: s.paused === true,
      next: s.paused === true ? null : at(s.next_fire_at, time),
      fires: (s.last_fires ?? []).map((f) => ({ at: at(f?.fire_time, time), event: "", ...describeOutcome(f) })),
    }))
    .sort(byName);
}

/**
 * triggerRows turns GET /v1/triggers' answer into the rows of the list:
 * name, how deliveries are verified, the URL to send them to, paused,
 * until when a rotated secret still works, and the last deliveries,
 * newest first, with their event.
 */
export function triggerRows(answer, { time = formatTime } = {}) {
  return (answer?.triggers ?? [])
    .filter((t) => typeof t?.id === "string" && t.id)
    .map((t) => ({
      id: t.id,
      name: String(t.name ?? ""),
      verify: VERIFY_TEXT[t.verify] ?? String(t.verify ?? ""),
      url: String(t.url ?? ""),
      paused: t.paused === true,
      previousSecretUntil: at(t.previous_secret_expires_at, time),
      deliveries: (t.last_deliveries ?? []).map((d) => ({
        at: at(d?.received_at, time),
        event: String(d?.event ?? ""),
        ...describeOutcome(d),
      })),
    }))
    .sort(byName);
}

// --- Drawing ---

function timeEl(when) {
  return when ? h("time", { datetime: when.iso, text: when.text }) : "–";
}

function runLink(link) {
  return h("a", { href: "#/runs/" + encodeURIComponent(link.runId), class: "run-link", title: link.runId, "aria-label": link.label, text: link.text });
}

// spaced drops the missing parts and puts a space between the others, so
// that their text reads as words (to a screen reader, and in
// textContent), not run together.
function spaced(parts) {
  return parts.filter(Boolean).flatMap((p, i) => (i ? [" ", p] : [p]));
}

// outcomeParts are the pieces of one fire or delivery: its outcome as a
// badge, whether it was fired by hand, why, and its run links.
function outcomeParts(e) {
  return [
    h("span", { class: "badge outcome-" + e.tone, text: e.label }),
    e.manual ? h("span", { class: "tag", text: "by hand" }) : null,
    e.duplicate ? h("span", { class: "tag", text: "duplicate" }) : null,
    e.detail ? h("span", { class: "event-detail", title: e.code || null, text: e.detail }) : null,
    ...e.links.map(runLink),
  ];
}

function eventList(items, none) {
  if (!items.length) return h("p", { class: "help", text: none });
  return h(
    "ol",
    { class: "events" },
    ...items.map((e) =>
      h("li", { data: { outcome: e.outcome } }, ...spaced([timeEl(e.at), e.event ? h("span", { class: "tag", text: e.event }) : null, ...outcomeParts(e)])),
    ),
  );
}

function stateBadge(paused) {
  return h("span", { class: "badge " + (paused ? "state-paused" : "state-active"), text: paused ? "paused" : "active" });
}

/**
 * AutomationList is a list of schedules or triggers on its own page:
 * loaded when shown and after every action, with one error line (the
 * gateway's message) and one status line. A subclass draws its rows
 * (newRow, fill) and says what its items are called.
 */
class AutomationList {
  constructor({ api, collection, toRows, noun }) {
    this.api = api;
    this.collection = collection;
    this.toRows = toRows;
    this.noun = noun;
    this.rows = new Map();
    this.loading = null;
    this.stale = false;
    this.errorFromLoad = false;
    this.el = {
      table: byId(collection + "-table"),
      body: byId(collection + "-body"),
      empty: byId(collection + "-empty"),
      error: byId(collection + "-error"),
      status: byId(collection + "-status"),
      refresh: byId(collection + "-refresh"),
    };
    this.el.refresh.addEventListener("click", () => this.refresh());
  }

  /** show loads the list afresh; the page is about to be seen. */
  show() {
    return this.refresh();
  }

  /**
   * refresh reloads the list. A refresh asked for while one is under way
   * runs once more after it, so that what an action changed is shown.
   */
  refresh() {
    if (this.loading) {
      this.stale = true;
      return this.loading;
    }
    this.el.table.setAttribute("aria-busy", "true");
    this.loading = (async () => {
      do {
        this.stale = false;
        await this.load();
      } while (this.stale);
    })().finally(() => {
      this.loading = null;
      this.el.table.removeAttribute("aria-busy");
    });
    return this.loading;
  }

  async load() {
    let answer;
    try {
      answer = await this.api.json("GET", "/v1/" + this.collection);
    } catch (err) {
      this.showError(`Could not list the ${this.collection}: ${err.message}`, true);
      return;
    }
    if (this.errorFromLoad) this.showError("", false);
    this.draw(this.toRows(answer));
  }

  showError(text, fromLoad) {
    this.el.error.textContent = text;
    this.errorFromLoad = fromLoad && text !== "";
  }

  say(text) {
    this.el.status.textContent = text;
  }

  draw(rows) {
    const body = this.el.body;
    const seen = new Set();
    let before = body.firstElementChild;
    for (const data of rows) {
      if (seen.has(data.id)) continue;
      seen.add(data.id);
      let row = this.rows.get(data.id);
      if (!row) {
        row = this.newRow(data.id);
        this.rows.set(data.id, row);
      }
      row.data = data;
      this.fill(row, data);
      if (row.tr !== before) body.insertBefore(row.tr, before);
      else before = before.nextElementSibling;
    }
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
      }
    }
    this.el.table.hidden = seen.size === 0;
    this.el.empty.hidden = seen.size > 0;
  }

  // button makes a row's button. While its action runs it is marked busy
  // (aria-disabled, not disabled: a disabled button would lose the focus)
  // and a second press does nothing.
  button(text, onPress) {
    const b = h("button", { type: "button", text });
    b.addEventListener("click", () => {
      if (b.getAttribute("aria-disabled") === "true") return;
      onPress(b);
    });
    return b;
  }

  /**
   * act runs one action of a row's button, shows its error with the
   * gateway's message, and then refreshes the list.
   */
  async act(row, button, what, fn) {
    this.showError("", false);
    button.setAttribute("aria-disabled", "true");
    button.setAttribute("aria-busy", "true");
    try {
      await fn();
    } catch (err) {
      this.showError(`${what} “${row.data.name}”: ${err.message}`, false);
    } finally {
      button.removeAttribute("aria-disabled");
      button.removeAttribute("aria-busy");
    }
    await this.refresh();
  }

  /** togglePause pauses a running item or resumes a paused one (PATCH {"paused": …}). */
  togglePause(row, button) {
    const paused = !row.data.paused;
    return this.act(row, button, paused ? "Could not pause" : "Could not resume", async () => {
      const got = await this.api.json("PATCH", automationPath(this.collection, row.data.id), { body: { paused } });
      this.say(`${this.noun} “${got?.name ?? row.data.name}” is ${got?.paused ? "paused" : "active"}.`);
    });
  }

  pauseLabel(row) {
    const text = row.data.paused ? "Resume" : "Pause";
    if (row.pause.textContent !== text) row.pause.textContent = text;
  }
}

/** SchedulesView is the page of the tenant's schedules. */
export class SchedulesView extends AutomationList {
  constructor({ api }) {
    super({ api, collection: "schedules", toRows: scheduleRows, noun: "Schedule" });
    // The last "Fire now" of each schedule, shown in its row until the
    // page is left.
    this.fired = new Map();
  }

  newRow(id) {
    const row = { data: null };
    row.name = h("th", { scope: "row", class: "item-name", title: id });
    row.when = h("td");
    row.next = h("td");
    row.state = h("td");
    row.fires = h("td");
    row.result = h("p", { class: "fire-result" });
    row.pause = this.button("Pause", (b) => this.togglePause(row, b));
    row.fireNow = this.button("Fire now", (b) => this.fire(row, b));
    const actions = h("td", {}, h("div", { class: "row" }, row.pause, row.fireNow), row.result);
    row.tr = h("tr", { data: { scheduleId: id } }, row.name, row.when, row.next, row.state, row.fires, actions);
    return row;
  }

  fill(row, s) {
    row.name.textContent = s.name;
    row.when.textContent = s.when;
    row.next.replaceChildren(timeEl(s.next));
    row.state.replaceChildren(stateBadge(s.paused));
    row.tr.dataset.paused = String(s.paused);
    row.fires.replaceChildren(eventList(s.fires, "No fires yet."));
    this.pauseLabel(row);
    const fire = this.fired.get(s.id);
    if (fire) {
      row.result.dataset.outcome = fire.outcome;
      row.result.replaceChildren(...spaced(["Fired now:", ...outcomeParts(fire)]));
    }
  }

  /** fire starts the schedule's run now (POST /v1/schedules/{id}/run) and shows the fire's outcome. */
  fire(row, button) {
    return this.act(row, button, "Could not fire", async () => {
      const fire = await this.api.json("POST", automationPath("schedules", row.data.id, "run"));
      // The row says "Fired now" already: no "by hand" tag.
      this.fired.set(row.data.id, { ...describeOutcome(fire), manual: false });
      this.say(`Fired “${row.data.name}”: ${outcomeSentence(fire)}`);
    });
  }

  /** leave forgets the results of Fire now, when the page is left. */
  leave() {
    this.fired.clear();
    for (const row of this.rows.values()) {
      row.result.replaceChildren();
      delete row.result.dataset.outcome;
    }
  }
}

/** TriggersView is the page of the tenant's triggers. */
export class TriggersView extends AutomationList {
  constructor({ api }) {
    super({ api, collection: "triggers", toRows: triggerRows, noun: "Trigger" });
  }

  newRow(id) {
    const row = { data: null };
    row.name = h("th", { scope: "row", class: "item-name", title: id });
    row.verify = h("td");
    row.url = h("td", { class: "trigger-url" });
    row.state = h("td");
    row.deliveries = h("td");
    row.pause = this.button("Pause", (b) => this.togglePause(row, b));
    const actions = h("td", {}, h("div", { class: "row" }, row.pause));
    row.tr = h("tr", { data: { triggerId: id } }, row.name, row.verify, row.url, row.state, row.deliveries, actions);
    return row;
  }

  fill(row, t) {
    row.name.textContent = t.name;
    row.verify.textContent = t.verify;
    row.url.replaceChildren(
      h("code", { text: t.url }),
      t.previousSecretUntil ? h("p", { class: "help" }, "The previous secret works until ", timeEl(t.previousSecretUntil), ".") : null,
    );
    row.state.replaceChildren(stateBadge(t.paused));
    row.tr.dataset.paused = String(t.paused);
    row.deliveries.replaceChildren(eventList(t.deliveries, "No deliveries yet."));
    this.pauseLabel(row);
  }

  leave() {}
}
