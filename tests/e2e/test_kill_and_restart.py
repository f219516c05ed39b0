"""kill -9 of the server while 20 runs stream to 20 clients, then a restart on the same store (also with a second
kill -9 during that recovery): every run ends in a true state, every client that reconnects with its last id gets
the rest with no gap and no duplicate, and every audit is clean. The time to recover is measured and printed."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import statistics
from collections import Counter
from pathlib import Path

import httpx
import pytest

from flowtrail_client import FlowtrailClient
from scripts.audit import audit
from tests.support.killable import RECOVERING, KillableServer
from tests.support.resuming_sse import ResumingReader
from tests.support.sse import read_stream

pytestmark = pytest.mark.store

RUNS = 20
PACE_SECONDS = "0.03"
"""Between two scripted chunks: a demo-report run then takes ~6 s, so the kill lands mid-way."""
SEEN_BEFORE_KILL = 12
"""Messages every client has received when the server is killed (a run streams ~60)."""
FOLLOW_BOUND_SECONDS = 30
INTERRUPTED = re.compile(r"interrupted|the engine stopped while this visit was running")
"""How the error of a run that could not be continued after the restart reads."""
KEY = "test-key-all"
DEMO_REPORT = Path(__file__).resolve().parents[2] / "engine" / "demos" / "demo-report.json"
NO_RERUN = "report-no-rerun"
"""demo-report with every node `recoverable: false`: a visit the kill interrupts fails the run instead of running again."""
QUICK_TAKEOVER = {"FLOWTRAIL_WORKER_HEARTBEAT_SECONDS": "0.5", "FLOWTRAIL_WORKER_STALL_SECONDS": "2"}
"""On PostgreSQL the killed process's jobs wait for the stall threshold before the restarted one takes them over."""
WORKFLOWS = ("demo-report", NO_RERUN)
"""Half the runs of each: one half continues after the restart, the other fails as interrupted."""


def no_rerun_report(directory: Path) -> Path:
    definition = json.loads(DEMO_REPORT.read_text())
    definition["name"] = NO_RERUN
    for node in definition["nodes"]:
        node["data"]["recoverable"] = False
    directory.mkdir()
    (directory / f"{NO_RERUN}.json").write_text(json.dumps(definition))
    return directory


def paced_server(store: str, tmp_path: Path) -> KillableServer:
    return KillableServer(store, tmp_path / "data", FLOWTRAIL_LOAD_DEMOS="true",
                          FLOWTRAIL_SCRIPTED_PACE_SECONDS=PACE_SECONDS, **QUICK_TAKEOVER,
                          FLOWTRAIL_WORKFLOWS_DIR=str(no_rerun_report(tmp_path / "workflows")))


def run_path(run: tuple[str, str]) -> str:
    workflow, run_id = run
    return f"/api/v1/workflows/{workflow}/runs/{run_id}"


async def start_report(client: httpx.AsyncClient, workflow: str, topic: str) -> tuple[str, str]:
    created = await client.post(f"/api/v1/workflows/{workflow}/runs", json={"variables": {"topic": topic}})
    run = (workflow, created.json()["data"]["runId"])
    assert (await client.post(f"{run_path(run)}/start")).status_code == 200
    return run


async def every_client_has_seen(readers: list[ResumingReader], count: int) -> None:
    async def seen() -> None:
        while min(len(reader.messages) for reader in readers) < count:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(seen(), 20)


async def audited(server: KillableServer, run_id: str) -> tuple[int, str]:
    """`flowtrail audit RUN_ID` in this process (the command's own function): its status and what it printed."""
    printed = io.StringIO()
    async with FlowtrailClient(server.base_url, KEY) as api:
        with contextlib.redirect_stdout(printed):
            status = await audit(api, run_id)
    return status, printed.getvalue()


