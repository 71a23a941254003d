// Drives agentgate's web console in Debian's Chromium, as a person would,
// and reports what the page showed. cmd/gateway's console test runs it
// against a gateway it started:
//
//   node tools/console-test/console.mjs <console URL> <output directory>
//
// CONSOLE_TEST_PLAN (JSON) says what to do and what to expect:
//   flow            "interactive" (the default), "oneshot" or "schedules"
//   key             the API key to type in, when the gateway has keys
//   prompt          the new run's prompt
//   answer          text of the (first) answer, as the page renders it
//   strong          text the answer shows in bold (optional)
//   tool            {name, command}: the tool call asked for (interactive)
//   followUp        the follow-up message, and followUpAnswer its answer
//   file            {path, content}: a changed file to download
//   addedLine       a line the diff adds, "+…"
//   literal         text of the answer that looks like HTML and must stay
//                   text (oneshot)
//   expectReconnect the stream is dropped once while the run waits for
//                   its approval, and the page must say it reconnected
//   schedule        the name of a schedule the gateway has, not paused
//                   (schedules): the page lists it, fires it now and shows
//                   a started fire with a link to its run, pauses it, and
//                   opens that run by its link; runId is that run
//   trigger         the name of a trigger the gateway has (schedules,
//                   optional): the triggers page lists it; without one, it
//                   must say how to create one
// CONSOLE_TEST_CHROMIUM is the browser (default /usr/bin/chromium).
//
// It writes <output directory>/report.json and screenshots beside it, and
// exits 0 when every expectation held, 1 when one did not, 2 on bad usage.

import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const WAIT_MS = 45_000;
const WHOLE_MS = 150_000;

const [url, outdir] = process.argv.slice(2);
if (!url || !outdir) {
  console.error("usage: node console.mjs <console URL> <output directory>");
  process.exit(2);
}
let plan;
try {
  plan = JSON.parse(process.env.CONSOLE_TEST_PLAN ?? "{}");
} catch (err) {
  console.error("CONSOLE_TEST_PLAN is not JSON:", err.message);
  process.exit(2);
}
plan.flow ??= "interactive";
if (plan.flow === "schedules" && !plan.schedule) {
  console.error('CONSOLE_TEST_PLAN: the flow "schedules" needs "schedule", the name of a schedule the gateway has');
  process.exit(2);
}
mkdirSync(outdir, { recursive: true });

const report = {
  ok: false,
  flow: plan.flow,
  failures: [],
  runId: "",
  steps: [],
  screenshots: [],
  dom: {},
  consoleErrors: [],
  pageErrors: [],
  cspViolations: [],
};

function writeReport() {
  report.ok = report.failures.length === 0 && report.steps.length > 0;
  writeFileSync(join(outdir, "report.json"), JSON.stringify(report, null, 2));
}

function expect(cond, what) {
  if (!cond) report.failures.push(what);
  return cond;
}

// The whole run is bounded: a hang reports what it got so far.
const guard = setTimeout(() => {
  report.failures.push(`the test did not finish within ${WHOLE_MS / 1000} s`);
  writeReport();
  process.exit(1);
}, WHOLE_MS);

let step = "launch";
async function run(name, fn) {
  step = name;
  const start = Date.now();
  await fn();
  report.steps.push({ name, ms: Date.now() - start });
}

const profile = mkdtempSync(join(tmpdir(), "console-profile-"));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CONSOLE_TEST_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 900 },
  acceptDownloads: true,
  timeout: WAIT_MS,
});
ctx.setDefaultTimeout(WAIT_MS);
const page = ctx.pages()[0] ?? (await ctx.newPage());
page.on("console", (m) => {
  if (m.type() === "error") report.consoleErrors.push(m.text());
});
page.on("pageerror", (e) => report.pageErrors.push(String(e?.stack ?? e)));
// Violations of the page's Content-Security-Policy (and its Trusted
// Types), as the page itself sees them.
await page.addInitScript(() => {
  window.__violations = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__violations.push(`${e.violatedDirective}: ${e.blockedURI} ${e.sample ?? ""}`.trim());
  });
});

async function shot(name, fullPage = false) {
  const path = join(outdir, name + ".png");
  await page.screenshot({ path, fullPage });
  report.screenshots.push(path);
}

const newRun = page.locator("#new-run");
const transcript = page.locator("#transcript");

