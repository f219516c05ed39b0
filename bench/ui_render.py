"""UI render: from opening a run's page (/ui/runs/{runId}) to its first card and to its last, for a run of 50,000 events.

The run is written through the service's own writer (as the engine writes): `--visits` agent
visits, each with a thinking chunk every 10th chunk (consecutive thinking chunks would be merged
into one event, decision 4), a tool call and its result every 10th, a TODO update every 50th,
`step` chunks in between, then the visit's end and record; then the run's end. The page is opened in Debian's
headless Chromium (/usr/bin/chromium, driven by Playwright) at 1280x800 with the key already in
session storage; the time runs from just before `goto` to the moment the page shows the run's
terminal event (`#run[data-terminal=true][data-last-event-id=<last>]`, set by the same paint that
renders the last card); the first paint is the first visit card shown. Also measured: scrolling
(the page from top to bottom, then the open event log of every message, one step a frame: the
longest frame and the median), a replay of the whole run at max speed (click to the last card),
and how long a click on a card's summary takes to paint (the page stays responsive).

    python -m bench.ui_render [--store both|sqlite|postgres] [--events 50000] [--visits 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.cli import bench_main
from bench.figures import median, ms, print_table
from bench.machine import free_port
from bench.names import API_KEY, NODE_ID
from bench.service import Service, settings_for
from bench.stores import Store
from domain import run as decide
from engine.access import ApiKey
from engine.runs.writer import RunWriter

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
THINKING = "Looking at the **sources** again: the second one lists `figures` the first one lacks. "


async def _visit(writer: RunWriter, index: int, chunks: int) -> None:
    visit, node = uuid.uuid4().hex, f"{NODE_ID}-{index}"
    await writer.decide(lambda run, at: decide.start_visit(
        run, at, visit_uuid=visit, node_id=node, node_type="agent", node_label=f"Step {index + 1}",
        iter_seq=1, sort_order=index + 1))
    for i in range(chunks):
        if i % 50 == 49:
            todos = f'[{{"content":"chunk {i}","status":"completed"}},{{"content":"next","status":"pending"}}]'
            await writer.stream(visit_uuid=visit, node_id=node, kind="todo_update", content=todos, tool_name="todo")
        elif i % 10 == 8:
            await writer.stream(visit_uuid=visit, node_id=node, kind="tool_call", content=f'{{"query":"q{i}"}}',
                                tool_name="web_search")
        elif i % 10 == 9:
            await writer.stream(visit_uuid=visit, node_id=node, kind="tool_result", content=f"result {i}",
                                tool_name="web_search")
        elif i % 10 == 0:
            await writer.stream(visit_uuid=visit, node_id=node, kind="thinking", content=THINKING)
        else:
            await writer.stream(visit_uuid=visit, node_id=node, kind="step", content=f'{{"iteration":{i},"prev_tools":[]}}')
    await writer.flush()
    await writer.decide(
        lambda run, at: decide.complete_visit(run, at, visit_uuid=visit, node_id=node,
                                              output={"status": 200, "message": "ok", "data": {"index": index}}),
        lambda run, at: decide.record_visit(run, at, visit_uuid=visit, node_id=node),
    )


async def build_run(service: Service, events: int, visits: int) -> tuple[str, int]:
    """A finished run of about `events` events over `visits` visits: (run id, its last position)."""
    run_id, writer = await service.started_run()
    chunks = max(1, (events - 3) // visits - 3)
    for index in range(visits):
        await _visit(writer, index, chunks)
    await writer.decide(lambda run, at: decide.complete_run(run, at, output={"status": 200, "message": "done", "data": {}}))
    return run_id.hex, writer.run.version


SCROLL = """async () => {
  const frame = () => new Promise(requestAnimationFrame);
  const gaps = [];
  const scroll = async (move, steps) => {
    let last = await frame();
    for (let i = 1; i <= steps; i++) { move(i / steps); const now = await frame(); gaps.push(now - last); last = now; }
  };
  const page = document.documentElement;
  await scroll((f) => window.scrollTo(0, f * (page.scrollHeight - innerHeight)), 60);
  const log = document.getElementById("event-log");
  log.closest("details").open = true;
  log.scrollIntoView();
  await scroll((f) => { log.scrollTop = f * (log.scrollHeight - log.clientHeight); }, 60);
  log.closest("details").open = false;
  window.scrollTo(0, 0);
  return gaps;
}"""
"""Scroll the page to its end, then the event log (open) to its end, one step a frame: each frame's length (ms).
The log is closed again after, as a reader who opened it would find the replay with it closed."""


async def measure(base_url: str, run_id: str, last: int, repeat: int) -> dict[str, list[float]]:
    """Open the run's page `repeat` times: seconds to the last card, to the end of a max-speed replay, for a click."""
    from playwright.async_api import async_playwright

    done = f'#run[data-terminal="true"][data-last-event-id="{last}"]'
    times: dict[str, list[float]] = {"first": [], "open": [], "replay": [], "click": [], "frame max": [], "frame median": []}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for _ in range(repeat):
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            await context.add_init_script(f"sessionStorage.setItem('flowtrail.apiKey', '{API_KEY}')")
            page = await context.new_page()
            start = time.perf_counter()
            await page.goto(f"{base_url}/ui/runs/{run_id}")
            await page.locator(".visit").first.wait_for(timeout=300_000)
            times["first"].append(time.perf_counter() - start)
            await page.locator(done).wait_for(timeout=300_000)
            times["open"].append(time.perf_counter() - start)
            frames = await page.evaluate(SCROLL)
            times["frame max"].append(max(frames) / 1000)
            times["frame median"].append(median(frames) / 1000)
            times["click"].append(await page.evaluate("""() => new Promise(resolve => {
                const start = performance.now();
                document.querySelector('.visit summary').click();
                requestAnimationFrame(() => setTimeout(() => resolve((performance.now() - start) / 1000)));
            })"""))
            await page.get_by_role("button", name="Replay").click()
            await page.get_by_role("button", name="Play max").wait_for(timeout=300_000)  # after the events' times
            start = time.perf_counter()
            await page.get_by_role("button", name="Play max").click()
            await page.locator('#run[data-replay-done="true"]').wait_for(timeout=300_000)
            times["replay"].append(time.perf_counter() - start)
            await context.close()
        await browser.close()
    return times


