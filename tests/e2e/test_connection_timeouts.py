"""Idle and half-sent connections are closed after their timeouts; running out of file descriptors is said once
and the server recovers (issue 11).

Connections do not depend on the store: these tests run on SQLite. The timeouts are the
test's (1 s); the defaults are in README's settings table and docs/operations.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import resource
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from engine.limits import LimitSettings
from tests.support.pressure import connect, open_fds, request_head
from tests.support.process import ServerProcess
from tests.support.runs import new_run, open_visit
from tests.support.server import RunningServer, server_settings

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

TIMEOUT = 1.0
CONNECTIONS = 100
FD_TIMEOUT = 4.0
"""The header timeout of the file-descriptor test: the idle connections hold the descriptors this long."""


@pytest.fixture
async def timing_out(store: str, tmp_path) -> AsyncIterator[RunningServer]:
    settings = server_settings(store, tmp_path / "data", keepalive_seconds=0.5)
    limits = LimitSettings(idle_timeout_seconds=TIMEOUT, header_timeout_seconds=TIMEOUT)
    running = RunningServer(dataclasses.replace(settings, limits=limits))
    await running.start()
    yield running
    await running.stop()


async def closed_after(reader: asyncio.StreamReader, started: float, within: float = 10.0) -> float:
    """Seconds from `started` until the server closed the connection (whatever it sent before is skipped)."""
    async with asyncio.timeout(within):
        while await reader.read(65536):
            pass
    return time.monotonic() - started


async def idle(port: int, first_bytes: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sends `first_bytes` (maybe nothing, maybe a whole request) and then nothing more."""
    reader, writer = await connect(port)
    if first_bytes:
        writer.write(first_bytes)
    return reader, writer


async def test_idle_half_sent_and_kept_alive_connections_are_closed_after_their_timeouts(timing_out):
    port = timing_out.settings.port
    kinds = {
        "silent": b"",
        "half-sent head": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
        "kept alive after a request": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    }
    started = time.monotonic()
    readers = {kind: [await idle(port, first) for _ in range(CONNECTIONS)] for kind, first in kinds.items()}
    took = {kind: await asyncio.gather(*(closed_after(r, started) for r, _ in group)) for kind, group in readers.items()}
    for kind, times in took.items():
        print(f"\n[timeouts] {CONNECTIONS} {kind} connections: all closed, the last after {max(times):.2f} s "
              f"(timeout {TIMEOUT:g} s)", end="")
    assert all(max(times) < TIMEOUT + 3 for times in took.values())
    async with httpx.AsyncClient(base_url=timing_out.base_url) as client:
        assert (await client.get("/healthz")).status_code == 200


async def test_a_head_sent_in_pieces_within_the_timeout_is_answered_and_a_long_stream_is_not_cut(timing_out):
    port = timing_out.settings.port
    reader, writer = await connect(port)
    for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"\r\n"):
        writer.write(piece)
        await asyncio.sleep(TIMEOUT / 3)
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    writer.close()

    run_id = await new_run(timing_out.services)
    await open_visit(await timing_out.services.runs.writer(run_id))
    reader, writer = await connect(port)
    writer.write(request_head(f"/api/v1/workflows/allowed-flow/runs/{run_id.hex}/stream"))
    seen = b""
    async with asyncio.timeout(10):
        started = time.monotonic()
        while time.monotonic() - started < 3 * TIMEOUT:
            data = await reader.read(65536)
            assert data, "an open stream outlives the header and idle timeouts"
            seen += data
    assert seen.startswith(b"HTTP/1.1 200") and b": keep-alive" in seen
    writer.close()


async def test_running_out_of_file_descriptors_is_logged_once_and_the_server_recovers(store, tmp_path):
    server = ServerProcess(store, tmp_path / "data", FLOWTRAIL_HEADER_TIMEOUT_SECONDS=str(FD_TIMEOUT))
    await server.start()
    try:
        assert server.process is not None
        pid = server.process.pid
        in_use = open_fds(pid)
        hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 20, hard))
        flood = [await connect(server.port) for _ in range(60)]
        await asyncio.sleep(FD_TIMEOUT / 2)
        during = open_fds(pid)
        recovered_after = None
        async with httpx.AsyncClient(base_url=server.base_url, timeout=2.0) as client:
            started = time.monotonic()
            while time.monotonic() - started < 15:
                try:
                    if (await client.get("/healthz")).status_code == 200:
                        recovered_after = time.monotonic() - started
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.2)
            for _ in range(30):
                if "new connections are accepted" in server.log():
                    break
                await asyncio.sleep(0.2)
        for _, writer in flood:
            writer.close()
        log = server.log()
        print(f"\n[fds] limit {in_use + 20} ({in_use} in use at rest); 60 idle connections: {during} in use; "
              f"/healthz answered {recovered_after:.1f} s later; log:\n"
              + "\n".join(line for line in log.splitlines() if "file descriptors" in line))
        assert log.count("new connections are refused") == 1
        assert log.count("new connections are accepted") == 1
        assert recovered_after is not None
        assert "Traceback" not in log
    finally:
        await server.stop()
