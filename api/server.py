"""uvicorn's server, told to end open streams as soon as a stop signal arrives, with the connection timeouts it lacks
and a watch on the process's file descriptors."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import resource
import signal
import socket
import struct
import termios
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from engine.settings import Settings

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


RESPONSE_DEADLINE = "flowtrail.response_deadline"
"""The ASGI scope extension that ends the response in progress after some seconds, even when its client reads nothing."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the timeouts it lacks.

    * **header read**: a connection waiting for a request's headers (fresh, or between requests)
      that has not sent them whole within `header_timeout` seconds is closed (uvicorn's keep-alive
      timer stops at the first byte of a request, so a half-sent request would be kept forever);
    * **stuck client**: while the transport's write buffer is over its high-water mark (uvicorn's
      `send` then waits for it to drain), a client that takes no bytes for `stuck_seconds` (the
      buffer did not shrink) is cut (`abort`: what it did not take is dropped, not flushed);
    * **response deadline**: the scope extension `RESPONSE_DEADLINE` lets the app cut its response
      after a time, for a stream whose client is stuck where the app cannot end it.
    """

    header_timeout = 10.0
    stuck_seconds = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        """Start waiting for the first request's headers."""
        self._header_timer: asyncio.TimerHandle | None = None
        self._stuck_timer: asyncio.TimerHandle | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop every timer of the connection."""
        for timer in (self._header_timer, self._stuck_timer, self._deadline_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_timed_out)

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        self.transport.close()

    def on_message_begin(self) -> None:
        """A request begins: offer the app the response deadline."""
        super().on_message_begin()
        self.scope["extensions"] = {RESPONSE_DEADLINE: self._response_deadline}  # type: ignore[dict-item]  # ASGI types extensions as dicts

    def on_headers_complete(self) -> None:
        """The headers are in: the header timer stops."""
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """A response ended: wait for the next request's headers (unless one is queued already)."""
        waiting = not self.pipeline
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        super().on_response_complete()
        if waiting and not self.transport.is_closing():
            self._await_headers()

    def pause_writing(self) -> None:
        """The write buffer is full: the client must take bytes within `stuck_seconds`, and again after that."""
        super().pause_writing()
        if self._stuck_timer is None:
            self._watch_progress(-1)

    def resume_writing(self) -> None:
        """The client took most of the buffer."""
        if self._stuck_timer is not None:
            self._stuck_timer.cancel()
            self._stuck_timer = None
        super().resume_writing()

    def _watch_progress(self, before: int) -> None:
        """Cut the connection when what it has to send did not shrink since the last look."""
        left = self._unsent()
        if left and left == before:
            self._cut("it took no bytes for the stuck-client time")
            return
        self._stuck_timer = self.loop.call_later(self.stuck_seconds, self._watch_progress, left)

    def _unsent(self) -> int:
        """Bytes the client has not taken: the transport's buffer, plus the socket's unacknowledged send queue
        (the kernel wakes the transport only once much of that queue is gone, long after a slow client began
        taking bytes)."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):
                unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        return unsent

    def _response_deadline(self, seconds: float) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_timer = self.loop.call_later(seconds, self._cut, "its response outlived its deadline")

    def _cut(self, reason: str) -> None:
        self._stuck_timer = self._deadline_timer = None
        log.info("connection from %s cut: %s", _peer(self.client), reason)
        self.transport.abort()


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"


def guarded_protocol(*, header_timeout: float, stuck_seconds: float) -> type[GuardedHttpToolsProtocol]:
    """The guarded protocol with these timeouts."""
    return type("FlowtrailHttpProtocol", (GuardedHttpToolsProtocol,),
                {"header_timeout": header_timeout, "stuck_seconds": stuck_seconds})


def connection_options(settings: Settings) -> dict[str, Any]:
    """What `uvicorn.Config` is given for connections: the guarded protocol and the idle (keep-alive) timeout."""
    return {
        "http": guarded_protocol(header_timeout=settings.limits.header_timeout_seconds,
                                 stuck_seconds=settings.stream.stuck_seconds),
        "timeout_keep_alive": settings.limits.idle_timeout_seconds,
    }


def response_deadline(scope: Mapping[str, Any], seconds: float) -> None:
    """Cut this request's connection after `seconds` if its response has not ended (no-op under another server)."""
    cut = (scope.get("extensions") or {}).get(RESPONSE_DEADLINE)
    if cut is not None:
        cut(seconds)


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
