"""A real flowtrail server on a loopback port: uvicorn serving the app, in this event loop."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from api.app import create_app
from api.protocol import connection_options
from api.sse import encode_frame
from engine.access import ApiKey
from engine.bootstrap import Services, build_services
from engine.settings import Settings, StoreSettings, StreamSettings

KEYS = (
    ApiKey(key="test-key-all", id="all"),
    ApiKey(key="test-key-scoped", id="scoped", workflow_names=("allowed-flow",)),
)


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_settings(url: str, data_dir: Path, *, load_demos: bool = False, **stream: Any) -> Settings:
    """Settings for a test server on the given store."""
    return Settings(
        host="127.0.0.1",
        port=free_port(),
        data_dir=data_dir,
        api_keys=KEYS,
        demo_key_in_use=False,
        store=StoreSettings(database_url=url),
        stream=replace(StreamSettings(), **stream),
        load_demos=load_demos,
    )


class RunningServer:
    """A started server, its services (for driving runs) and its base URL; it serves as `flowtrail serve` does, with
    the guarded protocol and its limits and timeouts (api.protocol)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.services: Services = build_services(settings, encode_frame=encode_frame)
        self.app = create_app(self.services)
        config = uvicorn.Config(self.app, host=settings.host, port=settings.port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2, **connection_options(settings))
        self.server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://{self.settings.host}:{self.settings.port}"

    async def start(self) -> RunningServer:
        """Serve until stopped; returns once the server accepts connections."""
        self._task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        """Shut down the way a signal would: open streams end first, then uvicorn stops."""
        self.services.hot_runs.close_streams()
        self.server.should_exit = True
        if self._task is not None:
            await self._task

    def client(self, key: str | None = "test-key-all", **kwargs: Any) -> httpx.AsyncClient:
        """An HTTP client for this server, sending the given API key."""
        headers = {"X-API-Key": key} if key else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(30.0), **kwargs)
