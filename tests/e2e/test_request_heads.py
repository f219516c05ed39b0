"""Request heads past their limits are refused with 431/414 in the envelope, as their bytes arrive, and the
connection closed; heads at the limits are served (issue 22, decision 35).

Heads do not depend on the store: these tests run on SQLite, over bare sockets on loopback, with
the default limits (FLOWTRAIL_MAX_HEAD_BYTES 64 KiB, FLOWTRAIL_MAX_HEADER_LINE_BYTES 16 KiB,
FLOWTRAIL_MAX_HEADERS 100, FLOWTRAIL_MAX_URL_BYTES 8 KiB).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from engine.limits import LimitSettings
from tests.support.heads import (
    exchange,
    head,
    head_of_size,
    header_line,
    oversized_heads,
    read_answers,
    send,
    target_of_size,
)
from tests.support.pressure import rss_mib
from tests.support.process import ServerProcess
from tests.support.server import RunningServer, server_settings

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

LIMITS = LimitSettings()
HEADS = 100
HEAD_VALUE_BYTES = 4 * 1024 * 1024
"""The memory test's heads: 100 of 4 MiB each would be 400 MiB read whole."""


@pytest.fixture
async def heads_server(store: str, tmp_path) -> AsyncIterator[RunningServer]:
    running = RunningServer(server_settings(store, tmp_path / "data"))
    await running.start()
    yield running
    await running.stop()


def no_warning_or_error(caplog: pytest.LogCaptureFixture) -> bool:
    return not [record for record in caplog.records if record.levelno >= logging.WARNING]


async def talk(port: int, data: bytes, **options) -> object:
    return await asyncio.to_thread(exchange, port, data, **options)


OVER_THE_LIMITS = {
    "head": (head_of_size(LIMITS.max_head_bytes + 1), 431, "HEADERS_TOO_LARGE", "FLOWTRAIL_MAX_HEAD_BYTES"),
    "header lines": (head(lines=tuple(b"X-%d: 1" % i for i in range(LIMITS.max_headers))), 431,
                     "HEADERS_TOO_LARGE", "FLOWTRAIL_MAX_HEADERS"),
    "one line": (head(lines=(header_line("X-Long", LIMITS.max_header_line_bytes + 1),)), 431,
                 "HEADERS_TOO_LARGE", "FLOWTRAIL_MAX_HEADER_LINE_BYTES"),
    "target": (head(target_of_size(LIMITS.max_url_bytes + 1)), 414, "URI_TOO_LONG", "FLOWTRAIL_MAX_URL_BYTES"),
    "16 MiB value": (head(lines=(header_line("X-Big", 16 << 20),)), 431, "HEADERS_TOO_LARGE",
                     "FLOWTRAIL_MAX_HEAD_BYTES"),
}


@pytest.mark.parametrize("case", OVER_THE_LIMITS)
async def test_a_head_over_a_limit_is_refused_in_the_envelope_and_its_connection_closed(heads_server, server_log, case):
    data, status, code, setting = OVER_THE_LIMITS[case]
    got = await talk(heads_server.settings.port, data)
    [answer] = got.answers
    assert (answer.status, answer.json()["code"], answer.json()["data"]) == (status, code, None)
    assert setting in answer.json()["message"]
    assert answer.headers["connection"] == "close" and got.closed
    assert f"refused: {status} {code}" in server_log.text and no_warning_or_error(server_log)


MALFORMED = {
    "a control character in a header value": head(lines=(b"Last-Event-ID: 1\x01",)),
    "a space in a header name": head(lines=(b"Bad Name: 1",)),
    "a length that is no number": head(lines=(b"Content-Length: ten",)),
}


@pytest.mark.parametrize("case", MALFORMED)
async def test_a_malformed_request_is_refused_in_the_envelope_and_its_connection_closed(heads_server, case):
    got = await talk(heads_server.settings.port, MALFORMED[case])
    [answer] = got.answers
    assert (answer.status, answer.json()["code"]) == (400, "VALIDATION_FAILED")
    assert "not valid HTTP" in answer.json()["message"] and got.closed


