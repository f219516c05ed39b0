"""/healthz says the process answers; /readyz queries the store and answers 503 NOT_READY, naming why, when it is away."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.hermes.gateways import HermesGateway
from tests.support.server import RunningServer, free_port, server_settings
from tests.support.stores import drop_schema

pytestmark = pytest.mark.store


def schema_of(url: str) -> str | None:
    return url.partition("?schema=")[2] or None


def take_the_store_away(url: str) -> None:
    """SQLite: the file and its WAL are deleted (as a lost volume would); PostgreSQL: the test's schema is dropped
    (the shared cluster keeps running)."""
    schema = schema_of(url)
    if schema is not None:
        drop_schema(schema)
        return
    database = Path(url.removeprefix("sqlite:///"))
    for path in (database, database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")):
        path.unlink(missing_ok=True)


async def test_a_ready_server_says_its_store_answers_the_engine_takes_runs_and_which_models_it_has(server):
    async with server.client(key=None) as client:
        response = await client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["code"] == "OK"
    assert body["data"]["ready"] is True
    assert body["data"]["store"]["reachable"] is True
    assert body["data"]["engine"] == {"acceptingRuns": True}
    assert [model["id"] for model in body["data"]["models"]] == ["scripted"]


async def test_readiness_is_503_naming_the_store_when_the_store_is_away_while_liveness_stays_200(server, store):
    take_the_store_away(store)
    async with server.client(key=None) as client:
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["code"] == "NOT_READY"
    assert body["message"].startswith(f"store ({body['data']['store']['kind']}) unreachable: ")
    assert body["data"]["ready"] is False and body["data"]["store"]["reachable"] is False
    assert alive.status_code == 200 and alive.json()["data"]["status"] == "ok"


async def test_a_server_shutting_down_is_not_ready(server):
    server.services.hot_runs.close_streams()
    async with server.client(key=None) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert "does not accept runs" in response.json()["message"]


async def test_readiness_lists_each_hermes_gateway_probe_and_a_gateway_that_is_down_does_not_make_it_unready(
    store, tmp_path, monkeypatch,
):
    settings = server_settings(store, tmp_path / "data")
    monkeypatch.setenv("FLOWTRAIL_TEST_HERMES_KEY", "a-key-of-sixteen-chars")
    down = HermesGateway("research", f"http://127.0.0.1:{free_port()}", api_key_env="FLOWTRAIL_TEST_HERMES_KEY")
    settings = replace(settings, engine=replace(settings.engine, hermes_gateways=(down,)))
    running = await RunningServer(settings).start()
    try:
        async with running.client(key=None) as client:
            body = (await client.get("/readyz")).json()
    finally:
        await running.stop()
    assert body["data"]["ready"] is True
    assert [(g["id"], g["probe"]) for g in body["data"]["gateways"]] == [("research", "unreachable")]
