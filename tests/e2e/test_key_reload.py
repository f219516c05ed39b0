"""Keys reloaded from the key file while the server runs: a removed or narrowed key loses access on its next request,
its open streams end, a broken file changes nothing, and no secret reaches the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from api.streams import ACCESS_ENDED
from engine.access import former_id
from tests.e2e.test_api_access import MILITARY_RUNS, REPORT_RUNS, RUN_ENDPOINTS, answer, create
from tests.support.api import open_visit, start_api_server
from tests.support.process import ServerProcess
from tests.support.server import RunningServer

SECRETS = ("ops-s3cret-4f1c9a7e", "team-s3cret-8b2d0e5a")
OPS = {"key": SECRETS[0], "id": "ops", "seesAllRuns": True}
TEAM = {"key": SECRETS[1], "id": "team", "workflowNames": ["military-analyze-agent", "report-pipeline"]}
NARROWED_TEAM = {**TEAM, "workflowNames": ["report-pipeline"]}
LAST_FRAME = ACCESS_ENDED.encode().decode().strip()


def write_keys(path: Path, *keys: dict[str, Any]) -> None:
    """Replace the key file whole, as an operator should (write beside it, then rename over it)."""
    beside = path.with_name(path.name + ".new")
    beside.write_text(json.dumps(list(keys)), encoding="utf-8")
    os.replace(beside, path)


class KeyedServer:
    """A server whose keys come from a key file the test rewrites."""

    def __init__(self, server: RunningServer, path: Path) -> None:
        self.server, self.path = server, path

    async def put_in_force(self, *keys: dict[str, Any]) -> None:
        """Rewrite the key file and reload it (what SIGHUP and the file watch do)."""
        write_keys(self.path, *keys)
        assert self.server.services.key_file is not None
        await self.server.services.key_file.reload()

    def client(self, key: dict[str, Any]) -> httpx.AsyncClient:
        return self.server.client(key=key["key"])


@pytest.fixture
async def keyed(store: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> AsyncIterator[KeyedServer]:
    """A server with the keys `ops` and `team` in a key file, every log line captured; no secret may be in them."""
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "keys.json"
    write_keys(path, OPS, TEAM)
    server = await start_api_server(store, tmp_path / "data", key_file=path, keepalive_seconds=0.2)
    try:
        yield KeyedServer(server, path)
    finally:
        await server.stop()
    for secret in SECRETS:
        assert secret not in caplog.text and all(secret not in str(record.args) for record in caplog.records)


class Follower:
    """One SSE response read line by line (comments included) until the server ends it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.live = asyncio.Event()

    async def read(self, response: httpx.Response) -> None:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            self.lines.append(line)
            self.live.set()

    @property
    def last(self) -> str:
        return [line for line in self.lines if line][-1]


async def started_run(keyed: KeyedServer) -> str:
    """A run of the military workflow that `team` created and started (it executes nothing: the engine is manual)."""
    run_id = await create(keyed.server, key=TEAM["key"])
    async with keyed.client(TEAM) as client:
        assert (await client.post(f"{MILITARY_RUNS}/{run_id}/start")).status_code == 200
    return run_id


async def test_a_key_removed_from_the_key_file_gets_401_on_its_next_request_without_a_restart(keyed):
    run_id = await create(keyed.server, key=TEAM["key"], base=REPORT_RUNS)
    await keyed.put_in_force(OPS)
    for method, path in RUN_ENDPOINTS:
        gone = await answer(keyed.server, TEAM["key"], method, path, run_id, base=REPORT_RUNS)
        assert (gone.status_code, gone.json()["code"]) == (401, "UNAUTHORIZED")
    async with keyed.client(OPS) as client:
        assert (await client.get(f"{REPORT_RUNS}/{run_id}")).status_code == 200


async def test_a_key_narrowed_in_the_key_file_gets_404_for_what_it_lost_on_its_next_request(keyed):
    run_id = await create(keyed.server, key=TEAM["key"])
    await keyed.put_in_force(OPS, NARROWED_TEAM)
    for method, path in RUN_ENDPOINTS:
        narrowed = await answer(keyed.server, TEAM["key"], method, path, run_id)
        assert (narrowed.status_code, narrowed.json()["code"]) == (404, "RUN_NOT_FOUND")
    async with keyed.client(TEAM) as client:
        refused = await client.post(MILITARY_RUNS, json={"variables": {"topic": "x"}})
        assert (refused.status_code, refused.json()["code"]) == (404, "WORKFLOW_NOT_FOUND")
        assert [w["workflowName"] for w in (await client.get("/api/v1/workflows")).json()["data"]] == ["report-pipeline"]


async def test_a_key_added_to_the_key_file_is_served_on_its_next_request(keyed):
    newcomer = {"key": "new-s3cret-77aa10c3", "id": "newcomer"}
    async with keyed.client(newcomer) as client:
        assert (await client.get("/api/v1/workflows")).status_code == 401
        await keyed.put_in_force(OPS, TEAM, newcomer)
        assert (await client.get("/api/v1/workflows")).status_code == 200


@pytest.mark.parametrize("change", [(OPS,), (OPS, NARROWED_TEAM), (OPS, {**TEAM, "key": "team-rotated-s3cret"})],
                         ids=["removed", "narrowed", "secret-changed"])
