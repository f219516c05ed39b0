"""Refusals of the internal context API: each one answers its code, leaks no data, and no token is ever kept."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
import pytest
from psycopg import sql

from domain import run as decide
from engine.context.tokens import TooManyTokens
from engine.loopback import is_loopback_address
from engine.settings import ContextSettings
from tests.support.context_runs import ContextClient, join_run, linear_run
from tests.support.server import RunningServer, server_settings
from tests.support.stores import PG_BASE

SECRETS_OF_THE_RUN = ("hello", "调用成功", "第一步", "结果摘要", "任务A")


@contextlib.asynccontextmanager
async def context_server(store: str, data_dir: Path, **context):
    """A real server whose context settings differ from the defaults."""
    settings = replace(server_settings(store, data_dir), context=ContextSettings(**context))
    running = await RunningServer(settings).start()
    try:
        yield running
    finally:
        await running.stop()


def assert_refused(response: httpx.Response, code: int, message: str | None = None) -> None:
    assert response.status_code == code
    body = response.json()
    assert body["code"] == code and body["data"] is None
    if message is not None:
        assert body["message"] == message
    assert not any(secret in response.text for secret in SECRETS_OF_THE_RUN)


async def test_a_request_without_a_token_is_unauthorized(server):
    example = await linear_run(server.services)
    async with ContextClient(server.base_url, example.run_id, None) as client:
        for what in ("path", "output", "meta"):
            assert_refused(await client.post(what, nodeId="B"), 401, "missing or malformed context token")


async def test_a_token_that_was_never_issued_is_unauthorized(server):
    example = await linear_run(server.services)
    async with ContextClient(server.base_url, example.run_id, "0123456789abcdef" * 3) as client:
        assert_refused(await client.post("output", nodeId="B"), 401, "invalid context token")


async def test_a_token_in_the_query_string_is_not_accepted(server):
    example = await linear_run(server.services)
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        response = await client.post(f"/internal/context/output?X-Context-Token={token}&token={token}",
                                     json={"runId": example.run_id.hex, "nodeId": "B"})
    assert_refused(response, 401)


TTL = 1.5
"""Long enough for the first query to land inside the token's life on a loaded machine (0.2 s was not)."""


async def test_an_expired_token_is_unauthorized(store, tmp_path):
    async with context_server(store, tmp_path / "data", token_ttl_seconds=TTL) as server:
        example = await linear_run(server.services)
        token = server.services.tokens.issue(example.run_id, example.asker)
        async with ContextClient(server.base_url, example.run_id, token) as client:
            assert (await client.post("output", nodeId="B")).status_code == 200
            await asyncio.sleep(TTL + 0.1)
            assert_refused(await client.post("output", nodeId="B"), 401, "context token expired")


async def test_a_token_of_another_run_is_forbidden(server):
    mine, other = await linear_run(server.services), await linear_run(server.services)
    token = server.services.tokens.issue(mine.run_id, mine.asker)
    async with ContextClient(server.base_url, other.run_id, token) as client:
        for what in ("path", "output", "meta"):
            response = await client.post(what, nodeId="B", visitUuid="v2")
            assert_refused(response, 403, "runId does not match the context token")


async def test_a_visit_cannot_read_a_visit_that_comes_after_it(server):
    example = await join_run(server.services)  # D asks; E came after D
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        later = await client.post("output", nodeId="E")
        missing = await client.post("output", nodeId="Z")
        assert_refused(later, 404, "node E has no visit")
        assert missing.json()["message"] == "node Z has no visit"
        assert_refused(await client.post("meta", visitUuid="e"), 404, "visit e not found")
        assert (await client.post("meta", visitUuid="nope")).json()["message"] == "visit nope not found"
        assert_refused(await client.post("path", visitUuid="e"), 404, "visit e not found")
        assert_refused(await client.post("output", nodeId="D"), 404, "node D has no visit")


async def test_an_earlier_visits_path_is_readable_but_stops_at_that_visit(server):
    example = await join_run(server.services)
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        data = (await client.post("path", visitUuid="b")).json()["data"]
    assert data["visitUuids"] == ["a", "b"]


async def test_a_token_is_refused_once_its_visit_has_ended(server):
    example = await linear_run(server.services)
    services = server.services
    token = services.tokens.issue(example.run_id, example.asker)
    writer = await services.runs.writer(example.run_id)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        assert (await client.post("output", nodeId="B")).status_code == 200
        await writer.decide(lambda run, at: decide.complete_visit(
            run, at, visit_uuid="v4", node_id="G", output={"status": 200, "message": "ok", "data": {}}))
        services.tokens.invalidate_visit(example.run_id, example.asker)
        assert_refused(await client.post("output", nodeId="B"), 401, "invalid context token")


async def test_a_token_whose_visit_ended_without_invalidation_is_refused_and_dropped(server):
    example = await linear_run(server.services)
    services = server.services
    token = services.tokens.issue(example.run_id, example.asker)
    writer = await services.runs.writer(example.run_id)
    await writer.decide(lambda run, at: decide.fail_visit(run, at, visit_uuid="v4", node_id="G", error="boom"))
    async with ContextClient(server.base_url, example.run_id, token) as client:
        assert_refused(await client.post("output", nodeId="B"), 401, "the context token's visit has ended")
        assert_refused(await client.post("output", nodeId="B"), 401, "invalid context token")


async def test_a_fifth_live_token_for_one_visit_is_refused_and_the_four_still_work(server):
    example = await linear_run(server.services)
    tokens = [server.services.tokens.issue(example.run_id, example.asker) for _ in range(4)]
    with pytest.raises(TooManyTokens):
        server.services.tokens.issue(example.run_id, example.asker)
    for token in tokens:
        async with ContextClient(server.base_url, example.run_id, token) as client:
            assert (await client.post("output", nodeId="B", field="result")).json()["data"]["data"] == "hello"


