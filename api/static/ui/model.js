// The run as the page shows it: a pure fold of the stream's messages, the same for live and replay.

export const TERMINAL = new Set(["workflow_complete", "workflow_error"]);

/** An empty run, before its first message; a fork's messages up to `copiedUpTo` are its source's, copied. */
export function emptyRun(runId, copiedUpTo = 0) {
  return {
    runId, status: "CREATED", visits: new Map(), decisions: [], pause: null, todo: null,
    output: null, error: null, files: [], log: [], lastId: 0, terminal: false, arrivals: 0, copiedUpTo,
    usage: null, remoteWorkMayBeRunning: false, erased: false,
  };
}

function visitOf(run, data) {
  let visit = run.visits.get(data.visitUuid);
  if (!visit) {
    visit = {
      visitUuid: data.visitUuid, nodeId: data.nodeId, nodeType: "", nodeLabel: data.nodeId, status: "RUNNING",
      thinking: [], tools: [], todo: null, statusText: "", steps: [], output: null, error: null,
      sortOrder: null, iterSeq: null, arrival: run.arrivals++, lastId: 0, lastKind: "",
    };
    run.visits.set(data.visitUuid, visit);
  }
  return visit;
}

function parseJson(text, fallback) {
  try { return JSON.parse(text); } catch { return fallback; }
}

const STREAM_KINDS = {
  thinking(visit, data) { // a model turn's thinking: chunks in a row join, anything between starts the next turn
    if (visit.lastKind === "thinking" && visit.thinking.length) visit.thinking[visit.thinking.length - 1] += data.content;
    else visit.thinking.push(data.content);
  },
  status(visit, data) { visit.statusText = data.content; },
  step(visit, data) { visit.steps.push(data.content); },
  tool_call(visit, data) { visit.tools.push({ tool: data.toolName, args: data.content, result: null, progress: "", open: true }); },
  tool_progress(visit, data) {
    const card = openTool(visit, data.toolName);
    if (card) card.progress = data.content;
  },
  tool_result(visit, data) {
    const card = openTool(visit, data.toolName) || { tool: data.toolName, args: "", progress: "" };
    if (!visit.tools.includes(card)) visit.tools.push(card);
    Object.assign(card, { result: data.content, open: false });
  },
  todo_update(visit, data, run) {
    visit.todo = parseJson(data.content, []);
    run.todo = { visitUuid: visit.visitUuid, nodeLabel: visit.nodeLabel, items: visit.todo };
  },
  clarify_request(visit, data, run) {
    const asked = parseJson(data.content, {});
    run.pause = {
      clarifyId: asked.clarify_id, question: asked.question, choices: asked.choices || [],
      visitUuid: visit.visitUuid, nodeId: visit.nodeId, askedAt: data.id,
    };
  },
};

function openTool(visit, tool) {
  for (let i = visit.tools.length - 1; i >= 0; i--) {
    if (visit.tools[i].open && visit.tools[i].tool === tool) return visit.tools[i];
  }
  return null;
}

function settlePause(run, visit, kind) {
  if (run.pause && run.pause.visitUuid === visit.visitUuid && kind !== "clarify_request") run.pause = null;
}

const EVENTS = {
  node_status(run, data, id) {
    const visit = visitOf(run, data);
    if (!run.terminal && id > run.copiedUpTo) run.status = "RUNNING"; // a fork's copies come before its start
    if (data.status === "RUNNING") {
      Object.assign(visit, { nodeType: data.nodeType, nodeLabel: data.nodeLabel || data.nodeId, status: "RUNNING" });
      return visit.visitUuid;
    }
    settlePause(run, visit, "");
    Object.assign(visit, { status: data.status, output: data.output, error: data.error, statusText: "" });
    for (const card of visit.tools) card.open = false;
    return visit.visitUuid;
  },
  node_stream(run, data, id) {
    const visit = visitOf(run, data);
    settlePause(run, visit, data.kind);
    const apply = STREAM_KINDS[data.kind];
    if (apply) apply(visit, { ...data, id }, run);
    else visit.steps.push(`${data.kind}: ${data.content}`);
    visit.lastKind = data.kind;
    return visit.visitUuid;
  },
  visit_recorded(run, data) {
    const snap = data.visit;
    const visit = visitOf(run, snap);
    visit.sortOrder = snap.sortOrder ?? visit.sortOrder;
    visit.iterSeq = snap.iterSeq ?? visit.iterSeq;
    if (snap.status) Object.assign(visit, { status: snap.status, nodeType: snap.nodeType, nodeLabel: snap.nodeLabel });
    return visit.visitUuid;
  },
  planner_decision(run, data, id) {
    run.decisions.push({ ...data.decision, id });
    return "run";
  },
  workflow_complete(run, data) {
    Object.assign(run, { status: "SUCCESS", output: data.output, files: data.workingDirFiles || [], terminal: true, pause: null });
    return "run";
  },
  workflow_error(run, data) {
    Object.assign(run, { status: "FAILED", error: data.error, errorCode: data.errorCode ?? null, terminal: true, pause: null });
    return "run";
  },
};

/** Apply one message `{id, event, data}`; returns what changed (a visitUuid or "run"), or null for a repeat. */
export function applyMessage(run, message) {
  if (message.id <= run.lastId) return null;
  run.lastId = message.id;
  run.log.push({ id: message.id, event: message.event, nodeId: message.data.nodeId || "", kind: message.data.kind || "" });
  if (message.data.erased) run.erased = true; // every message of an erased run says so (docs/history.md)
  const apply = EVENTS[message.event];
  const changed = apply ? apply(run, message.data, message.id) : "run";
  if (changed && changed !== "run") {
    const visit = run.visits.get(changed);
    visit.lastId = message.id;
    if (message.id <= run.copiedUpTo) visit.copied = true;
  }
  return changed || "run";
}

/** The visits in card order: by sortOrder once recorded, the ones not recorded yet after them by arrival. */
export function visitsInOrder(run) {
  return [...run.visits.values()].sort((a, b) => {
    const ka = a.sortOrder ?? Number.MAX_SAFE_INTEGER;
    const kb = b.sortOrder ?? Number.MAX_SAFE_INTEGER;
    return ka - kb || a.arrival - b.arrival;
  });
}

/** Take the token usage and the remote-work flag from a `GET run` answer (the stream carries neither). */
export function applyResult(run, result) {
  run.usage = result.usage ?? null;
  run.remoteWorkMayBeRunning = Boolean(result.remoteWorkMayBeRunning);
}
