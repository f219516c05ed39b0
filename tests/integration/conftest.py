"""The integration area: real stores, services built in-process with the real writer and engine, no HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from engine.bootstrap import Services
from engine.store import AsyncEventStore, EventStore, parse_database_url
from tests.support.engine_runs import engine_settings, running


@pytest.fixture
async def services(request: pytest.FixtureRequest, store: str, tmp_path: Path) -> AsyncIterator[Services]:
    """Started services (engine included) over the test's store, closed afterwards.

    A module or test configures them with `pytest.mark.services(...)`, whose keyword
    arguments go to `engine_settings` (e.g. `load_demos=False, node_timeout_seconds=5`).
    """
    marker = request.node.get_closest_marker("services")
    async with running(engine_settings(store, tmp_path / "data", **(marker.kwargs if marker else {}))) as started:
        yield started


@pytest.fixture
def log(store: str) -> Iterator[EventStore]:
    """The synchronous event store over the test's store, closed afterwards."""
    opened = EventStore(parse_database_url(store))
    yield opened
    opened.close()


@pytest.fixture
async def async_log(store: str) -> AsyncIterator[AsyncEventStore]:
    """The event store for async code over the test's store, started, closed afterwards."""
    opened = AsyncEventStore(EventStore(parse_database_url(store)))
    await opened.start()
    yield opened
    await opened.close()
