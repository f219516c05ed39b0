"""A replica killed with SIGKILL in the middle of an erasure leaves the run erased or not, never half of it; a second
DELETE after the restart erases it (or finds it erased), and it verifies either way."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID, uuid4

import httpx
import pytest

from domain import run as decide
from domain.chain import event_line
from domain.chain_check import check_lines
from engine.store import AsyncEventStore, EventStore, parse_database_url
from tests.support.killable import KillableServer

pytestmark = pytest.mark.store
CHUNKS = 20_000
MARKER = "SECRET-KILLED-MID-ERASURE"
ERASING = "erasing the content of"
"""What the server logs just before the erasure's transaction begins."""
AT = datetime(2026, 12, 1, tzinfo=UTC)


def big_ended_run(url: str) -> UUID:
    """An ended run of `CHUNKS` marked thinking chunks, owned by the test key `all`, written straight to the store."""
    store = EventStore(parse_database_url(url))
    run_id = uuid4()
    try:
        created = decide.create_run(run_id, AT, workflow_id=1, workflow_name="allowed-flow", workflow_version=1,
                                    display_name="Allowed", mode="DAG", variables={"topic": MARKER}, caller_key_id="all")
        run = decide.evolve(None, created)
        started = decide.start_run(run, AT)
        run = decide.evolve(run, started)
        visit = decide.start_visit(run, AT, visit_uuid="v1", node_id="n", node_type="agent", node_label="N",
                                   iter_seq=1, sort_order=1)
        run = decide.evolve(run, visit)
        store.append_to_stream([created, started, visit])
        for first in range(0, CHUNKS, 1000):
            pieces = [decide.StreamPiece(AT, "v1", "n", "step", f"{MARKER} {first + i} " + "x" * 200, None)
                      for i in range(1000)]
            chunks = decide.stream_chunks(run, pieces)
            store.append_to_stream(chunks)
            run = decide.evolve_all(run, chunks)
        done = decide.complete_visit(run, AT, visit_uuid="v1", node_id="n", output={"data": MARKER})
        run = decide.evolve(run, done)
        store.append_to_stream([done, decide.complete_run(run, AT, output={"data": MARKER})])
    finally:
        store.close()
    return run_id


async def stored(url: str, run_id: UUID) -> tuple[int, bool, list[bytes]]:
    """(events still holding the marker, whether RunErased is stored, the run's export lines)."""
    store = AsyncEventStore(EventStore(parse_database_url(url)))
    await store.start()
    try:
        lines = await store.read_lines(run_id)
    finally:
        await store.close()
    marked = sum(MARKER.encode() in state for _, state, _ in lines)
    erased = b'"type":"RunErased"' in lines[-1][1]
    return marked, erased, [event_line(state, cells) for _, state, cells in lines]


async def test_a_kill_in_the_middle_of_an_erasure_leaves_the_run_erased_or_untouched(store, tmp_path: Path, measured):
    run_id = await asyncio.to_thread(big_ended_run, store)
    server = KillableServer(store, tmp_path / "data")
    server.launch()
    await server.ready()
    path = f"/api/v1/workflows/allowed-flow/runs/{run_id.hex}"
    async with server.client() as client:
        erasing = asyncio.ensure_future(client.delete(path, timeout=60))
        await server.log_says(ERASING, 0, timeout=60)
        server.kill()
        with pytest.raises(httpx.TransportError):
            await erasing
    marked, erased, lines = await stored(store, run_id)
    assert (marked, erased) in ((0, True), (CHUNKS + 3, False)), (marked, erased)
    assert check_lines(lines).verified
    measured(f"killed mid-erasure ({CHUNKS + 5} events): the run was found {'erased' if erased else 'untouched'}")
    server.launch()
    await server.ready()
    async with server.client() as client:
        again = await client.delete(path, timeout=60)
    assert again.status_code == 200 and again.json()["data"]["outcome"] == ("ALREADY_ERASED" if erased else "ERASED")
    marked, erased, lines = await stored(store, run_id)
    assert (marked, erased) == (0, True)
    report = check_lines(lines)
    assert report.verified and len(report.erased) == CHUNKS + 3
    await server.stop()
