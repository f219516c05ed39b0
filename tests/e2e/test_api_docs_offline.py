"""/schema/swagger and /schema/redoc render in a headless Chromium that may reach nothing but this server."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.process import ServerProcess
from tests.support.server import RunningServer, server_settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync",
]
REDOCLY_BADGE = "https://cdn.redoc.ly/redoc/logo-mini.svg"
"""The "API docs by Redocly" footer image, built into ReDoc's bundle: decorative, the page renders without it."""
OPERATIONS = ("createRun", "startRun", "streamRun", "getRun", "cancelRun", "listWorkflows")


def require_chromium() -> None:
    """Skip without Chromium or Playwright, except under CI, where their absence is a failure."""
    missing = [] if shutil.which(CHROMIUM) else [CHROMIUM]
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package")
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{' and '.join(missing)} missing under CI (./test installs chromium with apt-get)")
    pytest.skip(f"{' and '.join(missing)} missing")


@pytest.fixture
async def docs_server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    require_chromium()
    running = await RunningServer(server_settings(f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data")).start()
    yield running
    await running.stop()


async def render_offline(server: RunningServer | ServerProcess, path: str, ready: str, selectors: dict[str, str],
                         screenshot: Path) -> tuple[list[str], dict[str, int]]:
    """Load `path` in Chromium refusing every host but the server's, wait for `ready`, count each selector's
    matches; (the URLs refused, the counts by name)."""
    from playwright.async_api import Route, async_playwright

    ours = urlsplit(server.base_url).netloc
    refused: list[str] = []

    async def only_this_server(route: Route) -> None:
        if urlsplit(route.request.url).netloc == ours:
            await route.continue_()
        else:
            refused.append(route.request.url)
            await route.abort()

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.route("**/*", only_this_server)
            await page.goto(f"{server.base_url}{path}")
            await page.wait_for_selector(ready, timeout=30_000)
            counts = {name: await page.locator(selector).count() for name, selector in selectors.items()}
            await page.screenshot(path=str(screenshot), full_page=True)
        finally:
            await browser.close()
    return refused, counts


async def test_swagger_ui_shows_the_operations_with_no_network_but_this_server(docs_server, tmp_path):
    refused, shown = await render_offline(
        docs_server, "/schema/swagger", "#operations-runs-createRun",
        {operation: f"[id$='-{operation}']" for operation in OPERATIONS}, tmp_path / "swagger.png",
    )
    assert refused == []
    assert all(count == 1 for count in shown.values()), shown


async def test_redoc_shows_the_operations_with_no_network_but_this_server(docs_server, tmp_path):
    refused, shown = await render_offline(
        docs_server, "/schema/redoc", "[id='operation/createRun']",
        {operation: f"[id='operation/{operation}']" for operation in OPERATIONS}, tmp_path / "redoc.png",
    )
    assert refused in ([], [REDOCLY_BADGE])
    assert all(count == 1 for count in shown.values()), shown
