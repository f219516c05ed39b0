"""Which store failures are an outage (retried, then 503 STORE_UNAVAILABLE) and how an outage is logged: once."""

from __future__ import annotations

import logging
import sqlite3

import asyncpg
import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, OperationalError

from api.errors import classify, handle_exception
from engine.store import ConcurrentAppend, StoreUnavailable, faults
from engine.store.faults import Outage, is_passing


def wrapped(cause: BaseException) -> OperationalError:
    """An error as the library raises it: its own type, the driver's error as the cause."""
    try:
        raise OperationalError(str(cause)) from cause
    except OperationalError as error:
        return error


@pytest.mark.parametrize("error", [
    wrapped(sqlite3.OperationalError("database or disk is full")),
    wrapped(sqlite3.OperationalError("attempt to write a readonly database")),
    wrapped(sqlite3.OperationalError("database is locked")),
    wrapped(sqlite3.OperationalError("disk I/O error")),
    wrapped(psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")),
    wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command")),
    asyncpg.CannotConnectNowError("the database system is shutting down"),
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.InterfaceError("connection is closed"),
    ConnectionRefusedError(111, "Connect call failed"),
    TimeoutError(),
], ids=lambda error: f"{type(error).__name__}({error})"[:60])
def test_the_store_being_away_or_unable_to_write_for_now_is_an_outage(error):
    assert is_passing(error)


@pytest.mark.parametrize("error", [
    wrapped(sqlite3.OperationalError("no such table: flowtrail_events")),
    IntegrityError("duplicate key value violates unique constraint"),
    ConcurrentAppend("stream 1 already has position 2"),
    ValueError("not a store failure"),
    FileNotFoundError("/nowhere"),
], ids=lambda error: f"{type(error).__name__}({error})"[:60])
def test_a_refusal_or_a_bug_is_not_an_outage(error):
    assert not is_passing(error)


def test_store_unavailable_answers_503_with_its_code_and_a_retry_after_and_logs_no_traceback(caplog):
    error = StoreUnavailable("the event store is unavailable (OperationalError: disk full); try again later")
    assert classify(error) == (503, "STORE_UNAVAILABLE", error.message)

    class Request:
        method, url = "GET", type("Url", (), {"path": "/api/v1/runs"})()

    with caplog.at_level(logging.DEBUG, logger="flowtrail.api"):
        answer = handle_exception(Request(), error)  # only method and path are read
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
    assert answer.content == {"code": "STORE_UNAVAILABLE", "message": error.message, "data": None}
    assert not caplog.records


def test_an_outage_is_logged_once_when_it_begins_and_once_when_the_store_has_answered_for_a_while(
    caplog, monkeypatch,
):
    now = [100.0]
    monkeypatch.setattr(faults.time, "monotonic", lambda: now[0])
    outage = Outage()
    with caplog.at_level(logging.WARNING, logger="flowtrail.store"):
        for _ in range(50):
            outage.failed(ConnectionRefusedError(), "append")
            now[0] += 0.1
        outage.succeeded()  # the server answers once, then a stale connection fails again
        now[0] += 0.5
        outage.failed(ConnectionRefusedError(), "read")
        now[0] += 0.1
        outage.succeeded()
        assert outage.ongoing
        now[0] += faults.SETTLE_SECONDS
        outage.succeeded()
        outage.succeeded()
    assert not outage.ongoing
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "the event store is unavailable", "the event store answers again after 5.6 s unavailable",
    ]
