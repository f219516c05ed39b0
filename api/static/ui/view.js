// The run page's panels, built from the folded run (model.js): the same code for live and replay.

import { h, badge, pretty } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { visitsInOrder } from "./model.js";
import { fileLink, outputFields } from "./output.js";
import { GraphView } from "./graph.js";
import { TimelineView, visitFacts } from "./timeline.js";

const SHOWN = 30;
const MORE = 200;
// A card shows its last SHOWN thinking turns and tool calls; each "Show earlier" adds MORE.

/** The run page: call `update(run, changed)` after applying messages, `reset()` before a rebuild. */
export class RunView {
  constructor(root, { onAnswer, onDownload, onFork = null }) {
    this.root = root;
    Object.assign(this, { onAnswer, onDownload, onFork, answerable: true, outputTypes: {} });
    this.cards = new Map();
    this.visits = h("div", { class: "visits", "aria-label": "Visits" });
    this.askfor = h("section", { class: "panel askfor", "aria-label": "Question", hidden: true });
    this.todo = h("section", { class: "panel todo", "aria-label": "TODO list" });
    this.decisions = h("section", { class: "panel decisions", "aria-label": "Planner decisions" });
    this.outcome = h("section", { class: "panel outcome", "aria-label": "Output" });
    this.events = h("ol", { class: "event-log", id: "event-log" });
    this.eventCount = h("span", {}, "0");
    this.graph = new GraphView({ onPick: (nodeId) => this.revealNode(nodeId) });
    this.timeline = new TimelineView({ onPick: (visitUuid) => this.reveal(visitUuid) });
    this.timings = new Map();
    root.append(this.askfor, h("div", { class: "overview" }, this.graph.element, this.timeline.element), h("div", { class: "layout" }, this.visits, h("aside", { class: "side" },
      this.outcome, this.todo, this.decisions,
      h("details", { class: "panel" }, h("summary", {}, "Event log (", this.eventCount, ")"),
        h("p", { class: "muted" }, "Ids are the run's event positions; events the stream does not carry (the run's creation and start, model calls, answers) leave gaps."), this.events),
    )));
  }

  /** Forget everything shown (a replay jumps). */
  reset() {
    this.cards.clear();
    this.visits.replaceChildren();
    this.events.replaceChildren();
    this.shownPause = undefined;
    this.shownOutcome = undefined;
  }

  /** Show what changed: the visits in `changed` (a Set of visitUuids and "run"), the event log, the panels. */
  update(run, changed) {
    this.run = run; // before the cards: a card's body links files by the run it shows
    for (const key of changed) if (key !== "run" && run.visits.has(key)) this.card(run.visits.get(key));
    const inOrder = visitsInOrder(run);
    this.order(inOrder);
    this.graph.update(run, inOrder);
    this.eventLog(run);
    this.showPause(run);
    this.showTodo(run);
    this.showDecisions(run);
    this.showOutcome(run);
    Object.assign(this.root.dataset, { status: run.status, lastEventId: run.lastId, terminal: run.terminal });
  }

  /** Show a `GET /runs/{runId}/timeline` answer: the timeline panel, and each card's duration and tokens. */
  showTimeline(timeline) {
    this.timeline.show(timeline);
    for (const visit of timeline.visits) {
      this.timings.set(visit.visitUuid, visit);
      const card = this.cards.get(visit.visitUuid);
      if (card) card.timing.textContent = timingText(visit);
    }
  }

  /** Open a node's latest visit card and bring it into view; its other visits' cards are marked too. */
  revealNode(nodeId) {
    const visits = visitsInOrder(this.run).filter((v) => v.nodeId === nodeId);
    for (const card of this.cards.values()) card.element.classList.toggle("picked", card.visit.nodeId === nodeId);
    if (visits.length) this.open(this.cards.get(visits.at(-1).visitUuid));
  }

  /** Open one visit's card and bring it into view. */
  reveal(visitUuid) {
    for (const card of this.cards.values()) card.element.classList.toggle("picked", card.visit.visitUuid === visitUuid);
    if (this.cards.has(visitUuid)) this.open(this.cards.get(visitUuid));
  }

