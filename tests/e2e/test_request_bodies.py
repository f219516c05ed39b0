"""Request bodies have a time bound: one that trickles is answered 408 in the envelope and nothing is stored; one
that keeps the minimum rate is served however long it takes (issue 22, decision 35).

The bound is the test's: FLOWTRAIL_BODY_TIMEOUT_SECONDS 1, plus a second for every 1,000 bytes
(FLOWTRAIL_BODY_MIN_BYTES_PER_SECOND); the defaults are in docs/operations.md. Runs are created through
the bodies_server protocol `flowtrail serve` uses, over bare sockets on loopback, on both stores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator

import pytest

from engine.limits import LimitSettings
from tests.support.api import REPORT, log_end
from tests.support.context_runs import linear_run
from tests.support.heads import Exchange, exchange, trickle
from tests.support.server import RunningServer, server_settings

pytestmark = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)

LIMITS = LimitSettings(body_timeout_seconds=1.0, body_min_bytes_per_second=1000)
RUNS = "/api/v1/workflows/report-pipeline/runs"
PACE = 0.25
"""Seconds between two bytes of a trickling body."""


@pytest.fixture
async def bodies_server(store: str, tmp_path) -> AsyncIterator[RunningServer]:
    settings = dataclasses.replace(server_settings(store, tmp_path / "data"), limits=LIMITS)
    running = RunningServer(settings)
    await running.start()
    await running.services.catalogue.publish(REPORT)
    yield running
    await running.stop()


def post(path: str, content_type: str, length: int, credential: str = "X-API-Key: test-key-all") -> bytes:
    """The head of a POST announcing a body of `length` bytes."""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{credential}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


MULTIPART_START = (b'--XYZ\r\nContent-Disposition: form-data; name="files"; filename="slow.txt"\r\n'
                   b"Content-Type: text/plain\r\n\r\n" + b"x" * 100)
TRICKLING = {
    "json": post(RUNS, "application/json", 100_000) + b'{"variables": {}}',
    "multipart": post(RUNS, "multipart/form-data; boundary=XYZ", 100_000) + MULTIPART_START,
}


def workspaces(server: RunningServer) -> list[str]:
    root = server.settings.workspaces_dir
    return [path.name for path in root.iterdir()] if root.is_dir() else []


async def left_nothing(server: RunningServer) -> bool:
    """True once the refused request's upload folder is gone (the app removes it when it sees the client gone)."""
    for _ in range(100):
        if not workspaces(server):
            return True
        await asyncio.sleep(0.05)
    return False


async def access_statuses(caplog: pytest.LogCaptureFixture) -> list[int | None]:
    """The statuses of the access log's records, once there is one: the app logs a request the server answered
    itself when it sees the client gone, which may be a moment after the client has the answer."""
    for _ in range(100):
        access = [record for record in caplog.records if record.name == "flowtrail.access"]
        if access:
            return [getattr(record, "status", None) for record in access]
        await asyncio.sleep(0.05)
    return []


def warnings_or_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


@pytest.mark.parametrize("kind", TRICKLING)
async def test_a_trickling_body_is_answered_408_and_nothing_is_stored(bodies_server, server_log, kind):
    before = await log_end(bodies_server.services)
    got: Exchange = await asyncio.to_thread(trickle, bodies_server.settings.port, TRICKLING[kind], pace=PACE)
    [answer] = got.answers
    assert (answer.status, answer.json()["code"], answer.json()["data"]) == (408, "REQUEST_TIMEOUT", None)
    assert "FLOWTRAIL_BODY_TIMEOUT_SECONDS" in answer.json()["message"] and got.closed
    assert await left_nothing(bodies_server)
    assert await log_end(bodies_server.services) == before
    assert await access_statuses(server_log) == [408]
    assert warnings_or_errors(server_log) == []


async def test_a_body_that_keeps_the_minimum_rate_is_served_past_the_timeout(bodies_server, server_log):
    body = b'{"variables": {}}'.ljust(8000)
    got: Exchange = await asyncio.to_thread(
        exchange, bodies_server.settings.port, post(RUNS, "application/json", len(body)) + body,
        piece=1000, pause=0.2, answers=1,
    )
    assert [answer.status for answer in got.answers] == [201]
    assert warnings_or_errors(server_log) == []


async def test_a_trickling_body_the_app_did_not_read_is_cut_after_its_answer(bodies_server, server_log):
    head = post("/api/v1/workflows/no-such-flow/runs", "application/json", 100_000)
    got: Exchange = await asyncio.to_thread(trickle, bodies_server.settings.port, head + b"{", pace=PACE)
    assert [answer.status for answer in got.answers] == [404] and got.closed
    assert "cut: its request body did not arrive in time" in server_log.text
    assert warnings_or_errors(server_log) == []


async def test_a_trickling_context_query_is_answered_408_in_the_context_envelope(bodies_server, server_log):
    example = await linear_run(bodies_server.services)
    token = bodies_server.services.tokens.issue(example.run_id, example.asker)
    head = post("/internal/context/output", "application/json", 10_000, f"X-Context-Token: {token}")
    got: Exchange = await asyncio.to_thread(trickle, bodies_server.settings.port, head + b'{"runId": "', pace=PACE)
    [answer] = got.answers
    assert (answer.status, answer.json()["code"], answer.json()["data"]) == (408, 408, None) and got.closed
    assert warnings_or_errors(server_log) == []
