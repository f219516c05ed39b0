// The run viewer: sign-in, workflows and runs, one run's page (live or replayed). Routes on location.

import { apiKey, signIn, signOut, data, call, query, runOrigin, download, ApiError } from "./api.js";
import { originLine, forksPanel, forkFrom, rerun, forkNote } from "./forks.js";
import { h, badge } from "./dom.js";
import { emptyRun, applyMessage, applyResult } from "./model.js";
import { RunView } from "./view.js";
import { webhooksPanel } from "./webhooks.js";
import { StreamFollower } from "./follow.js";
import { Player, SPEEDS, eventTimes } from "./replay.js";

const main = document.getElementById("main");
const banner = document.getElementById("banner");
const STATUSES = ["CREATED", "RUNNING", "WAITING", "SUCCESS", "FAILED"];
let leave = () => {};

function say(text, kind = "info") {
  banner.hidden = !text;
  banner.textContent = text || "";
  banner.dataset.kind = kind;
}

/** Go to a /ui/ path without reloading. */
export function navigate(path) {
  history.pushState(null, "", path);
  route();
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-route]");
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(link.getAttribute("href"));
});
window.addEventListener("popstate", () => route());
document.getElementById("sign-out").addEventListener("click", () => { signOut(); route(); });

function route() {
  leave();
  leave = () => {};
  say("");
  document.getElementById("sign-out").hidden = !apiKey();
  if (!apiKey()) return showSignIn();
  const found = location.pathname.match(/^\/ui\/runs\/([^/]+)\/?$/);
  if (found) return showRun(decodeURIComponent(found[1]));
  return showHome();
}

function showSignIn() {
  document.title = "Sign in · flowtrail";
  const input = h("input", { type: "password", id: "api-key", name: "api-key", autocomplete: "off", required: true });
  const note = h("p", { role: "alert", class: "error-text" });
  const form = h("form", { class: "panel sign-in", onsubmit: async (event) => {
    event.preventDefault();
    signIn(input.value.trim());
    try {
      await data("/workflows");
      route();
    } catch (error) {
      signOut();
      note.textContent = error instanceof ApiError && error.status === 401 ? "That key is not known." : error.message;
    }
  } }, h("h1", {}, "Sign in"), h("label", { for: "api-key" }, "API key"), input,
    h("p", { class: "muted" }, "Kept in this tab's session storage only."), h("button", { type: "submit" }, "Sign in"), note);
  main.replaceChildren(form);
  input.focus();
}

async function showHome() {
  document.title = "Runs · flowtrail";
  const workflows = h("ul", { class: "workflows" });
  const picker = h("select", { id: "filter-workflow", name: "workflow" }, h("option", { value: "" }, "All workflows"));
  const boxes = STATUSES.map((s) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "status", value: s }), ` ${s}`));
  const rows = h("tbody");
  const waitingRows = h("tbody");
  const waiting = h("section", { class: "panel waiting", hidden: true }, h("h1", {}, "Waiting for an answer"),
    h("div", { class: "table-wrap" }, h("table", { class: "waiting-runs" },
      h("thead", {}, h("tr", {}, ...["Run", "Workflow", "Waiting since", "Events"].map((t) => h("th", { scope: "col" }, t)))),
      waitingRows)));
  const pager = h("div", { class: "pager" });
  const cursors = [null];
  const loadWaiting = async () => { // runs that wait for a person come first, whatever the page below shows
    const answer = await data("/runs" + query({ status: ["WAITING"], workflow: picker.value, limit: 50 }));
    waitingRows.replaceChildren(...answer.items.map(waitingRow));
    waiting.hidden = !answer.items.length;
  };
  const load = async (page) => {
    if (page === 0) await loadWaiting();
    const statuses = boxes.map((b) => b.firstChild).filter((b) => b.checked).map((b) => b.value);
    const answer = await data("/runs" + query({ status: statuses, workflow: picker.value, limit: 20, cursor: cursors[page] }));
    rows.replaceChildren(...answer.items.map(runRow));
    if (!answer.items.length) rows.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No runs.")));
    cursors[page + 1] = answer.nextCursor;
    pager.replaceChildren(
      h("button", { type: "button", disabled: page === 0, onclick: () => load(page - 1) }, "Newer"),
      h("span", { class: "muted" }, ` page ${page + 1} `),
      h("button", { type: "button", disabled: !answer.nextCursor, onclick: () => load(page + 1) }, "Older"));
  };
  const filters = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); cursors.length = 1; load(0); } },
    h("fieldset", {}, h("legend", {}, "Status"), ...boxes),
    h("label", { for: "filter-workflow" }, "Workflow"), picker, h("button", { type: "submit" }, "Apply"));
  main.replaceChildren(
    waiting,
    h("section", { class: "panel" }, h("h1", {}, "Workflows"), workflows),
    h("section", { class: "panel" }, h("h1", {}, "Recent runs"), filters,
      h("div", { class: "table-wrap" }, h("table", { class: "runs" },
        h("thead", {}, h("tr", {}, ...["Run", "Workflow", "Status", "Created", "Tokens", "Events"].map((t) => h("th", { scope: "col" }, t)))),
        rows)), pager));
  try {
    for (const w of await data("/workflows")) {
      workflows.append(h("li", {}, h("strong", {}, w.displayName || w.workflowName), h("code", {}, ` ${w.workflowName}`),
        h("span", { class: "muted" }, ` v${w.version}`), w.description ? h("p", {}, w.description) : null));
      picker.append(h("option", { value: w.workflowName }, w.workflowName));
    }
    await load(0);
  } catch (error) {
    say(error.message, "error");
  }
}