async def check_every_run(server: KillableServer, client: httpx.AsyncClient, runs: list[tuple[str, str]],
                          readers: list[ResumingReader]) -> Counter[str]:
    """Each run ended truly, its client's messages are exactly the stream read afterwards, its audit is clean."""
    outcomes: Counter[str] = Counter()
    for run, reader in zip(runs, readers):
        run_id = run[1]
        assert reader.refused is None, f"run {run_id}: the reconnect was refused: {reader.refused}"
        assert reader.cuts and reader.resumed_from, f"run {run_id}: its client was never cut and resumed"
        full = await read_stream(client, f"{run_path(run)}/stream")
        assert full.ended
        assert reader.messages == list(zip(full.ids, full.events, full.data)), f"run {run_id}: gap or duplicate"
        state = (await client.get(run_path(run))).json()["data"]
        assert state["status"] in ("SUCCESS", "FAILED"), f"run {run_id} is {state['status']}"
        if state["status"] == "FAILED":
            assert INTERRUPTED.search(state["error"] or ""), f"run {run_id} failed with {state['error']!r}"
        outcomes[f"{run[0]} {state['status']}"] += 1
        status, printed = await audited(server, run_id)
        assert status == 0 and "OK: every projection matches the log" in printed, printed
    return outcomes


def spread(seconds: list[float]) -> str:
    return f"min {min(seconds):.2f} / median {statistics.median(seconds):.2f} / max {max(seconds):.2f} s"


async def kill_restart_and_check(store: str, tmp_path: Path, measured, *, kill_again_in_recovery: bool) -> None:
    server = paced_server(store, tmp_path)
    server.launch()
    await server.ready()
    try:
        async with server.client() as client:
            runs = list(await asyncio.gather(
                *(start_report(client, WORKFLOWS[n % 2], f"topic {n}") for n in range(RUNS))))
            readers = [ResumingReader(client, f"{run_path(run)}/stream") for run in runs]
            following = asyncio.gather(*(reader.follow() for reader in readers))
            await every_client_has_seen(readers, SEEN_BEFORE_KILL)
            assert not any(reader.finished for reader in readers), "a run ended before the kill"
            seen_at_kill = [len(reader.messages) for reader in readers]
            killed = first_kill = server.kill()
            server.launch()
            if kill_again_in_recovery:
                await server.log_says(RECOVERING, more_than=RUNS // 2)
                taken_over = server.log().count(RECOVERING)
                killed = server.kill()
                server.launch()
            await server.ready()
            ready = asyncio.get_running_loop().time()
            await asyncio.wait_for(following, FOLLOW_BOUND_SECONDS)
            first_new = [reader.first_new_message_after(killed) for reader in readers]
            assert None not in first_new
            outcomes = await check_every_run(server, client, runs, readers)
    finally:
        await server.stop()
    assert "Traceback" not in server.log()
    second = (f"second kill -9 {killed - first_kill:.2f} s after the first, {taken_over} of {RUNS} runs taken over; "
              if kill_again_in_recovery else "")
    streamed = [len(reader.messages) for reader in readers]
    measured(
        f"kill -9 [{store.split(':')[0]}] {RUNS} runs of {min(streamed)}-{max(streamed)} messages, killed "
        f"{min(seen_at_kill)}-{max(seen_at_kill)} in: {second}"
        f"ready {ready - killed:.2f} s after the last SIGKILL; each run's first new event after it: "
        f"{spread([at - killed for at in first_new if at is not None])}; "
        f"outcomes {dict(sorted(outcomes.items()))}"
    )


async def test_after_kill_9_and_a_restart_every_run_ends_truly_and_every_stream_resumes_exactly(
    store, tmp_path, measured,
):
    await kill_restart_and_check(store, tmp_path, measured, kill_again_in_recovery=False)


async def test_a_second_kill_9_during_the_recovery_loses_and_repeats_nothing_either(store, tmp_path, measured):
    await kill_restart_and_check(store, tmp_path, measured, kill_again_in_recovery=True)
