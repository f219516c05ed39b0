"""The embedded store's disk fills up mid-run (SQLite on a small tmpfs of its own): the run fails cleanly with an
error, the service keeps answering reads, writes answer `503 STORE_UNAVAILABLE` within a second, nothing spins,
and once there is space again the service writes as before (no restart).

A disk turning read-only mid-run is not made here: Linux refuses to remount a filesystem read-only while a file
on it is open for writing (`mount -o remount,ro` exits 32, busy), and SQLite keeps its files open; the store treats
SQLite's read-only errors as it treats a full disk (tests/unit/test_store_faults.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from flowtrail_client import FlowtrailClient
from scripts.audit import audit
from tests.support.process import ServerProcess
from tests.support.sse import read_stream

DISK_BYTES = 16 * 1024 * 1024
WRITE_RETRY_SECONDS = 3.0
"""The server's FLOWTRAIL_STORE_WRITE_RETRY_SECONDS here: how long a run's write is retried before the run fails."""
RUN_BOUND_SECONDS = 40
UNAVAILABLE_BOUND_SECONDS = 3.0
"""The issue asks for a 503 within a second; asserted with slack for a loaded machine, the real figure is printed."""
BUSY_BOUND = 0.5
"""Of one core: the server waits between retries, it does not spin."""
OUTAGE_LINE = "flowtrail.store: the event store is unavailable"


@contextlib.contextmanager
def small_disk(path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_BYTES mounted at `path` (unmounted after); skipped where mounting is not allowed."""
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES},mode=0755", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )
    if mounted.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs for the full-disk test under CI: {mounted.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; the file."""
    filler = disk / "filler"
    block = b"\0" * 65536
    with filler.open("wb") as out:
        try:
            while True:
                out.write(block)
                out.flush()
        except OSError as error:
            assert error.errno == errno.ENOSPC
    with contextlib.suppress(OSError), filler.open("ab") as out:  # the last partial block
        for _ in range(64):
            out.write(b"\0" * 1024)
            out.flush()
    return filler


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_path(run_id: str) -> str:
    return f"/api/v1/workflows/demo-report/runs/{run_id}"


async def start_report(client: httpx.AsyncClient, topic: str) -> str:
    created = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": topic}})
    assert created.status_code == 201, created.text
    run_id: str = created.json()["data"]["runId"]
    assert (await client.post(f"{run_path(run_id)}/start")).status_code == 200
    return run_id


async def until(condition: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    give_up = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < give_up, what
        await asyncio.sleep(0.05)


async def events_of(client: httpx.AsyncClient, run_id: str) -> int:
    answer = await client.get("/api/v1/runs", params={"limit": 100})
    return next((item["lastEventId"] for item in answer.json()["data"]["items"] if item["runId"] == run_id), 0)


async def test_a_disk_that_fills_up_mid_run_fails_the_run_cleanly_keeps_reads_answering_and_recovers_with_space(
    tmp_path,
):
    with small_disk(tmp_path / "disk") as disk:
        server = ServerProcess(
            f"sqlite:///{disk / 'flowtrail.db'}", tmp_path / "data", FLOWTRAIL_LOAD_DEMOS="true",
            FLOWTRAIL_SCRIPTED_PACE_SECONDS="0.05", FLOWTRAIL_STORE_WRITE_RETRY_SECONDS=str(WRITE_RETRY_SECONDS),
            FLOWTRAIL_STORE_REQUEST_TIMEOUT_SECONDS="1",
        )
        await server.start()
        try:
            async with server.client() as client:
                run_id = await start_report(client, "tides")
                stream = asyncio.create_task(read_stream(client, f"{run_path(run_id)}/stream"))

                async def going() -> bool:
                    return await events_of(client, run_id) >= 10

                await until(going, 20, "the run did not get going")
                filler = fill(disk)

                async def noticed() -> bool:
                    return OUTAGE_LINE in server.log()

                await until(noticed, 10, "the server did not notice the store failing")
                noticed_at = time.monotonic()
                began = time.monotonic()
                refused = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": "x"}})
                refused_in = time.monotonic() - began
                reads = [await client.get(run_path(run_id)), await client.get("/api/v1/runs"), await client.get("/healthz")]
                assert server.process is not None
                cpu_before, wall_before = cpu_seconds(server.process.pid), time.monotonic()
                await asyncio.sleep(max(0.5, WRITE_RETRY_SECONDS + 1.0 - (time.monotonic() - noticed_at)))
                busy = (cpu_seconds(server.process.pid) - cpu_before) / (time.monotonic() - wall_before)
                filler.unlink()
                live = await asyncio.wait_for(stream, RUN_BOUND_SECONDS)
                finished = (await client.get(run_path(run_id))).json()["data"]
                replay = await read_stream(client, f"{run_path(run_id)}/stream")
                async with FlowtrailClient(server.base_url, "test-key-all") as auditor:
                    audited = await audit(auditor, run_id)
                after = await start_report(client, "moons")
                after_stream = await asyncio.wait_for(read_stream(client, f"{run_path(after)}/stream"), RUN_BOUND_SECONDS)
        finally:
            await server.stop()
    log = server.log()
    print(f"\ndisk full: a create answered {refused.status_code} {refused.json().get('code')} in {refused_in:.2f} s; "
          f"reads {[r.status_code for r in reads]}; server CPU {busy:.0%} of a core while waiting; the run ended "
          f"{finished['status']}: {finished['error']!r}")
    assert refused.status_code == 503 and refused.json()["code"] == "STORE_UNAVAILABLE"
    assert refused_in < UNAVAILABLE_BOUND_SECONDS
    assert [r.status_code for r in reads] == [200, 200, 200]
    assert busy < BUSY_BOUND
    assert finished["status"] == "FAILED" and "unavailable" in finished["error"]
    assert live.ended and live.ids == replay.ids
    assert audited == 0
    assert after_stream.ended and after_stream.events[-1] == "workflow_complete"
    assert (tmp_path / "data").exists()
    assert not re.search(r"unhandled error on", log)
    assert len([line for line in log.splitlines() if OUTAGE_LINE in line]) <= 2