async def run(kinds: list[str], events: int, visits: int, repeat: int) -> None:
    """Build the run on each store, serve it, open its page in the browser, print the figures."""
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(kind, Path(tmp))
            port = free_port()
            settings = replace(settings_for(store, Path(tmp) / "data", port=port, load_demos=False),
                               api_keys=(ApiKey(key=API_KEY, id="bench"),))
            service = Service(settings)
            try:
                async with service.serving():
                    run_id, last = await build_run(service, events, visits)
                    times = await measure(f"http://127.0.0.1:{port}", run_id, last, repeat)
            finally:
                store.drop()
        rows.append({
            "store": kind, "events": last, "visits": visits,
            "open->first card ms": round(ms(median(times["first"])), 1),
            "open->last card ms (median)": round(ms(median(times["open"])), 1),
            "min": round(ms(min(times["open"])), 1), "max": round(ms(max(times["open"])), 1),
            "replay max ms": round(ms(median(times["replay"])), 1),
            "click->paint ms": round(ms(median(times["click"])), 1),
            "scroll frame median/max ms": f"{ms(median(times['frame median'])):.0f}/{ms(max(times['frame max'])):.0f}",
        })
    print_table(f"UI render: a run of {events} events in headless Chromium, 1280x800 ({repeat} opens)", rows)


def add_args(parser: argparse.ArgumentParser) -> None:
    """--events, --visits, --repeat."""
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--visits", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