// answerEntry is the completed assistant message that contains text.
function answerEntry(text) {
  return transcript.locator('li.entry.assistant[aria-busy="false"]', { hasText: text });
}

async function waitIdle() {
  await page.locator("#run-activity", { hasText: "idle" }).waitFor();
}

async function open() {
  await page.goto(url);
  if (plan.key) {
    // A gateway with keys answers the page's first calls 401: the page
    // asks for a key and moves to its field.
    await page.locator("#app-status", { hasText: "needs an API key" }).waitFor();
    report.dom.keyPrompted = await page.evaluate(() => document.activeElement?.id === "api-key");
    expect(report.dom.keyPrompted, "the page did not move to the API key field after a 401");
    await page.getByLabel("API key").fill(plan.key);
    await page.getByRole("button", { name: "Use key" }).click();
    await page.locator("#key-state", { hasText: "A key is in use" }).waitFor();
  }
  await page.locator("#app-status", { hasText: "Connected" }).waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll("#run-agent option")].some((o) => o.value === "claude" && !o.disabled));
}

async function create({ interactive }) {
  await newRun.getByLabel("Agent").selectOption("claude");
  await newRun.getByLabel("Prompt").fill(plan.prompt);
  if (interactive) {
    await newRun.getByLabel("Interactive").check();
    await newRun.getByLabel("Approvals").selectOption("ask");
  }
  await shot("01-new-run");
  await newRun.getByRole("button", { name: "Create run" }).click();
  await page.waitForFunction(() => location.hash.startsWith("#/runs/"));
  report.runId = decodeURIComponent((await page.evaluate(() => location.hash)).slice("#/runs/".length));
  await page.locator("#run-title", { hasText: report.runId }).waitFor();
}

async function interactiveFlow() {
  await run("open", open);
  await run("create", () => create({ interactive: true }));
  await run("approval", async () => {
    const approve = transcript.getByRole("button", { name: "Approve", exact: true });
    await approve.waitFor();
    // The call waits for its approval: it is not shown as running.
    const waiting = transcript.locator('li.tool-call[data-status="awaiting_approval"]', { hasText: plan.tool.command });
    await waiting.waitFor();
    const badge = (await waiting.locator(".tool-status").textContent())?.trim();
    expect(badge === "waiting for approval", `the tool call waiting for its approval says "${badge}"`);
    if (plan.expectReconnect) {
      // The stream was dropped while the run waits: the page says so,
      // and that it is back.
      await page.locator('#stream-status[data-state="reconnected"]').waitFor();
    }
    await shot("02-approval");
    // By keyboard: focus the button and press Enter.
    await approve.focus();
    await page.keyboard.press("Enter");
    await transcript.locator('li.approval[data-state="resolved"]').waitFor();
    report.dom.focusAfterApproval = await page.evaluate(() => document.activeElement?.className ?? "");
    expect(report.dom.focusAfterApproval === "approval-result", `focus after the approval was on "${report.dom.focusAfterApproval}", not its answer`);
  });
  await run("answer", async () => {
    await transcript.locator('li.tool-call[data-status="ok"]', { hasText: plan.tool.command }).waitFor();
    await answerEntry(plan.answer).waitFor();
    await waitIdle();
  });
  await run("follow-up", async () => {
    const box = page.getByLabel("Follow-up message");
    await box.fill(plan.followUp);
    // Keyboard: Tab moves on with a visible focus ring, Shift+Tab comes
    // back, Ctrl+Enter sends.
    await box.focus();
    await page.keyboard.press("Tab");
    report.dom.tabFocus = await page.evaluate(() => {
      const el = document.activeElement;
      const s = getComputedStyle(el);
      return { id: el.id, outline: s.outlineStyle, outlineWidth: s.outlineWidth };
    });
    expect(report.dom.tabFocus.id === "message-mode" && report.dom.tabFocus.outline !== "none",
      `Tab from the message box: ${JSON.stringify(report.dom.tabFocus)}`);
    await page.keyboard.press("Shift+Tab");
    await page.keyboard.press("Control+Enter");
    await transcript.locator("li.entry.user", { hasText: plan.followUp }).waitFor();
    await answerEntry(plan.followUpAnswer).waitFor();
    await waitIdle();
    await shot("03-follow-up");
  });
  await run("close", async () => {
    await page.getByRole("button", { name: "Close session" }).click();
    await page.locator('#stream-status[data-state="ended"]').waitFor();
    await page.locator('#run-status[data-status="succeeded"]').waitFor();
    await page.locator("#controls").waitFor({ state: "hidden" });
  });
  await run("diff", async () => {
    await page.locator("#diff-section:not([hidden])").waitFor();
    await page.locator("#diff-summary").click();
    const added = page.locator(".diff-line.diff-add", { hasText: plan.addedLine });
    await added.waitFor();
    await added.scrollIntoViewIfNeeded();
    await shot("04-diff", true);
  });
  await run("download", async () => {
    const link = page.locator("#files").getByRole("link", { name: plan.file.path });
    const [dl] = await Promise.all([page.waitForEvent("download"), link.click()]);
    const path = await dl.path();
    report.dom.download = { name: dl.suggestedFilename(), content: path ? readFileSync(path, "utf8") : null };
    expect(report.dom.download.name === plan.file.path.split("/").pop(), `downloaded ${report.dom.download.name}`);
    expect(report.dom.download.content === plan.file.content, `downloaded ${JSON.stringify(report.dom.download.content)}`);
    const [archive] = await Promise.all([page.waitForEvent("download"), page.locator("#archive-link").click()]);
    const bytes = readFileSync(await archive.path());
    report.dom.archive = { name: archive.suggestedFilename(), bytes: bytes.length, gzip: bytes[0] === 0x1f && bytes[1] === 0x8b };
    expect(report.dom.archive.gzip && report.dom.archive.name === `run-${report.runId}.tar.gz`, `archive: ${JSON.stringify(report.dom.archive)}`);
  });
}