  open(card) {
    card.details.open = true;
    if (card.stale) this.fillBody(card);
    card.element.scrollIntoView({ block: "start" });
    card.summary.focus({ preventScroll: true });
  }

  order(inOrder) {
    const wanted = inOrder.map((v) => this.cards.get(v.visitUuid).element);
    const current = [...this.visits.children];
    if (wanted.length !== current.length || wanted.some((el, i) => el !== current[i])) this.visits.replaceChildren(...wanted);
  }

  /** How outputs link their files: the run's workspace files, each a link that downloads the workspace. */
  fieldsOptions(run, types = {}) {
    return { types, files: run.files, onFile: run.erased ? null : () => this.onDownload() };
  }

  card(visit) {
    let card = this.cards.get(visit.visitUuid);
    if (!card) {
      const summary = h("summary");
      const body = h("div", { class: "visit-body" });
      const details = h("details", { open: true }, summary, body);
      card = { element: h("article", { class: "visit" }, details), details, summary, body, status: "RUNNING",
        toggled: new Map(), timing: h("span", { class: "visit-timing muted" }), stale: true, turns: new Map(),
        shown: { thinking: SHOWN, tools: SHOWN } };
      details.addEventListener("toggle", () => { if (details.open && card.stale) this.fillBody(card); });
      if (this.timings.has(visit.visitUuid)) card.timing.textContent = timingText(this.timings.get(visit.visitUuid));
      body.addEventListener("click", (event) => { // what the reader opened or closed stays so across repaints
        const inner = event.target.closest("summary")?.parentElement;
        if (!inner || !inner.dataset.key) return;
        card.toggled.set(inner.dataset.key, !inner.open);
        if (inner.dataset.key === "steps" && !inner.open) inner.append(stepList(card.visit));
      });
      this.cards.set(visit.visitUuid, card);
    }
    if (card.status === "RUNNING" && visit.status !== "RUNNING") card.details.open = false; // collapse on completion
    card.status = visit.status;
    card.visit = visit;
    Object.assign(card.element.dataset, {
      visitUuid: visit.visitUuid, nodeId: visit.nodeId, status: visit.status, sortOrder: visit.sortOrder ?? "",
      copied: Boolean(visit.copied),
    });
    card.summary.replaceChildren(...[
      h("span", { class: "visit-label" }, visit.nodeLabel),
      h("span", { class: "muted" }, ` ${visit.nodeType}${visit.iterSeq ? ` · visit ${visit.iterSeq}` : ""}`),
      badge(visit.status), visit.copied ? h("span", { class: "badge badge-copied", title: "copied from the source run" }, "copied") : null,
      card.timing,
    ].filter(Boolean));
    card.stale = true; // a closed card's body is built when it is opened (a long run has thousands of entries)
    if (card.details.open) this.fillBody(card);
  }

  fillBody(card) {
    card.stale = false;
    const more = (kind) => () => { card.shown[kind] += MORE; this.fillBody(card); };
    card.body.replaceChildren(...visitBody(card, this.fieldsOptions(this.run), more), ...this.forkButton(card.visit));
  }

  /** "Fork from here" on a finished visit's card (live pages only). */
  forkButton(visit) {
    if (!this.onFork || !this.answerable || visit.status === "RUNNING") return [];
    return [h("button", { type: "button", class: "fork-here", onclick: () => this.onFork(visit.visitUuid) }, "Fork from here")];
  }

  eventLog(run) {
    this.eventCount.textContent = `${run.log.length} messages · last event id ${run.lastId}`;
    const shown = this.events.children.length;
    if (shown === run.log.length) return;
    const items = run.log.slice(shown).map((e) => h("li", { dataset: { eventId: e.id } },
      h("span", { class: "event-id" }, String(e.id)), ` ${e.event}${e.kind ? ` ${e.kind}` : ""}${e.nodeId ? ` · ${e.nodeId}` : ""}`));
    this.events.append(...items);
  }

