// The workflow's graph as inline SVG: a layered layout of its nodes and edges, each node coloured by its latest visit.

import { h } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const BOX = { width: 150, height: 44, gapX: 22, gapY: 46, margin: 14, loop: 34 };
const MAX_LABEL = 17;

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  element.append(...children.filter((c) => c !== null && c !== undefined));
  return element;
}

/** The edges that close a cycle (found by a depth-first walk from the start node, then from any node not reached). */
export function backEdges(graph) {
  const next = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const edge of graph.edges) if (next.has(edge.source) && next.has(edge.target)) next.get(edge.source).push(edge.target);
  const state = new Map();
  const back = new Set();
  const walk = (start) => {
    const stack = [[start, 0]];
    state.set(start, "open");
    while (stack.length) {
      const top = stack.at(-1);
      const [id, i] = top;
      if (i >= next.get(id).length) { state.set(id, "done"); stack.pop(); continue; }
      top[1] += 1;
      const target = next.get(id)[i];
      if (state.get(target) === "open") back.add(`${id}->${target}`);
      else if (!state.has(target)) { state.set(target, "open"); stack.push([target, 0]); }
    }
  };
  const starts = graph.startNodeId && next.has(graph.startNodeId) ? [graph.startNodeId] : [];
  for (const id of [...starts, ...next.keys()]) if (!state.has(id)) walk(id);
  return back;
}

/** Each node's layer (longest path from a source, cycles cut at their back edges) and place in it. */
export function layout(graph) {
  const back = backEdges(graph);
  const forward = graph.edges.filter((e) => !back.has(`${e.source}->${e.target}`));
  const layer = new Map(graph.nodes.map((n) => [n.id, 0]));
  for (let pass = 0; pass < graph.nodes.length; pass++) { // longest path; the forward edges form a DAG
    let moved = false;
    for (const e of forward) {
      if (layer.has(e.source) && layer.has(e.target) && layer.get(e.target) < layer.get(e.source) + 1) {
        layer.set(e.target, layer.get(e.source) + 1);
        moved = true;
      }
    }
    if (!moved) break;
  }
  const rows = [];
  for (const node of graph.nodes) (rows[layer.get(node.id)] ||= []).push(node.id);
  const place = new Map();
  rows.forEach((row, depth) => {
    if (depth > 0) { // order a row by where its parents stand (fewer crossings)
      const weight = (id) => {
        const parents = forward.filter((e) => e.target === id && place.has(e.source)).map((e) => place.get(e.source).index);
        return parents.length ? parents.reduce((a, b) => a + b, 0) / parents.length : Infinity;
      };
      row.sort((a, b) => weight(a) - weight(b));
    }
    row.forEach((id, index) => place.set(id, { layer: depth, index, of: row.length }));
  });
  return { place, back, widest: Math.max(1, ...rows.map((r) => r.length)), depth: rows.length };
}

function shortLabel(text) {
  return text.length > MAX_LABEL ? `${text.slice(0, MAX_LABEL - 1)}…` : text;
}

/** The graph panel: `setGraph(graph)` once, `update(run, path)` on every paint, `onPick(nodeId)` on a click. */
export class GraphView {
  constructor({ onPick }) {
    this.onPick = onPick;
    this.nodes = new Map();
    this.edges = [];
    this.figure = h("div", { class: "graph-figure" });
    this.path = h("ol", { class: "planner-path", "aria-label": "The planner's path" });
    this.note = h("p", { class: "muted graph-note" });
    this.element = h("section", { class: "panel graph", "aria-label": "Workflow graph", hidden: true },
      h("h2", {}, "Workflow graph"), this.note, this.figure, this.path);
  }