async def test_an_open_stream_of_a_key_that_lost_the_run_ends_with_a_comment_and_another_keys_stream_goes_on(
    keyed, change, store, measured,
):
    run_id = await started_run(keyed)
    path = f"{MILITARY_RUNS}/{run_id}/stream"
    team_stream, ops_stream = Follower(), Follower()
    async with keyed.client(TEAM) as team, keyed.client(OPS) as ops:
        async with team.stream("GET", path) as by_team, ops.stream("GET", path) as by_ops:
            team_reading = asyncio.create_task(team_stream.read(by_team))
            ops_reading = asyncio.create_task(ops_stream.read(by_ops))
            await asyncio.wait_for(asyncio.gather(team_stream.live.wait(), ops_stream.live.wait()), 30)
            reloaded = asyncio.get_running_loop().time()
            await keyed.put_in_force(*change)
            await asyncio.wait_for(team_reading, 30)
            ended = asyncio.get_running_loop().time() - reloaded
            assert team_stream.last == LAST_FRAME
            measured(f"[{store.split(':')[0]}] the stream ended {ended:.3f} s after the reload (keep-alive 0.2 s)")
            await open_visit(keyed.server.services, UUID(run_id))
            async with asyncio.timeout(30):
                while "event: node_status" not in ops_stream.lines:
                    await asyncio.sleep(0.02)
            assert not ops_reading.done()
            ops_reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ops_reading
        again = await team.get(path)
    assert again.status_code in (401, 404) and again.json()["code"] in ("UNAUTHORIZED", "RUN_NOT_FOUND")


async def test_a_blocking_creations_stream_of_a_removed_key_ends_with_a_comment(keyed):
    follower = Follower()
    async with keyed.client(TEAM) as team:
        body = {"variables": {"topic": "x"}, "async": False}
        async with team.stream("POST", MILITARY_RUNS, json=body) as response:
            reading = asyncio.create_task(follower.read(response))
            await asyncio.wait_for(follower.live.wait(), 30)
            await keyed.put_in_force(OPS)
            await asyncio.wait_for(reading, 30)
    assert follower.last == LAST_FRAME


async def test_a_broken_key_file_keeps_the_keys_in_force_and_the_log_says_why(keyed, caplog):
    broken = [
        b'[{"key": "team-s3cret-8b2d0e5a", "id": "team"',
        json.dumps([OPS, {"key": TEAM["key"]}]).encode(),
        json.dumps([OPS, {**TEAM, "scope": "all"}]).encode(),
        b"\xff\xfe not text",
    ]
    for content in broken:
        keyed.path.write_bytes(content)
        assert keyed.server.services.key_file is not None
        await keyed.server.services.key_file.reload()
        for key in (OPS, TEAM):
            async with keyed.client(key) as client:
                assert (await client.get("/api/v1/workflows")).status_code == 200
    keyed.path.unlink()
    await keyed.server.services.key_file.reload()
    refusals = [r.getMessage() for r in caplog.records if r.name == "flowtrail.keys" and r.levelno == logging.ERROR]
    assert len(refusals) == 5 and all("the 2 keys in force are kept" in line for line in refusals)
    assert "not a valid JSON list" in refusals[0] and "key 2 of 2 has no `id`" in refusals[1]
    assert "unknown field `scope`" in refusals[2] and "not UTF-8" in refusals[3] and "cannot read it" in refusals[4]


async def test_a_key_file_changed_on_disk_is_put_in_force_without_a_signal(store, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="flowtrail.keys")
    path = tmp_path / "keys.json"
    write_keys(path, OPS, TEAM)
    server = await start_api_server(store, tmp_path / "data", key_file=path, key_poll_seconds=0.05)
    try:
        write_keys(path, OPS)
        async with server.client(key=TEAM["key"]) as client:
            async with asyncio.timeout(30):
                while (await client.get("/api/v1/workflows")).status_code != 401:
                    await asyncio.sleep(0.05)
    finally:
        await server.stop()
    assert "API keys reloaded from" in caplog.text and "removed: team" in caplog.text


async def until_logged(server: ServerProcess, text: str) -> None:
    async with asyncio.timeout(30):
        while text not in server.log():
            await asyncio.sleep(0.05)


async def test_sighup_puts_the_key_file_in_force_and_the_log_names_key_ids_never_secrets(tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, OPS, TEAM)
    server = await ServerProcess(
        f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data", FLOWTRAIL_API_KEYS="",
        FLOWTRAIL_API_KEYS_FILE=str(path), FLOWTRAIL_API_KEYS_FILE_POLL_SECONDS="3600",
    ).start()
    try:
        async with server.client(key=TEAM["key"]) as team:
            assert (await team.get("/api/v1/workflows")).status_code == 200
            write_keys(path, OPS)
            assert server.process is not None
            server.process.send_signal(signal.SIGHUP)
            await until_logged(server, "API keys reloaded")
            assert (await team.get("/api/v1/workflows")).status_code == 401
        assert server.process.poll() is None
    finally:
        await server.stop()
    log = server.log()
    assert "removed: team" in log and OPS["key"] not in log and TEAM["key"] not in log


async def test_with_keys_in_the_variable_sighup_changes_nothing_and_a_kept_former_id_is_warned_of(tmp_path):
    upgraded = {"key": "legacy-s3cret-5d0c", "id": former_id("legacy-s3cret-5d0c")}
    server = await ServerProcess(
        f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data", FLOWTRAIL_API_KEYS=json.dumps([OPS, upgraded]),
    ).start()
    try:
        assert server.process is not None
        server.process.send_signal(signal.SIGHUP)
        await until_logged(server, "which a running process cannot re-read: nothing changed")
        async with server.client(key=upgraded["key"]) as client:
            assert (await client.get("/api/v1/workflows")).status_code == 200
        assert server.process.poll() is None
    finally:
        await server.stop()
    log = server.log()
    assert f"the API key '{upgraded['id']}' kept its former id" in log and upgraded["key"] not in log
