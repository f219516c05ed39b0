"""A loopback TCP proxy in front of a real server that cuts connections at random byte offsets.

Each connection forwards the request untouched and the answer up to a random number of bytes
(headers included), then both sides are closed: what a flaky network or a restarted proxy does.
It can also refuse the next connections outright (the service is away), and it records the
request line each connection opened with.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

from tests.fakes.loopback import LoopbackServer


class CuttingProxy(LoopbackServer):
    """Forwards to 127.0.0.1:`upstream`; answers are cut after 1..`longest` bytes (None: never cut),
    except every `spare_every`-th connection, so that a message longer than `longest` gets through too."""

    def __init__(self, upstream: int, *, seed: int, longest: int | None = 4000, spare_every: int = 10) -> None:
        super().__init__()
        self.upstream = upstream
        self.random = random.Random(seed)
        self.longest = longest
        self.spare_every = spare_every
        self.forwarded = 0
        self.refusing = 0
        self.cuts = 0
        self.opened_with: list[str] = []

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT of the proxy."""
        return f"http://127.0.0.1:{self.port}"

    def refuse(self, connections: int) -> None:
        """Close the next `connections` connections as soon as their request line arrived."""
        self.refusing = connections

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one connection, cutting its answer at a random offset."""
        first = await reader.readline()
        if not first:
            return
        self.opened_with.append(first.decode("latin-1").strip())
        if self.refusing > 0:
            self.refusing -= 1
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        up_writer.write(first)
        budget = self._budget()
        requests = asyncio.create_task(self._pipe(reader, up_writer))
        try:
            await self._answer(up_reader, writer, budget)
        finally:
            requests.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await requests
            up_writer.close()

    def _budget(self) -> int | None:
        """How many bytes of the answer this connection forwards (None: all)."""
        self.forwarded += 1
        if self.longest is None or self.forwarded % self.spare_every == 0:
            return None
        return self.random.randint(1, self.longest)

    async def _pipe(self, source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
        while chunk := await source.read(65536):
            target.write(chunk)
            await target.drain()

    async def _answer(self, source: asyncio.StreamReader, target: asyncio.StreamWriter, budget: int | None) -> None:
        while chunk := await source.read(65536):
            if budget is not None and len(chunk) >= budget:
                target.write(chunk[:budget])
                await target.drain()
                self.cuts += 1
                return
            if budget is not None:
                budget -= len(chunk)
            target.write(chunk)
            await target.drain()
