// Replay a finished run from its log at 1x, 10x or maximum speed; jump to any event id.

import { call } from "./api.js";

export const SPEEDS = { "1x": 1, "10x": 10, max: Infinity };
const MAX_GAP_MS = 5000;
const BATCH_AT_MAX = 250;

/** When each stored event happened, by position (the SSE id), from GET /runs/{runId}/events. */
export async function eventTimes(runId) {
  const text = await (await call(`/runs/${encodeURIComponent(runId)}/events`)).text();
  const times = new Map();
  for (const line of text.split("\n")) {
    if (!line) continue;
    const event = JSON.parse(line);
    times.set(event.originator_version, Date.parse(event.timestamp));
  }
  return times;
}

/**
 * Plays `messages` into `show(upto, index)`: `seek(id)` rebuilds to the last message at or before `id`;
 * `play(speed)` goes on from there, waiting the real gaps between events (capped at 5 s) divided by the speed.
 */
export class Player {
  constructor(messages, times, { onSeek, onStep, onState }) {
    Object.assign(this, { messages, times, onSeek, onStep, onState, index: 0, timer: null, speed: 1 });
  }

  get playing() { return this.timer !== null; }

  /** Show the run as it was after its first `count` messages. */
  seekCount(count) {
    this.seek(count > 0 ? this.messages[Math.min(count, this.messages.length) - 1].id : 0);
  }

  /** Show the run as it was right after event `id` (0: before anything). */
  seek(id) {
    this.pause();
    let index = 0;
    while (index < this.messages.length && this.messages[index].id <= id) index++;
    this.index = index;
    this.onSeek(this.messages.slice(0, index));
    this.onState(this.state());
  }

  /** Play from where it stands at `speed` (1, 10 or Infinity); from the start if it stood at the end. */
  play(speed) {
    this.pause();
    this.speed = speed;
    if (this.index >= this.messages.length) this.seek(0);
    this.schedule();
    this.onState(this.state());
  }

  pause() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  stop() {
    this.pause();
    this.onState(this.state());
  }

  state() {
    const done = this.index >= this.messages.length;
    const at = this.index ? this.messages[this.index - 1].id : 0;
    return { playing: this.playing, done, at, last: this.messages.length ? this.messages.at(-1).id : 0,
      shown: this.index, count: this.messages.length };
  }

  schedule() {
    if (this.index >= this.messages.length) {
      this.timer = null;
      this.onState(this.state());
      return;
    }
    this.timer = setTimeout(() => this.step(), this.delay());
  }

  delay() {
    if (this.speed === Infinity || this.index === 0) return 0;
    const before = this.times.get(this.messages[this.index - 1].id);
    const next = this.times.get(this.messages[this.index].id);
    const gap = Number.isFinite(before) && Number.isFinite(next) ? Math.max(0, next - before) : 0;
    return Math.min(gap, MAX_GAP_MS) / this.speed;
  }

  step() {
    const batch = [this.messages[this.index++]];
    while (this.index < this.messages.length && batch.length < BATCH_AT_MAX && this.delay() < 1) {
      batch.push(this.messages[this.index++]);
    }
    this.onStep(batch);
    this.onState(this.state());
    this.schedule();
  }
}
