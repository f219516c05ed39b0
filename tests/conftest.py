"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.server import RunningServer, server_settings
from tests.support.stores import drop_schema, store_url

pytest_plugins = ["tests.fakes.openai_server"]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty event store URL; every store-dependent test runs once per kind."""
    url, schema = store_url(request.param, tmp_path)
    yield url
    if schema is not None:
        drop_schema(schema)


@pytest.fixture
async def server(store: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A real server on a loopback port over the test's store."""
    running = await RunningServer(server_settings(store, tmp_path / "data", keepalive_seconds=0.5)).start()
    yield running
    await running.stop()
