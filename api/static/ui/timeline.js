// The run's timeline (GET /runs/{runId}/timeline): a bar per visit from its start for its duration, waits hatched,
// with the visit's tokens and cost; the run's totals above.

import { h } from "./dom.js";

/** "850 ms", "4.2 s", "3 min 05 s", "1 h 02 min". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(Math.round(seconds % 60)).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

/** "649 in · 169 out", with the cost when there is one. */
export function tokens(usage) {
  const counts = `${usage.promptTokens.toLocaleString()} in · ${usage.completionTokens.toLocaleString()} out`;
  return usage.cost === null ? counts : `${counts} · ${cost(usage)}`;
}

function cost(usage) {
  return `${usage.cost.toLocaleString(undefined, { maximumFractionDigits: usage.cost < 1 ? 4 : 2 })} ${usage.currency}`;
}

const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "–");

/** The timeline panel: `show(timeline)` with a GET answer; `onPick(visitUuid)` when a visit's row is clicked. */
/** What a visit's line says of it: its duration, its wait for answers, its tokens. */
export function visitFacts(visit) {
  const facts = [duration(visit.durationMs)];
  if (visit.waitingMs) facts.push(`waited ${duration(visit.waitingMs)}`);
  if (visit.usage.promptTokens || visit.usage.completionTokens) facts.push(tokens(visit.usage));
  return facts;
}

export class TimelineView {
  constructor({ onPick }) {
    this.onPick = onPick;
    this.totals = h("p", { class: "timeline-totals" });
    this.rows = h("ol", { class: "timeline-rows" });
    this.element = h("section", { class: "panel timeline", "aria-label": "Timeline", hidden: true },
      h("h2", {}, "Timeline"), this.totals, this.rows);
  }

  show(timeline) {
    this.element.hidden = false;
    const start = Date.parse(timeline.startedAt ?? timeline.createdAt ?? timeline.asOf);
    const end = Date.parse(timeline.completedAt ?? timeline.asOf);
    const span = Math.max(1, end - start);
    const waited = timeline.visits.reduce((sum, v) => sum + v.waitingMs, 0);
    this.totals.replaceChildren(...[
      h("span", {}, `Started ${time(timeline.startedAt)}`),
      h("span", {}, `${timeline.completedAt ? "took" : "running for"} ${duration(timeline.durationMs)}`),
      waited ? h("span", {}, `waited for answers ${duration(waited)}`) : null,
      h("span", { class: "run-tokens", dataset: { cost: timeline.usage.cost ?? "" } }, `tokens ${tokens(timeline.usage)}`),
      timeline.usage.cost === null ? h("span", { class: "muted" }, "no price set (FLOWTRAIL_MODEL_PRICES)") : null,
    ].filter(Boolean));
    this.rows.replaceChildren(...timeline.visits.map((visit) => this.row(visit, start, span, timeline.asOf)));
  }

  row(visit, start, span, asOf) {
    const from = visit.startedAt ? Date.parse(visit.startedAt) : start;
    const left = Math.min(100, ((from - start) / span) * 100);
    const width = Math.max(0.6, Math.min(100 - left, ((visit.durationMs ?? 0) / span) * 100));
    const bar = placed(h("span", { class: "bar" }, ...visit.waits.map((wait) => waitMark(wait, from, visit.durationMs, asOf))),
      left, width);
    const facts = [`+${duration(from - start)}`, ...visitFacts(visit)];
    return h("li", { dataset: { visitUuid: visit.visitUuid, nodeId: visit.nodeId, status: visit.status,
      durationMs: visit.durationMs ?? "", waitingMs: visit.waitingMs } },
    h("button", { type: "button", class: "timeline-label", onclick: () => this.onPick(visit.visitUuid),
      title: `Started ${time(visit.startedAt)}${visit.completedAt ? `, ended ${time(visit.completedAt)}` : ", still running"}` },
    visit.nodeLabel, visit.iterSeq > 1 ? h("span", { class: "muted" }, ` #${visit.iterSeq}`) : null),
    h("span", { class: "track" }, bar), h("span", { class: "timeline-facts muted" }, facts.join(" · ")));
  }
}

function waitMark(wait, from, durationMs, asOf) {
  if (!durationMs) return null;
  const asked = Date.parse(wait.askedAt) - from;
  const answered = Date.parse(wait.answeredAt ?? asOf) - from;
  const left = Math.max(0, (asked / durationMs) * 100);
  const width = Math.max(1, Math.min(100 - left, ((answered - asked) / durationMs) * 100));
  return placed(h("span", { class: "wait", title: "waiting for an answer" }), left, width);
}

/** Position a bar in its track (through the CSSOM: the page's policy refuses inline style attributes). */
function placed(element, left, width) {
  Object.assign(element.style, { left: `${left}%`, width: `${width}%` });
  return element;
}
