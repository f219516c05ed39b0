// Forks on the run page: where a fork came from, the runs forked from this one, and making a fork or a re-run.

import { call, data } from "./api.js";
import { h } from "./dom.js";

const short = (runId) => runId.slice(0, 12);

function runLink(runId) {
  return h("a", { href: `/ui/runs/${runId}`, "data-route": true, class: "run-link" }, h("code", {}, short(runId)));
}

/** "Forked from run … from visit …" (or "Re-run of run …"), linking to the source. */
export function originLine(fork) {
  const where = fork.visitUuid ? [" from visit ", h("code", {}, fork.visitUuid.slice(0, 8))] : [" from its end"];
  return h("p", { class: "origin", dataset: { sourceRunId: fork.sourceRunId } },
    fork.rerun ? "Re-run of run " : "Forked from run ", runLink(fork.sourceRunId), ...where,
    h("span", { class: "muted" }, ` (copied up to its event ${fork.position})`));
}

/** The panel listing the runs forked from this one (filled when `load()` is called). */
export function forksPanel(runPath) {
  const list = h("ul", { class: "forks-list" });
  const panel = h("section", { class: "panel forks", "aria-label": "Forks", hidden: true }, h("h2", {}, "Forks"), list);
  panel.load = async () => {
    const page = await data(`${runPath}/forks?limit=50`);
    list.replaceChildren(...page.items.map((item) => h("li", { dataset: { runId: item.runId } },
      runLink(item.runId), " ", h("span", { class: "muted" }, item.status),
      item.forkedFrom && item.forkedFrom.visitUuid ? h("span", { class: "muted" }, ` from visit ${item.forkedFrom.visitUuid.slice(0, 8)}`) : null)));
    panel.hidden = !page.items.length;
  };
  return panel;
}

/** Fork the run from a finished visit; the new run's id (created, not started). */
export async function forkFrom(runPath, visitUuid) {
  const answer = await call(`${runPath}/fork`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ fromVisit: visitUuid }),
  });
  return (await answer.json()).data.runId;
}

/** Re-run the failed run from its first failed visit; the new run's id (created, not started). */
export async function rerun(runPath) {
  return (await (await call(`${runPath}/rerun`, { method: "POST" })).json()).data.runId;
}

/** "fork of …" for a listed run that is a fork, else null. */
export function forkNote(item) {
  return item.forkedFrom ? h("span", { class: "muted fork-of" }, " fork of ", runLink(item.forkedFrom.runId)) : null;
}
