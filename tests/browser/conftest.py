"""The browser area: the run viewer in Debian's headless Chromium (driven by Playwright), against a real server.

The browser is /usr/bin/chromium, never a downloaded one. Without it (or without the playwright
package) these tests skip, except under `CI`, where that is a failure. Screenshots of every
state go to `.artifacts/ui/` (git-ignored).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, SHOTS
from tests.support.engine_runs import engine_settings
from tests.support.server import RunningServer, server_settings
from tests.support.stores import store_url


def _playwright() -> Any:
    if not Path(CHROMIUM).exists():
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            reason = "the playwright package is not installed (pip install -e '.[test]')"
        else:
            return async_playwright
    if os.environ.get("CI"):
        pytest.fail(f"browser tests cannot run under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    """One headless Chromium for the whole session."""
    async with _playwright()() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield chromium
        await chromium.close()


@pytest.fixture
async def viewer_server(store: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A real server over the test's store with the demo workflows and the engine running them."""
    running = await RunningServer(engine_settings(store, tmp_path / "data", load_demos=True)).start()
    yield running
    await running.stop()


@pytest.fixture
async def files_server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A real server for what does not depend on the store (the page's files): SQLite."""
    url, _ = store_url("sqlite", tmp_path)
    running = await RunningServer(server_settings(url, tmp_path / "data")).start()
    yield running
    await running.stop()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    """A fresh page (its own session storage) at 1280x800 that fails the test on a script error."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    await context.close()
    assert errors == [], f"script errors on the page: {errors}"
