// The console's entry point: the API key, the agents, the runs list, the
// new-run form and the open run, chosen by the page's #/runs/{id}.

import { Api } from "./api.js";
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

function route() {
  const m = /^#\/runs\/([^/]+)$/.exec(location.hash);
  const id = m ? decodeURIComponent(m[1]) : "";
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
  const ok = await loadAgents();
  if (ok) say(api.key ? "Connected with the API key of this tab." : "Connected.");
  await runsList.refresh();
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