AT_THE_LIMITS = {
    "head": head_of_size(LIMITS.max_head_bytes),
    "header lines": head(lines=tuple(b"X-%d: 1" % i for i in range(LIMITS.max_headers - 1))),
    "one line": head(lines=(header_line("X-Long", LIMITS.max_header_line_bytes),)),
    "target": head(target_of_size(LIMITS.max_url_bytes)),
}


@pytest.mark.parametrize("case", AT_THE_LIMITS)
async def test_a_head_at_a_limit_is_served(heads_server, server_log, case):
    got = await talk(heads_server.settings.port, AT_THE_LIMITS[case], answers=1)
    assert [answer.status for answer in got.answers] == [200] and not got.closed
    assert "refused" not in server_log.text and no_warning_or_error(server_log)


async def test_the_internal_context_api_is_refused_in_its_own_envelope(heads_server):
    got = await talk(heads_server.settings.port, head(target_of_size(LIMITS.max_url_bytes + 1, "/internal/context/path")))
    assert got.answers[0].status == 414 and got.answers[0].json()["code"] == 414


@pytest.mark.parametrize("piece", [None, 1024])
async def test_a_head_is_refused_as_soon_as_it_is_over_the_limit_not_when_it_ends(heads_server, piece):
    never_ending = head(lines=(header_line("X-Slow", LIMITS.max_head_bytes),), end=False)
    got = await talk(heads_server.settings.port, never_ending, piece=piece)
    assert got.answers[0].status == 431 and got.closed


async def test_each_request_on_a_kept_alive_connection_has_the_whole_head_limit(heads_server):
    data = head_of_size(LIMITS.max_head_bytes)
    got = await talk(heads_server.settings.port, data + data + data, answers=3)
    assert [answer.status for answer in got.answers] == [200, 200, 200] and not got.closed


async def test_a_head_refused_behind_a_pipelined_request_is_answered_after_it_and_the_connection_closed(heads_server):
    """The refusal is answered when the first response has ended by then; while that response is being sent,
    the connection closes after it, the refused request unanswered."""
    data = head() + head(lines=(header_line("X-Big", 1 << 20),), end=False)
    got = await talk(heads_server.settings.port, data)
    first, *rest = [answer.status for answer in got.answers]
    assert first == 200 and rest in ([], [431]) and got.closed


async def test_a_refused_connection_takes_no_more_requests(heads_server):
    def refused_then_more() -> object:
        import socket

        with socket.create_connection(("127.0.0.1", heads_server.settings.port)) as sock:
            send(sock, head(target_of_size(LIMITS.max_url_bytes + 1)), None, 0.0)
            send(sock, head(), None, 0.0)
            return read_answers(sock, None, 10.0)

    got = await asyncio.to_thread(refused_then_more)
    assert [answer.status for answer in got.answers] == [414] and got.closed


async def test_100_oversized_heads_leave_the_server_memory_as_it_was(store, tmp_path, measured):
    server = ServerProcess(store, tmp_path / "data")
    await server.start()
    try:
        assert server.process is not None
        pid = server.process.pid
        before = rss_mib(pid)
        got = await asyncio.to_thread(oversized_heads, server.port, HEADS, HEAD_VALUE_BYTES)
        after = rss_mib(pid)
        log = server.log()
    finally:
        await server.stop()
    sent_mib = HEADS * HEAD_VALUE_BYTES / (1 << 20)
    measured(f"[heads] {HEADS} heads of {HEAD_VALUE_BYTES >> 20} MiB at once ({sent_mib:.0f} MiB): server RSS "
             f"{before:.1f} -> {after:.1f} MiB ({after - before:+.1f})")
    assert [one.answers[0].status for one in got] == [431] * HEADS
    assert after - before < sent_mib / 10
    assert log.count("refused: 431 HEADERS_TOO_LARGE") == HEADS
    assert not [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line or "Traceback" in line]
