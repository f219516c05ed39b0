"""What the browser tests share: the browser's path and flags, runs over HTTP, signing in, a cutting proxy."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import RunningServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
SHOTS = Path(__file__).resolve().parents[2] / ".artifacts" / "ui"
KEY = "test-key-all"
WAIT_MS = 60_000


async def create_run(server: RunningServer, workflow: str, *, start: bool = True, **variables: Any) -> str:
    """A run of a demo workflow created (and started) over HTTP; its id."""
    async with server.client(key=KEY) as http:
        created = await http.post(f"/api/v1/workflows/{workflow}/runs", json={"variables": variables or {"topic": "tides"}})
        assert created.status_code == 201, created.text
        run_id: str = created.json()["data"]["runId"]
        if start:
            await start_run(http, workflow, run_id)
    return run_id


async def start_run(http: httpx.AsyncClient, workflow: str, run_id: str) -> None:
    """Start a created run."""
    started = await http.post(f"/api/v1/workflows/{workflow}/runs/{run_id}/start")
    assert started.status_code == 200, started.text


async def stream_ids(server: RunningServer, workflow: str, run_id: str) -> list[int]:
    """The ids of every message of a run's whole stream, as the server sends them (waits for the end)."""
    async with server.client(key=KEY) as http:
        answer = await http.get(f"/api/v1/workflows/{workflow}/runs/{run_id}/stream", timeout=60)
    return [int(line[4:]) for line in answer.text.splitlines() if line.startswith("id: ")]


async def run_result(server: RunningServer, workflow: str, run_id: str) -> dict[str, Any]:
    """The run's result over HTTP."""
    async with server.client(key=KEY) as http:
        data: dict[str, Any] = (await http.get(f"/api/v1/workflows/{workflow}/runs/{run_id}")).json()["data"]
    return data


async def sign_in(page: Any, base_url: str) -> None:
    """Sign in through the form with the keyboard (the key goes to session storage)."""
    await page.goto(f"{base_url}/ui/")
    await page.get_by_label("API key").fill(KEY)
    await page.keyboard.press("Enter")
    await page.get_by_role("heading", name="Recent runs").wait_for(timeout=WAIT_MS)


async def open_run(page: Any, base_url: str, run_id: str) -> None:
    """Go to a run's shareable URL."""
    await page.goto(f"{base_url}/ui/runs/{run_id}")
    await page.locator("#run[data-stream]").wait_for(timeout=WAIT_MS)


async def wait_until_ended(page: Any) -> None:
    """Wait for the run's terminal message to be shown."""
    await page.locator('#run[data-terminal="true"]').wait_for(timeout=WAIT_MS)


async def shown_ids(page: Any) -> list[int]:
    """The ids of every event the page rendered, in the order it rendered them."""
    ids: list[int] = await page.eval_on_selector_all(
        "#event-log li[data-event-id]", "items => items.map(li => Number(li.dataset.eventId))")
    return ids


async def shot(page: Any, name: str, store: str) -> None:
    """A full-page screenshot under .artifacts/ui/, named after the state and the store kind."""
    kind = "postgres" if store.startswith("postgres") else "sqlite"
    await page.screenshot(path=str(SHOTS / f"{name}-{kind}.png"), full_page=True)


async def open_ended_run(page: Any, server: RunningServer, workflow: str, **variables: Any) -> tuple[str, list[int]]:
    """A run of a demo workflow, run to its end, its page opened after signing in: (run id, its stream's ids)."""
    run_id = await create_run(server, workflow, **variables)
    ids = await stream_ids(server, workflow, run_id)
    await sign_in(page, server.base_url)
    await open_run(page, server.base_url, run_id)
    await wait_until_ended(page)
    return run_id, ids


async def both_sizes(page: Any, name: str, store: str) -> None:
    """Screenshots of the page at 1400x1000 and at 390x844 (it stays at the phone size)."""
    await page.set_viewport_size({"width": 1400, "height": 1000})
    await shot(page, name, store)
    await page.set_viewport_size({"width": 390, "height": 844})
    await shot(page, f"{name}-phone", store)


class CuttingProxy:
    """A loopback TCP proxy to a server that cuts the connection of the first stream response after some bytes."""

    def __init__(self, target_port: int, cut_after: int) -> None:
        self.target_port = target_port
        self.cut_after = cut_after
        self.cut = False
        self.stream_requests: list[dict[str, str]] = []
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT of the proxy."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.target_port)
        doomed = {"on": False, "sent": 0}

        async def upstream() -> None:
            while data := await client_in.read(65536):
                if b"/stream " in data.split(b"\r\n", 1)[0]:
                    self.stream_requests.append(_headers(data))
                    doomed["on"] = not self.cut
                server_out.write(data)
                await server_out.drain()

        async def downstream() -> None:
            while data := await server_in.read(65536):
                if doomed["on"]:
                    room = self.cut_after - doomed["sent"]
                    if len(data) >= room:
                        client_out.write(data[:room])
                        await client_out.drain()
                        self.cut = True
                        client_out.transport.abort()
                        server_out.transport.abort()
                        return
                    doomed["sent"] += len(data)
                client_out.write(data)
                await client_out.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        with contextlib.suppress(ConnectionError, OSError):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for writer in (client_out, server_out):
            writer.transport.abort()


def _headers(request: bytes) -> dict[str, str]:
    lines = request.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