async function oneshotFlow() {
  await run("open", open);
  await run("create", () => create({ interactive: false }));
  await run("answer", async () => {
    // The prompt's entry, marked: a stream that redraws the transcript
    // would replace it.
    const prompt = transcript.locator("li.entry.user", { hasText: plan.prompt });
    await prompt.waitFor();
    await prompt.evaluate((el) => {
      el.__kept = true;
    });
    await answerEntry(plan.answer).waitFor();
    await page.locator('#stream-status[data-state="ended"]').waitFor();
    await page.locator('#run-status[data-status="succeeded"]').waitFor();
    await page.locator("#changes-note", { hasText: "No file changed" }).waitFor();
    report.dom.promptKept = await prompt.evaluate((el) => el.__kept === true);
    expect(report.dom.promptKept, "the transcript was redrawn during the stream");
    report.dom.answerMarkup = await answerEntry(plan.answer).evaluate((li) => ({
      elements: [...li.querySelectorAll(".md *")].map((e) => e.tagName.toLowerCase()),
      text: li.querySelector(".md").textContent,
    }));
    if (plan.literal) {
      expect(report.dom.answerMarkup.text.includes(plan.literal), `"${plan.literal}" is not shown as text`);
      const foreign = report.dom.answerMarkup.elements.filter((t) => !["p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "a", "h4", "h5", "h6"].includes(t));
      expect(foreign.length === 0, `the answer made elements ${JSON.stringify(foreign)}`);
    }
    await shot("02-answer", true);
  });
  await run("filters", async () => {
    const row = page.locator(`#runs-body tr[data-run-id="${report.runId}"]`);
    await row.waitFor();
    const asked = [];
    const onRequest = (r) => {
      if (new URL(r.url()).pathname === "/v1/runs" && r.method() === "GET") asked.push(new URL(r.url()).search);
    };
    page.on("request", onRequest);
    const runs = page.locator("#runs");
    await runs.getByLabel("Status").selectOption("failed");
    await page.locator("#runs-empty").waitFor();
    expect(await row.count() === 0, "a succeeded run is listed under failed");
    await runs.getByLabel("Status").selectOption("succeeded");
    await row.waitFor();
    await runs.getByLabel("Agent").selectOption("claude");
    await page.waitForFunction(() => document.querySelector("#runs-body")?.children.length > 0);
    await row.waitFor();
    page.off("request", onRequest);
    report.dom.listQueries = asked;
    expect(asked.some((q) => q.includes("status=failed")) && asked.some((q) => q.includes("status=succeeded") && q.includes("agent=claude")),
      `list requests: ${JSON.stringify(asked)}`);
  });
}

// unlabeledControls are the visible controls that have no label.
function unlabeledControls() {
  return page.evaluate(() => {
    const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
    return [...document.querySelectorAll("input, select, textarea, button")]
      .filter((el) => visible(el) && !(el.labels?.length || el.getAttribute("aria-label") || (el.tagName === "BUTTON" && el.textContent.trim())))
      .map((el) => el.outerHTML.slice(0, 80));
  });
}

// goTo follows the page's navigation to one of its views.
async function goTo(name, hash) {
  await page.getByRole("navigation", { name: "Views" }).getByRole("link", { name, exact: true }).click();
  await page.waitForFunction((h) => location.hash === h, hash);
}

async function schedulesFlow() {
  const rowOf = (name) => page.locator("#schedules-body tr").filter({ has: page.getByRole("rowheader", { name, exact: true }) });
  const row = rowOf(plan.schedule);
  const d = (report.dom.schedule = { name: plan.schedule });
  await run("open", open);
  await run("list", async () => {
    await goTo("Schedules", "#/schedules");
    await row.waitFor();
    d.id = (await row.getAttribute("data-schedule-id")) ?? "";
    d.when = ((await row.locator("td").nth(0).textContent()) ?? "").trim();
    d.pausedAtFirst = (await row.getAttribute("data-paused")) === "true";
    expect(!d.pausedAtFirst, `the schedule "${plan.schedule}" is shown paused before the test paused it`);
    d.current = await page.locator('nav a[aria-current="page"]').textContent();
    expect(d.current === "Schedules", `the navigation marks "${d.current}" as the current page`);
    d.runsPageHidden = await page.locator("#runs-page").isHidden();
    expect(d.runsPageHidden, "the runs page is still shown beside the schedules");
    d.unlabeled = await unlabeledControls();
    expect(d.unlabeled.length === 0, `controls without a label on the schedules page: ${JSON.stringify(d.unlabeled)}`);
    await shot("01-schedules");
  });
  await run("fire now", async () => {
    await row.getByRole("button", { name: "Fire now", exact: true }).click();
    const link = row.locator(".fire-result a.run-link");
    await link.waitFor();
    d.fireOutcome = (await row.locator(".fire-result").getAttribute("data-outcome")) ?? "";
    expect(d.fireOutcome === "started", `Fire now showed the outcome "${d.fireOutcome}"`);
    const href = (d.runHref = (await link.getAttribute("href")) ?? "");
    report.runId = decodeURIComponent(href.slice("#/runs/".length));
    expect(href.startsWith("#/runs/") && report.runId !== "", `the fire's run link is "${href}"`);
    d.fireText = ((await row.locator(".fire-result").textContent()) ?? "").replace(/\s+/g, " ").trim();
    expect(/^Fired now: started run \S+$/.test(d.fireText), `the fire's result reads "${d.fireText}"`);
    // The list was refreshed after the fire: its last fires hold this one,
    // marked as fired by hand, with the same link.
    const listed = row.locator('.events li[data-outcome="started"]').filter({ has: page.locator(`a[href="${href}"]`) });
    await listed.waitFor();
    d.listedByHand = (await listed.locator(".tag", { hasText: "by hand" }).count()) > 0;
    expect(d.listedByHand, "the fire in the list is not marked as fired by hand");
    d.status = ((await page.locator("#schedules-status").textContent()) ?? "").trim();
    await shot("02-fired");
  });
  await run("pause", async () => {
    // By keyboard: the focus stays on the button, which now resumes.
    await row.getByRole("button", { name: "Pause", exact: true }).focus();
    await page.keyboard.press("Enter");
    await page.locator(`#schedules-body tr[data-schedule-id="${d.id}"][data-paused="true"]`).waitFor();
    await row.getByRole("button", { name: "Resume", exact: true }).waitFor();
    d.focusAfterPause = await page.evaluate(() => document.activeElement?.textContent ?? "");
    expect(d.focusAfterPause === "Resume", `the focus after Pause is on "${d.focusAfterPause}", not the Resume button`);
    d.stateAfterPause = ((await row.locator(".badge.state-paused").textContent()) ?? "").trim();
    d.nextAfterPause = ((await row.locator("td").nth(1).textContent()) ?? "").trim();
    expect(d.stateAfterPause === "paused" && d.nextAfterPause === "–",
      `after Pause the row shows state "${d.stateAfterPause}", next fire "${d.nextAfterPause}"`);
    const error = ((await page.locator("#schedules-error").textContent()) ?? "").trim();
    expect(error === "", `the schedules page shows an error: ${error}`);
    await shot("03-paused");
  });
  await run("triggers", async () => {
    await goTo("Triggers", "#/triggers");
    const t = (report.dom.triggers = {});
    if (plan.trigger) {
      await page.locator("#triggers-body tr").filter({ has: page.getByRole("rowheader", { name: plan.trigger, exact: true }) }).waitFor();
      t.listed = true;
    } else {
      const empty = page.locator("#triggers-empty");
      await empty.waitFor();
      t.empty = ((await empty.textContent()) ?? "").replace(/\s+/g, " ").trim();
      expect(t.empty.includes("agentgate trigger create") && t.empty.includes("POST /v1/triggers"),
        `the empty triggers page does not say how to create one: ${t.empty}`);
    }
    await shot("04-triggers");
  });
  await run("run link", async () => {
    await goTo("Schedules", "#/schedules");
    // The fire result is gone with the page it was on; the last fires
    // still link the run.
    const link = row.locator(`.events a.run-link[href="${d.runHref}"]`).first();
    await link.click();
    await page.waitForFunction(() => location.hash.startsWith("#/runs/"));
    await page.locator("#run-title", { hasText: report.runId }).waitFor();
    d.openedRun = decodeURIComponent((await page.evaluate(() => location.hash)).slice("#/runs/".length));
    expect(d.openedRun === report.runId, `the schedule's newest run link opened ${d.openedRun}, not the fired run ${report.runId}`);
    await shot("05-run");
  });
}

// collect reads from the page what the screenshots show.
async function collect() {
  report.dom = {
    ...report.dom,
    ...(await page.evaluate((runId) => {
      const text = (el) => (el?.textContent ?? "").trim();
      const all = (sel, root = document) => [...root.querySelectorAll(sel)];
      const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
      const diffAdd = all(".diff-line.diff-add");
      const ctxLine = document.querySelector(".diff-line.diff-header");
      const row = document.querySelector(`#runs-body tr[data-run-id="${CSS.escape(runId)}"]`);
      return {
        title: text(document.querySelector("#run-title")),
        runStatus: document.querySelector("#run-status")?.dataset.status ?? "",
        streamState: document.querySelector("#stream-status")?.dataset.state ?? "",
        reconnects: Number(document.querySelector("#stream-status")?.dataset.reconnects ?? 0),
        costUSD: Number(document.querySelector("#usage-cost")?.dataset.usd ?? 0),
        costText: text(document.querySelector("#usage-cost")),
        inputTokens: Number(text(document.querySelector("#usage-input")).replace(/,/g, "")),
        outputTokens: Number(text(document.querySelector("#usage-output")).replace(/,/g, "")),
        userMessages: all("#transcript li.entry.user .plain").map(text),
        messages: all("#transcript li.entry.assistant").map((li) => ({
          text: text(li.querySelector(".md")),
          busy: li.getAttribute("aria-busy"),
          strong: all(".md strong", li).map(text),
          code: all(".md code", li).map(text),
        })),
        reasoning: all("#transcript li.reasoning").map((li) => ({ summary: text(li.querySelector("summary")), open: li.querySelector("details").open })),
        toolCalls: all("#transcript li.tool-call").map((li) => ({
          name: text(li.querySelector(".tool-name")),
          status: li.dataset.status,
          input: text(li.querySelector(".tool-input")),
          output: text(li.querySelector(".tool-output")),
        })),
        approvals: all("#transcript li.approval").map((li) => ({
          state: li.dataset.state,
          decision: li.dataset.decision ?? "",
          result: text(li.querySelector(".approval-result")),
          buttons: all("button", li).length,
        })),
        diffAdded: diffAdd.map((el) => el.textContent.replace(/\n$/, "")),
        // The added line is coloured unlike a header line.
        diffAddColoured: diffAdd.length > 0 && !!ctxLine &&
          getComputedStyle(diffAdd[0]).backgroundColor !== getComputedStyle(ctxLine).backgroundColor,
        files: all("#files a").map((a) => ({ text: text(a), href: a.getAttribute("href"), download: a.getAttribute("download") })),
        listStatus: row ? text(row.querySelector(".badge")) : "",
        listPrompt: row ? text(row.querySelector(".run-prompt")) : "",
        listPromptTitle: row?.querySelector(".run-prompt")?.title ?? "",
        streamRegion: {
          role: document.querySelector("#transcript")?.getAttribute("role") ?? "",
          live: document.querySelector("#transcript")?.getAttribute("aria-live") ?? "",
          statusLive: document.querySelector("#stream-status")?.getAttribute("aria-live") ?? "",
        },
        unlabeled: all("input, select, textarea, button")
          .filter((el) => visible(el) && !(el.labels?.length || el.getAttribute("aria-label") || (el.tagName === "BUTTON" && text(el))))
          .map((el) => el.outerHTML.slice(0, 80)),
      };
    }, report.runId)),
  };
  report.cspViolations = await page.evaluate(() => window.__violations ?? []);
}

// check holds what the page showed to the plan.
function check() {
  if (plan.flow !== "schedules") checkRun();
  const d = report.dom;
  expect(report.runId !== "", "no run id");
  expect(d.unlabeled.length === 0, `controls without a label: ${JSON.stringify(d.unlabeled)}`);
  expect(report.pageErrors.length === 0, `page errors: ${JSON.stringify(report.pageErrors)}`);
  expect(report.cspViolations.length === 0, `policy violations: ${JSON.stringify(report.cspViolations)}`);
  const refused = report.consoleErrors.filter((m) => /Content Security Policy|Trusted Type|Refused to/i.test(m));
  expect(refused.length === 0, `the browser refused: ${JSON.stringify(refused)}`);
}

// checkRun holds what the page showed of the run it drove to the plan.
function checkRun() {
  const d = report.dom;
  expect(d.runStatus === "succeeded", `run status on the page: ${d.runStatus}`);
  expect(d.streamState === "ended", `stream state: ${d.streamState}`);
  expect(d.listStatus === "succeeded", `the runs list shows the run as "${d.listStatus}"`);
  const answer = d.messages.find((m) => m.text.includes(plan.answer));
  expect(answer, `no message with "${plan.answer}": ${JSON.stringify(d.messages)}`);
  if (plan.strong) expect(answer?.strong.includes(plan.strong), `the answer shows no bold "${plan.strong}": ${JSON.stringify(answer)}`);
  expect(d.messages.every((m) => m.busy === "false"), "a message still marked busy");
  expect(d.userMessages.some((t) => t === plan.prompt), `the prompt is not shown: ${JSON.stringify(d.userMessages)}`);
  expect(d.costUSD > 0 || d.inputTokens > 0, `neither cost (${d.costUSD}) nor usage (${d.inputTokens}) shown`);
  expect(d.streamRegion.role === "log" && d.streamRegion.live === "polite" && d.streamRegion.statusLive === "polite",
    `live regions: ${JSON.stringify(d.streamRegion)}`);
  if (plan.flow === "interactive") {
    const call = d.toolCalls.find((c) => c.input.includes(plan.tool.command));
    expect(call?.name === plan.tool.name && call?.status === "ok", `tool call: ${JSON.stringify(d.toolCalls)}`);
    expect(d.approvals.length === 1 && d.approvals[0].state === "resolved" && d.approvals[0].decision === "allow" && d.approvals[0].buttons === 0,
      `approvals: ${JSON.stringify(d.approvals)}`);
    expect(d.messages.some((m) => m.text.includes(plan.followUpAnswer)), `no answer to the follow-up: ${JSON.stringify(d.messages)}`);
    expect(d.userMessages.some((t) => t === plan.followUp), `the follow-up is not shown: ${JSON.stringify(d.userMessages)}`);
    expect(d.diffAdded.includes(plan.addedLine), `added lines: ${JSON.stringify(d.diffAdded)}`);
    expect(d.diffAddColoured, "the added line is not coloured");
    expect(d.files.some((f) => f.text === plan.file.path), `files: ${JSON.stringify(d.files)}`);
    expect(d.reasoning.length > 0 && d.reasoning.every((r) => !r.open), `reasoning: ${JSON.stringify(d.reasoning)}`);
    if (plan.expectReconnect) expect(d.reconnects >= 1, `reconnects: ${d.reconnects}`);
  }
}

let code = 1;
try {
  if (plan.flow === "oneshot") await oneshotFlow();
  else if (plan.flow === "schedules") await schedulesFlow();
  else await interactiveFlow();
  await collect();
  check();
  code = report.failures.length === 0 ? 0 : 1;
} catch (err) {
  report.failures.push(`step ${step}: ${err?.message ?? err}`);
  try {
    await shot("failure-" + step, true);
    await collect();
  } catch {
    // the page is gone
  }
} finally {
  writeReport();
  await ctx.close().catch(() => {});
  clearTimeout(guard);
}
console.log(JSON.stringify({ ok: report.ok, failures: report.failures, screenshots: report.screenshots }));
process.exit(code);
