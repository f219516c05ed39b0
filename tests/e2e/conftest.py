"""The e2e area: a real uvicorn server on a loopback port, real HTTP and SSE clients, server processes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.api import DEMO_KEY, start_api_server
from tests.support.engine_runs import engine_settings
from tests.support.server import RunningServer, server_settings
from tests.support.stores import drop_schema, store_url


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record of flowtrail's and uvicorn's loggers (uvicorn's do not reach the root logger)."""
    caplog.set_level(logging.INFO)
    uvicorn = logging.getLogger("uvicorn")
    uvicorn.addHandler(caplog.handler)
    yield caplog
    uvicorn.removeHandler(caplog.handler)


@pytest.fixture
async def server(store: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A real server on a loopback port over the test's store."""
    running = await RunningServer(server_settings(store, tmp_path / "data", keepalive_seconds=0.5)).start()
    yield running
    await running.stop()


@pytest.fixture
async def demo_server(store: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A real server over the test's store with the demo workflows published and the engine running them."""
    running = await RunningServer(engine_settings(store, tmp_path / "data", load_demos=True)).start()
    yield running
    await running.stop()


@pytest.fixture
async def postgres(tmp_path: Path) -> AsyncIterator[str]:
    """A fresh PostgreSQL schema's URL, for tests of several server processes (replicas) on one store."""
    url, schema = store_url("postgres", tmp_path)
    assert schema is not None
    yield url
    drop_schema(schema)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    """One API server per store kind for a whole test module (tests make their own runs).

    It has the seed's keys, the two test workflows and the hand-driven engine; a module's
    `pytest.mark.api(...)` passes keyword arguments to `start_api_server` (e.g. `uploads=...`).
    """
    marker = request.node.get_closest_marker("api")
    options = {"keepalive_seconds": 0.5, **(marker.kwargs if marker else {})}
    tmp = tmp_path_factory.mktemp(f"api-{request.param}")
    url, schema = store_url(request.param, tmp)
    running = await start_api_server(url, tmp / "data", **options)
    try:
        yield running
    finally:
        await running.stop()
        if schema is not None:
            drop_schema(schema)


@pytest.fixture
async def client(api: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's API server with the demo key; the engine a test swapped in is put back."""
    engine = api.services.engine
    async with api.client(key=DEMO_KEY) as http:
        yield http
    api.services.engine = engine