function runLink(item) {
  return h("a", { href: `/ui/runs/${item.runId}`, "data-route": true }, h("code", {}, item.runId.slice(0, 12)));
}

function waitingRow(item) {
  return h("tr", { dataset: { runId: item.runId } }, h("td", {}, runLink(item)), h("td", {}, item.workflowName),
    h("td", {}, h("time", { datetime: item.waitingSince }, new Date(item.waitingSince).toLocaleString())),
    h("td", {}, String(item.lastEventId)));
}

function runRow(item) {
  const note = item.waitingForAnswer ? "waiting for an answer" : item.errorCode;
  return h("tr", { dataset: { runId: item.runId } },
    h("td", {}, runLink(item), forkNote(item)),
    h("td", {}, item.workflowName), h("td", {}, badge(item.status), item.erasedAt ? erasedBadge(item.erasedAt) : null,
      note ? h("span", { class: "muted" }, ` ${note}`) : null),
    h("td", {}, h("time", { datetime: item.createdAt }, new Date(item.createdAt).toLocaleString())),
    h("td", { class: "tokens", title: "prompt / completion tokens (model calls and gateway runs)" },
      `${item.promptTokens} / ${item.completionTokens}`),
    h("td", {}, String(item.lastEventId)));
}

function erasedBadge(erasedAt) {
  const mark = badge("ERASED");
  mark.title = `erased ${new Date(erasedAt).toLocaleString()}`;
  return mark;
}