  showPause(run) {
    const pause = run.pause;
    if (this.shownPause === (pause && pause.clarifyId)) return;
    this.shownPause = pause && pause.clarifyId;
    this.askfor.hidden = !pause;
    if (!pause) return this.askfor.replaceChildren();
    const choices = pause.choices.map((choice, i) => h("label", { class: "choice" },
      h("input", { type: "radio", name: "answer-choice", value: choice, checked: i === 0 }), ` ${choice}`));
    const free = h("input", { type: "text", id: "answer-text", name: "answer-text", autocomplete: "off" });
    const note = h("p", { class: "muted", role: "status" });
    const submit = h("button", { type: "submit", disabled: !this.answerable }, "Send answer");
    const form = h("form", { class: "askfor-form", onsubmit: async (event) => {
      event.preventDefault();
      const picked = form.querySelector("input[name=answer-choice]:checked");
      const answer = free.value.trim() || (picked ? picked.value : "");
      if (!answer) { note.textContent = "Pick a choice or write an answer."; return; }
      submit.disabled = true;
      note.textContent = "Sending…";
      try {
        await this.onAnswer(pause.clarifyId, answer);
        note.textContent = "Answer sent; the run goes on.";
      } catch (error) {
        note.textContent = `Not sent: ${error.message}`;
        submit.disabled = false;
      }
    } },
      h("fieldset", {}, h("legend", {}, pause.question), ...choices),
      h("label", { for: "answer-text" }, "Or your own answer"), free, submit, note);
    this.askfor.replaceChildren(h("h2", {}, "The run asks"), form);
  }

  showTodo(run) {
    const todo = run.todo;
    this.todo.hidden = !todo;
    if (todo) this.todo.replaceChildren(h("h2", {}, `TODO · ${todo.nodeLabel}`), todoList(todo.items));
  }

  showDecisions(run) {
    this.decisions.hidden = !run.decisions.length;
    if (this.decisions.childElementCount === run.decisions.length + 1) return;
    this.decisions.replaceChildren(h("h2", {}, "Planner decisions"), h("ol", {}, ...run.decisions.map((d) =>
      h("li", { dataset: { eventId: d.id } }, h("strong", {}, d.nextNodeId ?? "finish"),
        d.fromNodeId ? ` after ${d.fromNodeId}` : "", h("p", {}, d.reason)))));
  }

  showOutcome(run) {
    const shown = [run.status, run.errorCode, run.erased, run.erasedAt, run.error, run.remoteWorkMayBeRunning, run.usage,
      run.output, run.files, run.terminal, this.outputTypes];
    if (this.shownOutcome && shown.every((value, i) => value === this.shownOutcome[i])) return;
    this.shownOutcome = shown;
    const parts = [h("h2", {}, "Run "), badge(run.status)];
    if (run.errorCode) parts.push(h("code", { class: "error-code" }, ` ${run.errorCode}`));
    if (run.erased) {
      parts[0].append(badge("ERASED"));
      parts.push(h("p", { class: "erased-note" }, "This run's content was erased",
        run.erasedAt ? ` on ${new Date(run.erasedAt).toLocaleString()}` : "",
        ": what it was given and produced is gone; its steps, times and hash chain remain."));
    }
    if (run.error) parts.push(h("pre", { class: "error" }, run.error));
    if (run.remoteWorkMayBeRunning) {
      parts.push(h("p", { class: "remote-warning", role: "alert" },
        "Remote work may still be running: a Hermes gateway did not confirm a stop, or a gateway run's outcome is unknown."));
    }
    if (run.usage) parts.push(usageLine(run.usage));
    if (run.output) parts.push(h("h3", {}, "Output"), outputFields(run.output, this.fieldsOptions(run, this.outputTypes)));
    if (run.terminal && run.status === "SUCCESS" && !run.erased) {
      if (run.files.length) {
        const onFile = () => this.onDownload();
        parts.push(h("h3", {}, "Workspace files"), h("ul", { class: "files" }, ...run.files.map((f) => h("li", {}, fileLink(f, { onFile })))));
      }
      parts.push(h("button", { type: "button", class: "download", onclick: () => this.onDownload() }, "Download workspace (zip)"));
    }
    this.outcome.replaceChildren(...parts);
  }
}

