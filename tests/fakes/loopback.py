"""The lifecycle every fake server shares: listen on a free loopback port, track handlers, stop cleanly."""

from __future__ import annotations

import asyncio
from typing import Any


class LoopbackServer:
    """A raw asyncio server on 127.0.0.1; subclasses implement `serve(reader, writer)`."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._release = asyncio.Event()
        self._handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Release hanging replies, close connections and stop listening."""
        self._release.set()
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def hang(self) -> None:
        """Wait until the server stops (a reply that never comes)."""
        await self._release.wait()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection."""
        raise NotImplementedError

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self.serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