async function showRun(runId) {
  document.title = `Run ${runId.slice(0, 8)} · flowtrail`;
  const root = h("div", { id: "run", class: "run", dataset: { runId, mode: "live" } });
  main.replaceChildren(root);
  let workflowName, workflowVersion, fork;
  try {
    ({ workflowName, workflowVersion, fork } = await runOrigin(runId));
  } catch (error) {
    root.append(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  const runPath = `/workflows/${encodeURIComponent(workflowName)}/runs/${encodeURIComponent(runId)}`;
  const copiedUpTo = fork ? fork.copiedUpTo : 0;
  const received = [];
  let run = emptyRun(runId, copiedUpTo);
  let dirty = new Set(["run"]);
  let frame = 0;
  const replayBar = h("section", { class: "panel replay", "aria-label": "Replay", hidden: true });
  const replayButton = h("button", { type: "button", disabled: true, onclick: () => startReplay() }, "Replay");
  const command = (action, passes) => async () => {
    try {
      await call(`${runPath}/${action}`, { method: "POST" });
    } catch (error) {
      if (!(error instanceof ApiError && passes.includes(error.code))) say(error.message, "error");
    }
  };
  const startButton = h("button", { type: "button", disabled: true, onclick: command("start", ["RUN_ALREADY_STARTED"]) }, "Start");
  const cancelButton = h("button", { type: "button", disabled: true, onclick: command("cancel", []) }, "Cancel");
  const openNew = (make) => async () => {
    try {
      navigate(`/ui/runs/${await make()}`);
    } catch (error) {
      say(error.message, "error");
    }
  };
  const rerunButton = h("button", { type: "button", disabled: true, onclick: openNew(() => rerun(runPath)) }, "Re-run");
  const forks = forksPanel(runPath);
  root.append(h("header", { class: "run-head" }, h("h1", {}, workflowName, " ", h("code", { class: "muted" }, runId)),
    h("a", { href: "/ui/", "data-route": true }, "All runs"), startButton, cancelButton, rerunButton, replayButton),
  ...(fork ? [originLine(fork)] : []), forks, replayBar);
  forks.load().catch(() => {});
  const view = new RunView(root, {
    onAnswer: async (clarifyId, answer) => {
      try {
        await call(`/runs/${encodeURIComponent(runId)}/resume`, { method: "POST",
          headers: { "Content-Type": "application/json" }, body: JSON.stringify({ clarifyId, answer }) });
      } catch (error) {
        if (!(error instanceof ApiError && error.code === "CLARIFY_ALREADY_ANSWERED")) throw error;
      }
    },
    onDownload: () => download(`${runPath}/workspace`, `${runId}-workspace.zip`).catch((e) => say(e.message, "error")),
    onFork: (visitUuid) => openNew(() => forkFrom(runPath, visitUuid))(),
  });
  const hooks = webhooksPanel(runPath); // the delivery log, below the run it tells about
  root.append(hooks);
  hooks.load().catch(() => {}); // kept current from the run's first pause or its end, when deliveries begin
  let hooksWatched = false;
  data(`/workflows/${encodeURIComponent(workflowName)}/graph`).then((graph) => {
    view.graph.setGraph(graph, workflowVersion);
    repaint();
  }).catch(() => {}); // no graph for a workflow gone from the catalogue: the cards say what happened
  data(`/workflows/${encodeURIComponent(workflowName)}`).then((workflow) => { // declared output types: files are links
    view.outputTypes = Object.fromEntries(workflow.outputs.map((o) => [o.name, o.type]));
    repaint();
  }).catch(() => {}); // a workflow gone from the catalogue: its outputs are shown without their declared types
  // The timeline: a finished run's is read once; a live run's again after something changed, at most every
  // 2 s (or four times as long as the last read took), never two reads at once, and once more at its end.
  const timeline = { timer: 0, busy: false, done: false, again: false, gap: 2000 };
  const readTimeline = async () => {
    Object.assign(timeline, { timer: 0, busy: true, again: false });
    const started = performance.now();
    try {
      const answer = await data(`/runs/${encodeURIComponent(runId)}/timeline`);
      timeline.done = timeline.done || Boolean(answer.completedAt);
      view.showTimeline(answer);
    } catch (error) {
      timeline.done = true;
      say(error.message, "error");
    }
    timeline.gap = Math.max(2000, 4 * (performance.now() - started));
    timeline.busy = false;
    if (timeline.again) wantTimeline(timeline.again === "soon");
  };
  const wantTimeline = (soon) => {
    if (timeline.done) return;
    if (timeline.busy) { timeline.again = soon ? "soon" : timeline.again || "later"; return; }
    if (timeline.timer && !soon) return;
    clearTimeout(timeline.timer);
    timeline.timer = setTimeout(readTimeline, soon ? 0 : timeline.gap);
  };
  readTimeline();
  let replayState = null;
  let resultRead = false;
  const readResult = async () => { // usage and remote work are not in the stream: read them once the run ended
    resultRead = true;
    try {
      applyResult(run, await data(runPath));
      repaint();
    } catch (error) {
      say(error.message, "error");
    }
  };
  const paint = () => {
    frame = 0;
    if (run.terminal && !resultRead && root.dataset.mode !== "replay") readResult();
    if ((run.pause || run.terminal) && !hooksWatched) { hooksWatched = true; hooks.watch(); }
    if (root.dataset.mode !== "replay" && [...dirty].some((key) => key !== "run")) wantTimeline(run.terminal);
    else if (run.terminal && root.dataset.mode !== "replay") wantTimeline(true);
    view.update(run, dirty);
    dirty = new Set();
    if (replayState) { // said with the paint that shows it, never before
      Object.assign(root.dataset, { replayAt: replayState.at, replayDone: replayState.done, replayPlaying: replayState.playing });
    }
    replayButton.disabled = !run.terminal || root.dataset.mode === "replay";
    startButton.disabled = run.status !== "CREATED" || root.dataset.mode === "replay";
    cancelButton.disabled = run.terminal || root.dataset.mode === "replay";
    rerunButton.disabled = !run.terminal || run.status !== "FAILED" || root.dataset.mode === "replay";
  };
  const schedule = () => { if (!frame) frame = requestAnimationFrame(paint); };
  const repaint = () => { dirty.add("run"); schedule(); };
  const apply = (messages) => {
    const wasErased = run.erased;
    for (const message of messages) {
      const changed = applyMessage(run, message);
      if (changed) dirty.add(changed);
    }
    if (run.erased && !wasErased) whenErased();
    schedule();
  };
  const whenErased = () => data(runPath).then((result) => { // the stream says that it was erased, the run says when
    run.erasedAt = result.erasedAt;
    root.dataset.erased = "true";
    repaint();
  }).catch((error) => say(error.message, "error"));

  const follower = new StreamFollower({
    workflowName, runId,
    onMessages: (messages) => { received.push(...messages); apply(messages); },
    onState: (state) => {
      root.dataset.stream = state.state;
      if (state.state === "reconnecting") say(`Connection lost: reconnecting in ${state.seconds} s (attempt ${state.attempt} of ${state.of}), from event ${state.lastId}.`, "warn");
      else if (state.state === "polling") say(`Connection lost: checking the run every ${state.seconds} s.`, "warn");
      else if (state.state === "failed") say(state.message, "error");
      else say("");
    },
    onResult: (result) => { // while the stream is away, the status comes from the polled result
      if (!run.terminal) run.status = result.status;
      applyResult(run, result);
      repaint();
    },
  });
  let player = null;
  follower.start();
  schedule(); // the header's buttons are right before the first message arrives (a created run sends none)
  leave = () => { follower.stop(); if (player) player.stop(); if (frame) cancelAnimationFrame(frame); clearTimeout(timeline.timer); timeline.done = true; };

  async function startReplay() {
    root.dataset.mode = "replay";
    view.answerable = false;
    replayButton.disabled = true;
    const times = await eventTimes(runId).catch(() => new Map());
    const last = received.length ? received.at(-1).id : 0;
    const scrubber = h("input", { type: "range", id: "scrubber", min: 0, max: received.length, step: 1, value: 0 });
    const position = h("output", { for: "scrubber", id: "replay-position" }, "0");
    const jump = h("input", { type: "number", id: "jump-id", min: 0, max: last, inputmode: "numeric" });
    const playButtons = Object.keys(SPEEDS).map((name) =>
      h("button", { type: "button", dataset: { speed: name }, onclick: () => player.play(SPEEDS[name]) }, `Play ${name}`));
    const pauseButton = h("button", { type: "button", onclick: () => player.stop() }, "Pause");
    player = new Player(received, times, {
      onSeek: (messages) => { run = emptyRun(runId, copiedUpTo); view.reset(); dirty = new Set(["run"]); apply(messages); },
      onStep: apply,
      onState: (state) => {
        replayState = state;
        schedule();
        scrubber.value = String(state.shown); // messages, as the event log counts them; ids skip unstreamed events
        position.textContent = `message ${state.shown} of ${state.count} · event id ${state.at} of ${state.last}`;
      },
    });
    scrubber.addEventListener("input", () => player.seekCount(Number(scrubber.value)));
    replayBar.replaceChildren(h("h2", {}, "Replay from the log"), h("div", { class: "replay-controls" }, ...playButtons, pauseButton),
      h("label", { for: "scrubber" }, "Position in the log"), scrubber, position,
      h("form", { class: "jump", onsubmit: (e) => { e.preventDefault(); player.seek(Number(jump.value || 0)); } },
        h("label", { for: "jump-id" }, "Jump to event id"), jump, h("button", { type: "submit" }, "Jump")),
      h("button", { type: "button", onclick: () => { leave(); route(); } }, "Back to live"));
    replayBar.hidden = false;
    player.seek(0);
    playButtons[0].focus();
  }
}

route();
