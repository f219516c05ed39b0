"""Fixtures every area of the suite shares: the event store, the fake OpenAI server and the Hermes gateway plugins.

The areas: `unit/` (pure, no store, no network, no service threads), `integration/` (real
stores and services built in-process, no HTTP server), `e2e/` (a real server over HTTP).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.stores import drop_schema, store_url

pytest_plugins = ["tests.fakes.openai_server", "tests.support.hermes_gateway"]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty event store URL; every store-dependent test runs once per kind."""
    url, schema = store_url(request.param, tmp_path)
    yield url
    if schema is not None:
        drop_schema(schema)


@pytest.fixture
def measured(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Print a figure the test measured; the end of the run repeats every figure under "measured figures"."""
    def say(line: str) -> None:
        request.node.user_properties.append(("measured", line))
        print(line)
    return say


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """List the figures tests measured (also from xdist workers: they come with each test's report)."""
    lines = [
        f"{report.nodeid}: {value}"
        for category in ("passed", "failed", "xfailed", "xpassed")
        for report in terminalreporter.stats.get(category, [])
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "measured"
    ]
    if lines:
        terminalreporter.section("measured figures")
        for line in lines:
            terminalreporter.line(line)
