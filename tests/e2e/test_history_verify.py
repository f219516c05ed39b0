"""An export verifies offline, with `flowtrail verify` and with a verifier written from the docs alone; one stored
event changed in the database (its payload, its type, its place, removed, or one added) is named at its exact
position, and nothing else is."""

from __future__ import annotations

import ast
import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from flowtrail_client import FlowtrailClient
from tests.support.api import DEMO_KEY
from tests.support.process import ROOT
from tests.support.runs import run_with_steps
from tests.support.tamper import Table

pytestmark = pytest.mark.store
INDEPENDENT = ROOT / "tests" / "support" / "independent_chain_check.py"
STEPS = 5
"""The run: 1 RunCreated, 2 RunStarted, 3 VisitStarted, 4-8 five NodeStreamed, 9 VisitCompleted, 10 VisitRecorded,
11 RunCompleted."""


def command(*args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


async def verify(path: Path) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(command, "-m", "scripts.cli", "verify", str(path))


async def independent(path: Path) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(command, str(INDEPENDENT), str(path))


async def export(server: Any, run_id: UUID, path: Path) -> FlowtrailClient:
    async with FlowtrailClient(server.base_url, DEMO_KEY) as client:
        with path.open("wb") as out:
            async for line in client.events(run_id.hex):
                out.write(line.raw + b"\n")
        return client


def reported(done: subprocess.CompletedProcess[str]) -> set[int]:
    return {int(found) for found in re.findall(r"^position (\d+):", done.stdout, re.MULTILINE)}


def test_the_independent_verifier_imports_nothing_of_the_service():
    tree = ast.parse(INDEPENDENT.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(tree))
    assert imported == {"hashlib", "json", "sys"}


async def test_an_export_verifies_offline_and_its_head_is_the_runs_receipt(api, tmp_path):
    run_id = await run_with_steps(api.services, STEPS)
    path = tmp_path / "run.jsonl"
    await export(api, run_id, path)
    async with FlowtrailClient(api.base_url, DEMO_KEY) as client:
        head = (await client.get(run_id.hex)).chain
    assert head is not None and head.position == 11
    done = await verify(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == f"run {run_id.hex}: 11 events, head {head.link} at position 11"
    assert "OK: every event verifies" in done.stdout
    theirs = await independent(path)
    assert (theirs.returncode, theirs.stdout.split()) == (0, ["OK", run_id.hex, "11", head.link])


# --- changes made straight in the database --------------------------------------------------------------------


def change_payload(table: Table, run_id: UUID) -> None:
    table.set_state(run_id, 5, table.state(run_id, 5).replace(b"iteration", b"iterati0n"))


def change_type(table: Table, run_id: UUID) -> None:
    state = table.state(run_id, 9).replace(b'"type":"VisitCompleted"', b'"type":"VisitRecorded"')
    table.set_state(run_id, 9, state, "VisitRecorded")


def swap_order(table: Table, run_id: UUID) -> None:
    table.move(run_id, 5, -5)
    table.move(run_id, 6, 5)
    table.move(run_id, -5, 6)


def delete_event(table: Table, run_id: UUID) -> None:
    table.run("DELETE FROM {t} WHERE originator_id = %s AND originator_version = 6", table.key(run_id))


def insert_event(table: Table, run_id: UUID) -> None:
    forged = table.state(run_id, 11).replace(b'"originator_version":11', b'"originator_version":12')
    link = table.run("SELECT chain_link FROM {t} WHERE originator_id = %s AND originator_version = 11",
                     table.key(run_id))[0][0]
    table.run("INSERT INTO {t} (originator_id, originator_version, topic, state, chain_link) "
              "VALUES (%s, 12, 'RunCompleted', %s, %s)", table.key(run_id), forged, link)


TAMPERING: list[tuple[Callable[[Table, UUID], None], set[int]]] = [
    (change_payload, {5}), (change_type, {9}), (swap_order, {5}), (delete_event, {6}), (insert_event, {12}),
]


@pytest.mark.parametrize(("tamper", "positions"), TAMPERING, ids=[t.__name__ for t, _ in TAMPERING])
async def test_one_event_changed_in_the_database_is_named_at_its_position_and_nothing_else_is(
    api, tmp_path, tamper, positions,
):
    run_id = await run_with_steps(api.services, STEPS)
    tamper(Table(api.services), run_id)
    path = tmp_path / "run.jsonl"
    await export(api, run_id, path)
    done = await verify(path)
    assert done.returncode == 1 and reported(done) == positions, done.stdout
    assert done.stdout.splitlines()[-1].endswith(f"the first at position {min(positions)}")
    theirs = await independent(path)
    assert theirs.returncode == 1 and {int(p) for p in re.findall(r"BAD (\d+)", theirs.stdout)} == positions


async def test_the_audit_checks_the_chain_and_names_a_changed_event(api):
    run_id = await run_with_steps(api.services, STEPS)
    clean = await asyncio.to_thread(command, "-m", "scripts.cli", "audit", run_id.hex, "--url", api.base_url, "--key", DEMO_KEY)
    assert clean.returncode == 0 and "hash chain head " in clean.stdout, clean.stdout + clean.stderr
    change_payload(Table(api.services), run_id)
    done = await asyncio.to_thread(command, "-m", "scripts.cli", "audit", run_id.hex, "--url", api.base_url, "--key", DEMO_KEY)
    assert done.returncode == 1
    assert "DIFF $.chain: position 5: does not match its link" in done.stdout