function timingText(visit) {
  return ` ${visitFacts(visit).join(" · ")}`;
}

function usageLine(usage) {
  const dataset = { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens };
  return h("p", { class: "usage muted", dataset },
    `Tokens (model calls and gateway runs): ${usage.promptTokens} prompt · ${usage.completionTokens} completion`);
}

/** The last `shown` of `items` (each made by `make(item, index)`), after a button that shows `MORE` earlier ones. */
function latest(items, shown, noun, make, more) {
  const from = Math.max(0, items.length - shown);
  const earlier = from ? [h("button", { type: "button", class: "show-earlier", onclick: more },
    `Show ${Math.min(from, MORE)} earlier ${noun} (${from} not shown)`)] : [];
  return [...earlier, ...items.slice(from).map((item, i) => make(item, from + i))];
}

function visitBody(card, fields, more) {
  const { visit, toggled } = card;
  const opened = (key, byDefault) => (toggled.has(key) ? toggled.get(key) : byDefault);
  const parts = [];
  if (visit.statusText) parts.push(h("p", { class: "status-text", role: "status" }, visit.statusText));
  if (visit.thinking.length) {
    parts.push(h("h3", {}, "Thinking"), ...latest(visit.thinking, card.shown.thinking, "turns",
      (text, i) => thinkingTurn(card.turns, text, i), more("thinking")));
  }
  if (visit.todo) parts.push(h("h3", {}, "TODO"), todoList(visit.todo));
  if (visit.tools.length) {
    parts.push(h("h3", {}, "Tool calls"), ...latest(visit.tools, card.shown.tools, "tool calls",
      (call, i) => toolCard(call, opened(`tool-${i}`, call.open), `tool-${i}`), more("tools")));
  }
  if (visit.steps.length) {
    const open = opened("steps", false); // the list is built only while it is open (a visit may have thousands)
    parts.push(h("details", { class: "steps", open, dataset: { key: "steps" } },
      h("summary", {}, `Steps (${visit.steps.length})`), open ? stepList(visit) : null));
  }
  if (visit.error) parts.push(h("pre", { class: "error" }, visit.error));
  if (visit.output) parts.push(h("h3", {}, "Output"), outputFields(visit.output, fields));
  return parts;
}

/** One model turn's thinking as Markdown, rendered again only when its text grew. */
function thinkingTurn(cache, text, index) {
  const known = cache.get(index);
  if (known && known.text === text) return known.element;
  const element = h("div", { class: "thinking", dataset: { turn: index + 1 } });
  renderMarkdown(element, text);
  cache.set(index, { text, element });
  return element;
}

function stepList(visit) {
  return h("ol", {}, ...visit.steps.map((step) => h("li", {}, step)));
}

function toolCard(call, open, key) {
  return h("details", { class: "tool", open, dataset: { key, tool: call.tool ?? "", open: call.open } },
    h("summary", {}, h("code", {}, call.tool ?? "tool"), " ", badge(call.open ? "RUNNING" : "DONE")),
    call.args ? h("pre", { class: "args" }, call.args) : null,
    call.progress ? h("p", { class: "muted" }, call.progress) : null,
    call.result !== null ? h("pre", { class: "result" }, call.result) : null);
}

function todoList(items) {
  const list = Array.isArray(items) ? items : [];
  return h("ul", { class: "todo-list" }, ...list.map((item) => h("li", { dataset: { status: item.status ?? "" } },
    h("span", { class: "todo-mark", "aria-hidden": "true" }, item.status === "completed" ? "✓" : item.status === "in_progress" ? "…" : "○"),
    ` ${item.content ?? pretty(item)}`, h("span", { class: "muted" }, item.status ? ` (${item.status})` : ""))));
}
