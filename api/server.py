"""uvicorn's server, told to end open streams as soon as a stop signal arrives, and a watch on the process's file
descriptors (the connection guards are in api.protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Generator
from types import FrameType
from typing import Any

import uvicorn

log = logging.getLogger("flowtrail.server")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """On SIGTERM or SIGINT: `on_stop` runs at once (streams end, the engine stops taking runs), then `drain` (the
    runs in flight reach a visit boundary) while requests are still served, then uvicorn stops accepting, waits for
    open responses within its grace period and shuts the app down; exit status 0. A second SIGINT cuts the drain
    short."""

    def __init__(self, config: uvicorn.Config, *, on_stop: Callable[[], None],
                 drain: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(config)
        self.on_stop = on_stop
        self.drain = drain
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve until stopped (remembering the loop the stop signal must reach)."""
        self._loop = asyncio.get_running_loop()
        watch = FdWatch()
        self._loop.set_exception_handler(watch.loop_exception)
        watching = asyncio.create_task(watch.run())
        try:
            await super().serve(sockets)
        finally:
            watching.cancel()

    async def main_loop(self) -> None:
        """Serve until a stop signal, then drain: requests are still answered meanwhile (a visit in flight may call
        the context API; a balancer learns from /readyz that this process is going)."""
        await super().main_loop()
        if self.drain is None or self.force_exit:
            return
        draining = asyncio.ensure_future(self.drain())
        ticks = 0
        while not draining.done() and not self.force_exit:
            await asyncio.wait({draining}, timeout=0.1)
            ticks += 1
            await self.on_tick(ticks)  # uvicorn's tick: the Date header stays current while requests are served
        draining.cancel()
        (outcome,) = await asyncio.gather(draining, return_exceptions=True)
        if isinstance(outcome, Exception):
            log.error("draining the runs failed: %s: %s", type(outcome).__name__, outcome)

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


ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"
"""What asyncio's loop reports, once per failed accept, when the process has no file descriptor left."""


class FdWatch:
    """Says once that the process ran out of file descriptors (new connections are refused), and once that it recovered.

    uvloop refuses connections it cannot accept without a word and asyncio's loop reports every
    failed accept with a traceback; the watch counts the process's open descriptors every
    `interval` seconds instead, and takes asyncio's reports as its own, without repeating them.
    """

    def __init__(self, interval: float = 1.0, *, high: float = 0.95, low: float = 0.85) -> None:
        self.interval = interval
        self.high, self.low = high, low
        self.exhausted = False

    @staticmethod
    def usage() -> tuple[int, int]:
        """(open descriptors, the soft limit): all of them when counting needs one more than there is,
        none where /proc is not there to count them."""
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        try:
            return len(os.listdir("/proc/self/fd")), limit
        except OSError as error:
            return (limit if error.errno in (errno.EMFILE, errno.ENFILE) else 0), limit

    def check(self, *, refused: bool = False) -> None:
        """Log a change of state: out of descriptors (or `refused`: an accept failed), or recovered."""
        used, limit = self.usage()
        if not self.exhausted and (refused or used >= limit * self.high):
            self.exhausted = True
            log.warning("file descriptors: %d of %d in use; new connections are refused until some close "
                        "(raise the limit: ulimit -n, or LimitNOFILE= in a systemd unit)", used, limit)
        elif self.exhausted and not refused and used < limit * self.low:
            self.exhausted = False
            log.warning("file descriptors: %d of %d in use again; new connections are accepted", used, limit)

    async def run(self) -> None:
        """Check every `interval` seconds until cancelled."""
        while True:
            self.check()
            await asyncio.sleep(self.interval)

    def loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler: a failed accept counts as running out; anything else goes to the default."""
        if context.get("message") == ACCEPT_OUT_OF_RESOURCE:
            self.check(refused=True)
            return
        loop.default_exception_handler(context)
