// Webhooks on the run page: each delivery of the run's webhooks, its attempts and how it stands (GET run's `webhooks`).

import { data } from "./api.js";
import { h, badge } from "./dom.js";

const POLL_MS = 2000;
const QUIET_POLLS = 3;
/** Polls after the run ended with nothing pending before the panel stops asking (a delivery begins soon after). */
const COLUMNS = ["trigger", "sent to", "state", "attempts", "last answer", "why abandoned"];

function deliveryRow(delivery) {
  const answer = delivery.lastStatusCode !== null ? String(delivery.lastStatusCode) : (delivery.lastError || "");
  return h("tr", { dataset: { webhookId: delivery.webhookId, state: delivery.state } },
    h("td", {}, delivery.trigger), h("td", {}, h("code", {}, delivery.url)), h("td", {}, badge(delivery.state)),
    h("td", {}, String(delivery.attempts)), h("td", {}, answer),
    h("td", { class: "muted" }, delivery.abandonedReason || ""));
}

/** The panel listing the run's webhook deliveries; `watch()` keeps it current while any may still change. */
export function webhooksPanel(runPath) {
  const rows = h("tbody");
  const panel = h("section", { class: "panel webhooks", "aria-label": "Webhooks", hidden: true },
    h("h2", {}, "Webhooks"),
    h("table", {}, h("thead", {}, h("tr", {}, ...COLUMNS.map((name) => h("th", {}, name)))), rows));
  /** Read the run once; true when it has ended and no delivery is pending. */
  panel.load = async () => {
    const run = await data(runPath);
    const deliveries = run.webhooks || [];
    rows.replaceChildren(...deliveries.map(deliveryRow));
    panel.hidden = !deliveries.length;
    return run.completedAt !== null && deliveries.every((delivery) => delivery.state !== "PENDING");
  };
  panel.watch = async () => {
    let quiet = 0;
    while (quiet < QUIET_POLLS) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      if (!panel.isConnected) return;
      try {
        quiet = (await panel.load()) ? quiet + 1 : 0;
      } catch {
        quiet = 0;
      }
    }
  };
  return panel;
}
