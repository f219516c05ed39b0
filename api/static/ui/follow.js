// Follow a run's SSE stream with fetch + ReadableStream (the key in a header), resuming exactly after a cut.

import { API, apiKey, ApiError } from "./api.js";
import { SseParser } from "./sse.js";
import { TERMINAL } from "./model.js";

/** The waits after a cut: one reconnect after each of `backoffSeconds`, then a poll every `pollSeconds`. */
export const TIMING = { backoffSeconds: [1, 2, 4, 8, 16], pollSeconds: 30 };
const FATAL = new Set([400, 401, 403, 404]);

const sleep = (seconds, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, seconds * 1000);
  signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
});

/**
 * Streams `/workflows/{name}/runs/{id}/stream` from `after`; hands every message once, in order, to `onMessages`.
 * A cut connection is retried with Last-Event-ID after 1/2/4/8/16 s, then the run's result is polled every 30 s
 * (with one stream attempt each time) until the stream comes back or the run has ended.
 */
export class StreamFollower {
  constructor({ workflowName, runId, after = 0, onMessages, onState, onResult }) {
    this.base = `${API}/workflows/${encodeURIComponent(workflowName)}/runs/${encodeURIComponent(runId)}`;
    Object.assign(this, { lastId: after, onMessages, onState, onResult, ended: false, delivered: false });
    this.controller = new AbortController();
  }

  /** Follow until the terminal message (or stop()). */
  async start() {
    let failures = 0;
    const signal = this.controller.signal;
    while (!this.ended && !signal.aborted) {
      this.delivered = false;
      try {
        await this.connect();
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ApiError && FATAL.has(error.status)) {
          this.onState({ state: "failed", message: error.message });
          return;
        }
      }
      if (this.ended || signal.aborted) break;
      if (this.delivered) failures = 0; // a cut after some messages starts the backoff again
      const backoff = TIMING.backoffSeconds;
      if (failures < backoff.length) {
        const seconds = backoff[failures++];
        this.onState({ state: "reconnecting", attempt: failures, of: backoff.length, seconds, lastId: this.lastId });
        await sleep(seconds, signal);
      } else {
        this.onState({ state: "polling", seconds: TIMING.pollSeconds, lastId: this.lastId });
        await this.poll();
        await sleep(TIMING.pollSeconds, signal);
      }
    }
    if (this.ended) this.onState({ state: "ended" });
  }

  /** Stop following. */
  stop() {
    this.controller.abort();
  }

  /** One connection: resolves when the body ends (true if it delivered messages, also kept in `delivered`);
   *  rejects when it is cut. */
  async connect() {
    const headers = { "X-API-Key": apiKey() || "", Accept: "text/event-stream" };
    if (this.lastId > 0) headers["Last-Event-ID"] = String(this.lastId);
    const response = await fetch(`${this.base}/stream`, { headers, signal: this.controller.signal, cache: "no-store" });
    if (!response.ok) {
      let body = {};
      try { body = await response.json(); } catch { /* not an envelope */ }
      throw new ApiError(response.status, body.code || "HTTP_" + response.status, body.message || "");
    }
    this.onState({ state: "live", lastId: this.lastId });
    let batch = [];
    const parser = new SseParser((message) => {
      const id = Number(message.id);
      if (!Number.isSafeInteger(id) || id <= this.lastId) return; // a repeat: shown once already
      this.lastId = id;
      if (TERMINAL.has(message.event)) this.ended = true;
      batch.push({ id, event: message.event, data: JSON.parse(message.data) });
    });
    const reader = response.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return this.delivered;
      parser.push(value);
      if (batch.length) {
        this.delivered = true;
        const ready = batch;
        batch = [];
        this.onMessages(ready);
      }
      if (this.ended) {
        reader.cancel().catch(() => {});
        return this.delivered;
      }
    }
  }

  /** The run's result while the stream is away (its status says whether it has ended). */
  async poll() {
    try {
      const response = await fetch(this.base, { headers: { "X-API-Key": apiKey() || "" }, signal: this.controller.signal });
      if (response.ok) this.onResult((await response.json()).data);
    } catch { /* still away: the next poll tries again */ }
  }
}

