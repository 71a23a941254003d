// DOM helpers. Text always goes in as text nodes: nothing here parses
// HTML, so agent output cannot become markup by this way.

/**
 * h creates an element. attrs: "class", "text" (its text), "data" (an
 * object of data-* values), "on" (an object of event listeners), and any
 * other attribute, set when not null, undefined or false (true sets it
 * empty). Children are nodes or strings; null, undefined and false are
 * skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = dv;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c);
  }
  return el;
}

/** byId returns the element with id, or throws: the page is ours. */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
}

/**
 * FrameBatcher collects items and hands them to flush in one batch per
 * animation frame, so that a burst of events costs one layout. A hidden
 * page gets no animation frames; a timer stands in for them there, so
 * that the page is current when it is shown again.
 */
export class FrameBatcher {
  constructor(flush) {
    this.flushFn = flush;
    this.items = [];
    this.frame = 0;
    this.timer = 0;
  }

  push(item) {
    this.items.push(item);
    if (this.frame || this.timer) return;
    if (document.visibilityState === "hidden") {
      this.timer = setTimeout(() => this.run(), 250);
    } else {
      this.frame = requestAnimationFrame(() => this.run());
    }
  }

  run() {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.timer);
    this.frame = 0;
    this.timer = 0;
    const items = this.items;
    this.items = [];
    if (items.length) this.flushFn(items);
  }

  cancel() {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.timer);
    this.frame = 0;
    this.timer = 0;
    this.items = [];
  }
}

const numberFormat = new Intl.NumberFormat("en-US");

/** formatCount formats a token count: 12,345. */
export function formatCount(n) {
  return numberFormat.format(Number(n) || 0);
}

/** formatUSD formats a cost in dollars, with enough digits for small runs. */
export function formatUSD(usd) {
  const n = Number(usd);
  if (!Number.isFinite(n)) return "–";
  return "$" + (n >= 1 ? n.toFixed(2) : n.toFixed(4));
}

/** formatTime formats an RFC 3339 time as the reader's local time. */
export function formatTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  return d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/**
 * formatElapsed formats a duration in milliseconds as a running tool's
 * time: "45s", "1m 30s", "2h 5m"; "" for anything that is not a
 * non-negative number.
 */
export function formatElapsed(ms) {
  const n = Number(ms);
  if (typeof ms !== "number" || !Number.isFinite(n) || n < 0) return "";
  const s = Math.floor(n / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** clipText bounds s to n characters, marking the cut. */
export function clipText(s, n) {
  s = String(s ?? "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}
