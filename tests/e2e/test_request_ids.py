"""Every request has an id over real HTTP on both stores: the caller's `X-Request-Id` (or a new one) is answered
back, written in the access log line, in the run's lifecycle lines and in the events the request caused."""

from __future__ import annotations

import logging
import re
from uuid import UUID

import pytest

from domain import events as ev
from tests.support.api import DEMO_KEY

RUNS = "/api/v1/workflows/military-analyze-agent/runs"


def lines(caplog, logger: str, msg: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.getMessage() == msg]


async def test_the_callers_request_id_is_answered_back_and_logged_with_the_request(api, caplog):
    caplog.set_level(logging.DEBUG)
    async with api.client(key=DEMO_KEY) as http:
        response = await http.get("/api/v1/workflows", headers={"X-Request-Id": "req-2026.12/a:b"})
    assert response.headers["x-request-id"] == "req-2026.12/a:b"
    assert any(getattr(r, "request_id", None) == "req-2026.12/a:b" for r in lines(caplog, "flowtrail.access", "request"))


@pytest.mark.parametrize("given", [None, "", "has space", "x" * 129, "na\xefve".encode("latin-1")])
async def test_a_request_without_an_acceptable_id_gets_a_new_one(api, given):
    headers = {} if given is None else {"X-Request-Id": given}
    async with api.client() as http:
        response = await http.get("/healthz", headers=headers)
        other = await http.get("/api/v1/workflows", headers=headers)
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
    assert other.headers["x-request-id"] != response.headers["x-request-id"]
    assert other.status_code == 401 and "x-request-id" in other.headers


async def test_the_events_a_request_caused_and_their_lifecycle_lines_carry_its_id(api, caplog):
    caplog.set_level(logging.INFO)
    async with api.client(key=DEMO_KEY) as http:
        created = await http.post(RUNS, json={"variables": {"topic": "x"}}, headers={"X-Request-Id": "create-1"})
        run_id = created.json()["data"]["runId"]
        await http.post(f"{RUNS}/{run_id}/start", headers={"X-Request-Id": "start-1"})
        await http.post(f"{RUNS}/{run_id}/cancel", headers={"X-Request-Id": "cancel-1"})
    events = await api.services.runs.events(UUID(run_id))
    by_type = {type(e): e for e in events}
    assert by_type[ev.RunCreated].request_id == "create-1"
    assert by_type[ev.RunStarted].request_id == "start-1"
    assert by_type[ev.RunCancelRequested].request_id == "cancel-1"
    logged = {r.getMessage(): getattr(r, "request_id", None) for r in caplog.records
              if r.name == "flowtrail.runs" and getattr(r, "run_id", None) == run_id}
    assert {k: v for k, v in logged.items() if k in ("run created", "run started", "run cancel requested")} == {
        "run created": "create-1", "run started": "start-1", "run cancel requested": "cancel-1",
    }
