"""A paused run survives a restart of the server and is followed to its end over HTTP."""

from __future__ import annotations

import json

from domain.run import RunStatus
from tests.support.engine_runs import engine_settings, start, wait_until
from tests.support.server import RunningServer
from tests.support.sse import read_stream


async def test_a_paused_run_survives_a_server_restart_and_continues_when_answered(store, tmp_path):
    settings = engine_settings(store, tmp_path / "data")
    first = await RunningServer(settings).start()
    try:
        run_id = await start(first.services, "demo-clarify", {"topic": "tides"})
        paused = await wait_until(first.services, run_id, RunStatus.PAUSED)
    finally:
        await first.stop()
    second = await RunningServer(settings).start()
    try:
        assert (await second.services.runs.state(run_id)).status is RunStatus.PAUSED
        assert await second.services.engine.answer(run_id, paused.pending_clarify.clarify_id, "bullet list") is True
        async with second.client() as client:
            got = await read_stream(client, f"/api/v1/workflows/demo-clarify/runs/{run_id.hex}/stream")
    finally:
        await second.stop()
    clarify = [d for d in got.data if d.get("kind") == "clarify_request"]
    assert got.ended and got.events[-1] == "workflow_complete"
    assert json.loads(clarify[0]["content"]) == {
        "clarify_id": paused.pending_clarify.clarify_id,
        "question": "Which format should the piece about tides use?",
        "choices": ["bullet list", "short paragraph"],
    }
    assert got.data[-1]["output"]["data"] == {
        "format": "bullet list", "text": "A short piece about tides, in the format the user chose."}