  /** Draw the workflow's nodes and edges (from GET /workflows/{name}/graph). */
  setGraph(graph, runVersion) {
    this.graph = graph;
    const { place, back, widest, depth } = layout(graph);
    const width = BOX.margin * 2 + widest * BOX.width + (widest - 1) * BOX.gapX + (back.size ? BOX.loop * 2 : 0);
    const height = BOX.margin * 2 + depth * BOX.height + (depth - 1) * BOX.gapY;
    const at = (id) => {
      const p = place.get(id);
      const rowWidth = p.of * BOX.width + (p.of - 1) * BOX.gapX;
      const left = (width - rowWidth) / 2;
      return { x: left + p.index * (BOX.width + BOX.gapX), y: BOX.margin + p.layer * (BOX.height + BOX.gapY) };
    };
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }));
    const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, role: "group", class: "graph-svg",
      "aria-label": `${graph.nodes.length} nodes, ${graph.edges.length} edges` }, svg("defs", {}, marker));
    this.edges = graph.edges.filter((e) => place.has(e.source) && place.has(e.target)).map((e) => {
      const from = at(e.source);
      const to = at(e.target);
      const isBack = back.has(`${e.source}->${e.target}`);
      const route = isBack ? backRoute(from, to, width) : forwardRoute(from, to);
      const line = svg("path", { d: route.d, class: `edge${isBack ? " back" : ""}`, "marker-end": "url(#arrow)" },
        e.condition ? svg("title", {}, `when ${e.condition}`) : null);
      const label = svg("text", { class: "edge-steps", x: route.labelX, y: route.labelY, "text-anchor": "middle" });
      picture.append(line, label);
      return { ...e, line, label };
    });
    this.nodes.clear();
    for (const node of graph.nodes) {
      const { x, y } = at(node.id);
      const count = svg("text", { class: "node-count", x: x + BOX.width - 8, y: y + 14, "text-anchor": "end" });
      const title = svg("title");
      const group = svg("g", { class: "node", tabindex: 0, role: "button", "data-node-id": node.id, "data-status": "" },
        title, svg("rect", { x, y, width: BOX.width, height: BOX.height, rx: 8 }),
        svg("text", { class: "node-label", x: x + 10, y: y + 19 }, shortLabel(node.label)),
        svg("text", { class: "node-type", x: x + 10, y: y + 35 }, node.type), count);
      const pick = () => this.onPick(node.id);
      group.addEventListener("click", pick);
      group.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); pick(); } });
      picture.append(group);
      this.nodes.set(node.id, { node, group, count, title });
    }
    this.figure.replaceChildren(picture);
    this.note.textContent = runVersion && runVersion !== graph.version
      ? `The run used version ${runVersion}; this is version ${graph.version}, the workflow's current one.` : "";
    this.element.hidden = false;
    this.shown = "";
  }

  /** Colour each node by its latest visit, count its visits, mark the live one, number the steps taken. */
  update(run, visits) {
    if (!this.graph) return;
    const waiting = run.pause ? run.pause.nodeId : null;
    const key = JSON.stringify([visits.map((v) => [v.nodeId, v.status]), waiting, run.decisions.length]);
    if (key === this.shown) return;
    this.shown = key;
    const byNode = new Map();
    for (const visit of visits) (byNode.get(visit.nodeId) || byNode.set(visit.nodeId, []).get(visit.nodeId)).push(visit);
    const steps = stepsTaken(this.graph, visits);
    for (const [id, shape] of this.nodes) {
      const mine = byNode.get(id) || [];
      const last = mine.at(-1);
      const status = id === waiting ? "WAITING" : last ? last.status : "";
      shape.group.dataset.status = status;
      shape.group.dataset.visits = String(mine.length);
      shape.group.classList.toggle("live", status === "RUNNING" || status === "WAITING");
      shape.count.textContent = mine.length > 1 ? `×${mine.length}` : "";
      shape.title.textContent = `${shape.node.label} (${shape.node.type}): ${status ? status.toLowerCase() : "not visited"}`
        + `${mine.length ? `, ${mine.length} visit${mine.length > 1 ? "s" : ""}` : ""}`;
      shape.group.setAttribute("aria-label", shape.title.textContent);
    }
    for (const edge of this.edges) {
      const numbers = steps.get(`${edge.source}->${edge.target}`) || [];
      edge.line.classList.toggle("taken", numbers.length > 0);
      edge.label.textContent = this.graph.mode === "AGENTIC" ? numbers.join(", ") : "";
    }
    this.showPath(run);
  }

  /** An agentic run's path as the planner chose it: start, each choice (numbered), finish. */
  showPath(run) {
    this.path.hidden = this.graph.mode !== "AGENTIC" || !run.decisions.length;
    if (this.path.hidden) return;
    const stops = run.decisions.map((d, i) => {
      const target = d.nextNodeId;
      const label = target === null ? "finish" : (this.nodes.get(target)?.node.label ?? target);
      return h("li", { dataset: { nodeId: target ?? "" }, title: d.reason },
        target === null ? h("span", { class: "finish" }, `${i + 1}. ${label}`)
          : h("button", { type: "button", class: "path-stop", onclick: () => this.onPick(target) }, `${i + 1}. ${label}`));
    });
    this.path.replaceChildren(h("li", { class: "muted" }, "Planner's path:"), ...stops);
  }
}

/** Which edges the run went along, with the step numbers (the visits in order, each from the visit before it). */
function stepsTaken(graph, visits) {
  const edges = new Set(graph.edges.map((e) => `${e.source}->${e.target}`));
  const taken = new Map();
  if (graph.mode === "AGENTIC") {
    visits.forEach((visit, i) => {
      if (i === 0) return;
      const key = `${visits[i - 1].nodeId}->${visit.nodeId}`;
      if (edges.has(key)) (taken.get(key) || taken.set(key, []).get(key)).push(i);
    });
    return taken;
  }
  const seen = new Set(visits.filter((v) => v.status !== "SKIPPED").map((v) => v.nodeId));
  for (const key of edges) {
    const [source, target] = key.split("->");
    if (seen.has(source) && seen.has(target)) taken.set(key, [1]);
  }
  return taken;
}

/** A forward edge: from the source's bottom to the target's top; its step numbers beside its middle. */
function forwardRoute(from, to) {
  const x1 = from.x + BOX.width / 2;
  const y1 = from.y + BOX.height;
  const x2 = to.x + BOX.width / 2;
  const y2 = to.y - 2;
  const bend = Math.max(20, (y2 - y1) / 2);
  const side = x2 >= x1 ? 10 : -10;
  return { d: `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}`, labelX: (x1 + x2) / 2 + side, labelY: (y1 + y2) / 2 + 4 };
}

/** An edge back up a cycle: out of the source's outer side (the nearer edge of the figure), round, into the target's. */
function backRoute(from, to, width) {
  const leftSide = from.x + BOX.width / 2 < width / 2;
  const edgeX = (box) => (leftSide ? box.x : box.x + BOX.width);
  const out = leftSide ? Math.max(4, Math.min(from.x, to.x) - BOX.loop) : Math.min(width - 4, Math.max(from.x, to.x) + BOX.width + BOX.loop);
  const y1 = from.y + BOX.height / 2;
  const y2 = to.y + BOX.height / 2;
  const x2 = edgeX(to) + (leftSide ? -2 : 2);
  return { d: `M${edgeX(from)},${y1} C${out},${y1} ${out},${y2} ${x2},${y2}`, labelX: out + (leftSide ? 8 : -8), labelY: (y1 + y2) / 2 };
}
