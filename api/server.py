"""uvicorn's server, told to end open streams as soon as a stop signal arrives."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """On SIGTERM or SIGINT: `on_stop` runs at once (streams end, the engine stops taking runs), then uvicorn
    stops accepting, waits for open responses within its grace period and shuts the app down; exit status 0."""

    def __init__(self, config: uvicorn.Config, *, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_stop = on_stop
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve until stopped (remembering the loop the stop signal must reach)."""
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's stop, with `on_stop` scheduled on the server's loop (a signal handler may not touch it)."""
        first = not self.should_exit
        super().handle_exit(sig, frame)
        if first and self._loop is not None:
            self._loop.call_soon_threadsafe(self.on_stop)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """uvicorn's signal capture, without raising the signal again afterwards: a graceful stop exits 0."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)
