// Calls to /api/v1 with the API key in the X-API-Key header; the key lives in sessionStorage only.

const KEY_NAME = "flowtrail.apiKey";
export const API = "/api/v1";

/** The key this tab signed in with, or null. */
export function apiKey() {
  return sessionStorage.getItem(KEY_NAME);
}

/** Keep the key for this tab (never in a URL). */
export function signIn(key) {
  sessionStorage.setItem(KEY_NAME, key);
}

/** Forget the key. */
export function signOut() {
  sessionStorage.removeItem(KEY_NAME);
}

/** An error answer of the API: its HTTP status and envelope code. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

/** fetch under /api/v1 with the key header; throws ApiError on an error status. */
export async function call(path, options = {}) {
  const headers = { ...(options.headers || {}), "X-API-Key": apiKey() || "" };
  const response = await fetch(API + path, { ...options, headers });
  if (!response.ok) {
    let body = { code: "HTTP_" + response.status, message: response.statusText };
    try { body = await response.json(); } catch { /* not an envelope */ }
    throw new ApiError(response.status, body.code, body.message);
  }
  return response;
}

/** The `data` of an enveloped JSON answer. */
export async function data(path, options) {
  return (await (await call(path, options)).json()).data;
}

/** A query string of the given parameters (arrays repeat, empty values are left out). */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of [].concat(value)) {
      if (one !== undefined && one !== null && one !== "") search.append(name, one);
    }
  }
  const text = search.toString();
  return text ? "?" + text : "";
}

/** The workflow name of a run: the `workflow_name` of its first stored event (the URL /ui/runs/{runId} carries none). */
export async function workflowOfRun(runId) {
  return (await runOrigin(runId)).workflowName;
}

/** What a run's first two stored events say: its workflow's name and version, and (a fork's `RunForked`) where it came from:
 * `{sourceRunId, visitUuid, position, rerun, copiedUpTo}`, the last the fork's position of its last copied event. */
export async function runOrigin(runId) {
  const response = await call(`/runs/${encodeURIComponent(runId)}/events?after=0`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (text.split("\n").length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  // only the first two lines: the rest of what arrived may end mid-line
  const [created, second] = text.split("\n").slice(0, 2).filter((line) => line.trim()).map((line) => JSON.parse(line));
  const fork = second && second.type === "RunForked" ? {
    sourceRunId: second.source_run_id.replaceAll("-", ""), visitUuid: second.source_visit_uuid,
    position: second.source_position, rerun: second.rerun, copiedUpTo: 2 + second.copied_positions.length,
  } : null;
  return { workflowName: created.workflow_name, workflowVersion: created.workflow_version, fork };
}

/** Save a binary answer as a file, fetched with the key header. */
export async function download(path, filename) {
  const blob = await (await call(path)).blob();
  const url = URL.createObjectURL(blob);
  const link = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
