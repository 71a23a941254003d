// The console's entry point: the API key, the agents, and the page the
// address's fragment picks: the runs (the list, the new-run form and the
// open run, #/runs/{id}), the schedules (#/schedules) or the triggers
// (#/triggers).

import { Api } from "./api.js";
import { SchedulesView, TriggersView } from "./automations.js";
import { byId } from "./dom.js";
import { NewRunForm } from "./newrun.js";
import { RunsList } from "./runs.js";
import { RunView } from "./runview.js";

const api = new Api();
const status = byId("app-status");
const keyForm = byId("key-form");
const keyInput = byId("api-key");
const keyState = byId("key-state");
const keyForget = byId("key-forget");
let agents = [];
let view = null;
let askedForKey = false;

function say(text) {
  status.textContent = text;
}

// A 401 means this gateway has keys and the tab has none, or a wrong one:
// ask for it, once, by moving to the field.
api.onUnauthorized = (err) => {
  say(api.key ? `The API key was refused: ${err.message}` : "This gateway needs an API key: enter it above.");
  if (!askedForKey) {
    askedForKey = true;
    keyInput.focus();
  }
};

const runsList = new RunsList({ api });
const form = new NewRunForm({
  api,
  onCreated: (run) => {
    say(`Created run ${run.id}.`);
    location.hash = "#/runs/" + encodeURIComponent(run.id);
    runsList.refresh();
  },
});

const schedules = new SchedulesView({ api });
const triggers = new TriggersView({ api });
const pages = {
  runs: { main: byId("runs-page"), nav: byId("nav-runs"), heading: null },
  schedules: { main: byId("schedules-page"), nav: byId("nav-schedules"), heading: byId("schedules-title"), list: schedules },
  triggers: { main: byId("triggers-page"), nav: byId("nav-triggers"), heading: byId("triggers-title"), list: triggers },
};
const skipLink = document.querySelector(".skip-link");
let shown = "";

async function loadAgents() {
  try {
    agents = (await api.json("GET", "/v1/agents")).agents ?? [];
  } catch (err) {
    if (err.status !== 401) say(err.message);
    return false;
  }
  form.setAgents(agents);
  runsList.setAgents(agents);
  return true;
}

/**
 * parseRoute reads the page and the run from the address's fragment:
 * "#/schedules", "#/triggers", "#/runs/{id}"; anything else under "#/",
 * or none, is the runs with no run open. A fragment that is not a route
 * (a link to a place in the page) is null: the page stays as it is.
 */
function parseRoute(hash) {
  if (hash === "" || hash === "#") return { page: "runs", runId: "" };
  if (!hash.startsWith("#/")) return null;
  const parts = hash.slice(2).split("/");
  if (parts.length === 1 && (parts[0] === "schedules" || parts[0] === "triggers")) return { page: parts[0], runId: "" };
  if (parts.length === 2 && parts[0] === "runs" && parts[1]) {
    try {
      return { page: "runs", runId: decodeURIComponent(parts[1]) };
    } catch {
      // a malformed escape: no such run
    }
  }
  return { page: "runs", runId: "" };
}

// showPage shows one page and hides the others. A page reached from
// another moves the focus to its heading, so that a screen reader says
// where it landed.
function showPage(name) {
  if (shown === name) return;
  const from = shown;
  shown = name;
  for (const [key, page] of Object.entries(pages)) {
    page.main.hidden = key !== name;
    if (key === name) page.nav.setAttribute("aria-current", "page");
    else page.nav.removeAttribute("aria-current");
    if (key !== name && key === from) page.list?.leave();
  }
  if (skipLink) skipLink.hidden = name !== "runs";
  if (from) pages[name].heading?.focus();
}

function route() {
  const r = parseRoute(location.hash);
  if (!r) return;
  showPage(r.page);
  if (r.page !== "runs") {
    // The run's panel is not seen: stop following it.
    view?.close();
    view = null;
    pages[r.page].list.show();
    return;
  }
  openRun(r.runId);
}

function openRun(id) {
  // The Runs link goes back to the run that was open.
  pages.runs.nav.setAttribute("href", id ? "#/runs/" + encodeURIComponent(id) : "#/runs");
  if (view && view.runId === id) return;
  view?.close();
  view = null;
  runsList.select(id);
  if (!id) return;
  view = new RunView(id, { api, agents: () => agents, onChange: () => runsList.refresh() });
  view.open();
}

function showKeyState() {
  keyState.textContent = api.key ? "A key is in use in this tab." : "No key in use.";
}

async function start() {
  askedForKey = false;
  showKeyState();
  // The run open before this start followed its events with the key of
  // then; one opened while this start loads (a run created meanwhile)
  // already has the key of now, and reopening it would redraw its
  // transcript mid-stream.
  const before = view;
  // The page the address asks for, before anything is loaded.
  showPage(parseRoute(location.hash)?.page ?? "runs");
  const ok = await loadAgents();
  if (ok) say(api.key ? "Connected with the API key of this tab." : "Connected.");
  await runsList.refresh();
  if (view !== before) return;
  // Reopen the open run, with the key as it is now.
  view?.close();
  view = null;
  route();
}

keyForm.addEventListener("submit", (e) => {
  e.preventDefault();
  // An empty field keeps the key in use; Forget drops it.
  if (keyInput.value.trim()) api.setKey(keyInput.value);
  keyInput.value = "";
  start();
});
keyForget.addEventListener("click", () => {
  api.setKey("");
  keyInput.value = "";
  say("The key is forgotten.");
  start();
});
window.addEventListener("hashchange", route);
start();
