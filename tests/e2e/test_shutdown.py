"""A stop signal ends a server process cleanly: open streams get a last frame and a proper end, every event a client
saw is in the store, the process exits 0 within its grace period without a traceback, and the runs it was executing
go on after a restart (a client resuming with its last id gets exactly the rest of the stored stream)."""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from api.streams import SHUTTING_DOWN
from tests.support.process import ServerProcess
from tests.support.sse import read_stream

pytestmark = pytest.mark.store

GRACE_SECONDS = 3
EXIT_BOUND_SECONDS = GRACE_SECONDS + 20
"""The process must have exited by then (its grace period plus slack for a loaded machine); the real time is printed."""
LAST_FRAME = SHUTTING_DOWN.encode().decode().strip()


@dataclass
class OpenStream:
    """A raw SSE connection: the lines it received, set `flowing` once two messages came."""

    path: str
    lines: list[str] = field(default_factory=list)
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    ended_at: float | None = None

    @property
    def last_id(self) -> int:
        return max(int(line.removeprefix("id: ")) for line in self.lines if line.startswith("id: "))

    @property
    def messages(self) -> list[tuple[int, str, dict[str, Any]]]:
        """The `(id, event, data)` of every message received (comments left out)."""
        found: list[tuple[int, str, dict[str, Any]]] = []
        fields: dict[str, str] = {}
        for line in [*self.lines, ""]:
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields:
                found.append((int(fields["id"]), fields.get("event", "message"), json.loads(fields["data"])))
                fields = {}
        return found

    async def read(self, client: httpx.AsyncClient) -> None:
        """Read until the server ends the response (an unclean end raises)."""
        async with client.stream("GET", self.path, timeout=httpx.Timeout(30.0, read=60.0)) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                self.lines.append(line)
                if sum(text.startswith("id: ") for text in self.lines) >= 2:
                    self.flowing.set()
        self.ended_at = asyncio.get_running_loop().time()


def demo_server(store: str, tmp_path) -> ServerProcess:
    return ServerProcess(
        store, tmp_path / "data", FLOWTRAIL_LOAD_DEMOS="true", FLOWTRAIL_SCRIPTED_PACE_SECONDS="0.02",
        FLOWTRAIL_SHUTDOWN_GRACE_SECONDS=str(GRACE_SECONDS),
    )


async def start_report(client: httpx.AsyncClient, topic: str) -> str:
    created = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": topic}})
    run_id = created.json()["data"]["runId"]
    assert (await client.post(f"/api/v1/workflows/demo-report/runs/{run_id}/start")).status_code == 200
    return run_id


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_signal_ends_streams_cleanly_exits_0_and_the_runs_go_on_after_a_restart(
    store, tmp_path, stop, measured,
):
    server = await demo_server(store, tmp_path).start()
    async with server.client() as client:
        run_ids = [await start_report(client, topic) for topic in ("tides", "moons")]
        streams = [OpenStream(f"/api/v1/workflows/demo-report/runs/{run_id}/stream") for run_id in run_ids]
        reading = [asyncio.create_task(stream.read(client)) for stream in streams]
        await asyncio.wait_for(asyncio.gather(*(stream.flowing.wait() for stream in streams)), 30)
        assert server.process is not None
        signalled = asyncio.get_running_loop().time()
        server.process.send_signal(stop)
        status = await asyncio.to_thread(server.process.wait, EXIT_BOUND_SECONDS)
        exited = asyncio.get_running_loop().time()
        await asyncio.gather(*reading)
    log = server.log()
    assert status == 0
    assert "Traceback" not in log
    for stream in streams:
        assert [line for line in stream.lines if line][-1] == LAST_FRAME
        assert "event: workflow_complete" not in stream.lines
    ended_after = [stream.ended_at - signalled for stream in streams if stream.ended_at is not None]
    measured(f"{stop.name} [{store.split(':')[0]}] with {len(streams)} open streams and runs in flight: streams ended "
             f"{max(ended_after):.3f} s and the process exited {exited - signalled:.2f} s after the signal "
             f"(grace {GRACE_SECONDS} s)")
    assert exited - signalled < GRACE_SECONDS + 5

    await server.start()
    try:
        async with server.client() as client:
            rest = [await read_stream(client, s.path, last_event_id=s.last_id) for s in streams]
            stored = [await read_stream(client, s.path) for s in streams]
    finally:
        await server.stop()
    for stream, got, full in zip(streams, rest, stored):
        assert got.ended and got.events[-1] == "workflow_complete"
        seen = stream.messages
        assert seen == list(zip(full.ids, full.events, full.data))[:len(seen)], "a message the client saw is not stored"
        assert seen + list(zip(got.ids, got.events, got.data)) == list(zip(full.ids, full.events, full.data))
    assert server.log().count("recovering run") == 2