@pytest.mark.parametrize("what,body,message", [
    ("output", b"{not json", "invalid request body: JSON is malformed: object keys must be strings (byte 1)"),
    ("output", b'{"nodeId": "B"}', "invalid request body: Object missing required field `runId`"),
    ("output", b'{"runId": "R", "nodeId": "B", "iterSeq": 0}',
     "invalid request body: Expected `int` >= 1 - at `$.iterSeq`"),
    ("meta", b'{"runId": "R", "nodeId": "B", "kind": "SECRETS"}', None),
    ("meta", b'{"runId": "R", "kind": "ALL"}', "a meta query needs a visitUuid or a nodeId"),
    ("output", b'{"runId": "R", "nodeId": "B", "field": ' + b"[" * 1000 + b"]" * 1000 + b"}",
     "invalid request body: arrays and objects nest deeper than 64 levels"),
])
async def test_a_malformed_body_is_a_bad_request(server, what, body, message):
    example = await linear_run(server.services)
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with httpx.AsyncClient(base_url=server.base_url, headers={"X-Context-Token": token}) as client:
        content = body.replace(b'"R"', f'"{example.run_id.hex}"'.encode())
        response = await client.post(f"/internal/context/{what}", content=content)
    assert_refused(response, 400, message)


async def test_a_body_over_16_kb_is_refused(server):
    example = await linear_run(server.services)
    token = server.services.tokens.issue(example.run_id, example.asker)
    async with ContextClient(server.base_url, example.run_id, token) as client:
        assert_refused(await client.post("output", nodeId="B", field="x" * 20_000), 413)


async def test_a_malformed_body_without_a_token_is_only_unauthorized(server):
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        assert_refused(await client.post("/internal/context/output", content=b"{not json"), 401)


async def test_the_disabled_switch_answers_503_issues_no_token_offers_no_tools_and_runs_still_work(store, tmp_path):
    async with context_server(store, tmp_path / "data", enabled=False) as server:
        example = await linear_run(server.services)
        assert server.services.tokens.issue(example.run_id, example.asker) is None
        assert server.services.context_tools.open(example.run_id, example.asker) is None
        async with ContextClient(server.base_url, example.run_id, "ab" * 24) as client:
            for what in ("path", "output", "meta"):
                assert_refused(await client.post(what, nodeId="B"), 503, "context query is disabled")
        assert len((await server.services.runs.hot(example.run_id)).sse.index) == 4


async def test_the_endpoints_are_not_in_the_external_openapi_document(server):
    async with server.client() as client:
        schema = (await client.get("/schema/openapi.json")).json()
    assert not any(path.startswith("/internal") for path in schema["paths"])


async def test_unknown_routes_and_methods_under_the_prefix_answer_in_the_internal_envelope(server):
    async with server.client() as client:
        unknown = [await client.post(path, json={}) for path in
                   ("/internal/context/paths", "/internal/context/", "/internal/context", "/internal/context/path/x")]
        wrong_methods = [await client.request(method, "/internal/context/path") for method in ("GET", "PUT", "DELETE")]
        outside = await client.post("/internal/contextual", json={})
    for response in unknown:
        assert response.status_code == 404 and response.json() == {"code": 404, "message": "not found", "data": None}
    for response in wrong_methods:
        assert response.status_code == 405
        assert response.json() == {"code": 405, "message": "method not allowed (the context API answers POST)", "data": None}
    assert outside.status_code == 404 and outside.json()["code"] == "NOT_FOUND"


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("10.0.0.7", False), ("192.168.1.2", False), ("::ffff:10.0.0.7", False), ("localhost", False), (None, False),
])
def test_only_loopback_peers_may_ask(host, loopback):
    assert is_loopback_address(host) is loopback


async def test_no_token_ever_reaches_a_log_line_or_the_store(server, store, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    services = server.services
    example = await linear_run(services)
    token = services.tokens.issue(example.run_id, example.asker)
    box = services.context_tools.toolbox(example.run_id, example.asker, token)
    results = [
        await box.call("get_predecessor_paths", {}),
        await box.call("get_node_output", {"node_id": "B"}),
        await box.call("get_node_meta", {"node_id": "B", "kind": "ALL"}),
        await box.call("get_node_output", {"node_id": "E"}),
    ]
    await box.aclose()
    async with ContextClient(server.base_url, example.run_id, token) as client:
        await client.post("output", nodeId="B", runId="0" * 32)
    writer = await services.runs.writer(example.run_id)
    await writer.decide(lambda run, at: decide.complete_visit(
        run, at, visit_uuid="v4", node_id="G", output={"status": 200, "message": "ok", "data": {"r": results[1]}}))
    services.tokens.invalidate_visit(example.run_id, example.asker)
    await services.runs.release(example.run_id)
    assert '"hello"' in results[1] and "error" in results[3]
    assert caplog.records and token not in caplog.text
    assert all(token not in str(record.args) for record in caplog.records)
    stored = stored_bytes(store, tmp_path)
    assert b"hello" in stored and token.encode() not in stored


def stored_bytes(store: str, tmp_path: Path) -> bytes:
    """Every byte the store holds: the SQLite files, or every row of every table of the PostgreSQL schema."""
    if store.startswith("sqlite"):
        files = [path for path in tmp_path.rglob("*") if path.is_file()]
        return b"".join(path.read_bytes() for path in files)
    schema = parse_qs(urlsplit(store).query)["schema"][0]
    chunks = []
    with psycopg.connect(PG_BASE) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            for row in conn.execute(query):
                chunks += [bytes(col) if isinstance(col, (bytes, memoryview)) else str(col).encode() for col in row]
    assert chunks
    return b"".join(chunks)
