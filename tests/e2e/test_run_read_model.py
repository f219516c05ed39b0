"""The stored run rows: audited like every projection, rebuilt by the CLI, fed by appends of other processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from uuid import uuid4

from domain import events as ev
from engine.readmodel import run_rows
from engine.readmodel.table import ROWS_TABLE
from engine.store import EventStore, parse_database_url
from tests.support.process import ROOT
from tests.support.runs import run_with_steps
from tests.support.server import RunningServer, free_port

KEY = "test-key-all"


async def flowtrail(url: str, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWTRAIL_DATABASE_URL": url, "FLOWTRAIL_PORT": str(port), "FLOWTRAIL_AUDIT_KEY": KEY}
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "scripts.cli", *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )


def drift_tokens(url: str, run_hex: str) -> None:
    """Change a stored row behind the read model's back."""
    store = EventStore(parse_database_url(url))
    try:
        rows = run_rows(store)
        table = ROWS_TABLE if store.location.kind == "sqlite" else f'"{store.location.schema}".{ROWS_TABLE}'
        mark = "?" if store.location.kind == "sqlite" else "%s"
        with rows.recorder.datastore.transaction(commit=True) as curs:
            curs.execute(f"UPDATE {table} SET prompt_tokens = 99 WHERE run_id = {mark}", (run_hex,))
    finally:
        store.close()


async def test_the_audit_compares_the_stored_row_and_a_rebuild_repairs_a_drifted_one(server):
    url, port = server.settings.store.database_url, server.settings.port
    run_id = await run_with_steps(server.services, 10)
    healthy = await flowtrail(url, port, "audit", run_id.hex)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    drift_tokens(url, run_id.hex)
    drifted = await flowtrail(url, port, "audit", run_id.hex)
    assert drifted.returncode == 1
    assert "DIFF $.runRow.promptTokens: rebuilt 0, served 99" in drifted.stdout
    rebuilt = await flowtrail(url, port, "rebuild-read-model")
    assert rebuilt.returncode == 0 and "rebuilt 1 run rows from the log" in rebuilt.stdout, rebuilt.stderr
    repaired = await flowtrail(url, port, "audit", run_id.hex)
    assert repaired.returncode == 0, repaired.stdout


async def test_rebuilding_the_read_model_of_a_missing_sqlite_file_says_so_and_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere.db"
    done = await flowtrail(f"sqlite:///{missing}", 1, "rebuild-read-model")
    assert done.returncode == 1 and "no event log" in done.stderr
    assert not missing.exists()


def append_created_elsewhere(url: str) -> str:
    """A run created by another writer of the same log (a store of its own, no read-model feed)."""
    store = EventStore(parse_database_url(url))
    run_id = uuid4()
    try:
        store.append_to_stream([ev.RunCreated(
            originator_id=run_id, originator_version=1, timestamp=datetime.now(UTC), workflow_id=7,
            workflow_name="elsewhere", workflow_version=1, display_name="Elsewhere", mode="DAG", caller_key_id="all",
        )])
    finally:
        store.close()
    return run_id.hex


async def listed_ids(server: RunningServer) -> list[str]:
    async with server.client(key=KEY) as http:
        return [i["runId"] for i in (await http.get("/api/v1/runs", params={"workflow": "elsewhere"})).json()["data"]["items"]]


async def test_a_run_another_process_appended_reaches_the_listing(server):
    url = server.settings.store.database_url
    run_hex = await asyncio.to_thread(append_created_elsewhere, url)
    if server.services.store.location.kind == "sqlite":
        # The embedded store has no subscriptions: a server catches up with the log when it starts.
        other = await RunningServer(replace(server.settings, port=free_port())).start()
        try:
            assert await listed_ids(other) == [run_hex]
        finally:
            await other.stop()
        return
    for _ in range(200):
        if await listed_ids(server) == [run_hex]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the runner never folded the other process's run")
