"""A client that follows one run's stream by hopping between replicas: it reads some messages on one, then resumes
on another with Last-Event-ID, until the terminal event; it records how every connection ended. With one client
(a load balancer's address) it resumes there after each cut or reconnect hint."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Literal

import httpx

from projections.sse import TERMINAL_EVENTS

SHUTTING_DOWN_COMMENT = ": server shutting down"
"""How a stream that the server ends because it stops begins its last line (api/streams.py SHUTTING_DOWN)."""
Ending = Literal["terminal", "hopped", "reconnect hint", "cut", "refused", "clean end without the terminal event"]
RETRY_SECONDS = 0.1


@dataclass(frozen=True)
class Connection:
    """One connection of the hopper: the replica, the Last-Event-ID it sent, the messages it got and how it ended."""

    replica: int
    after: int | None
    received: int
    ending: Ending
    detail: str = ""


@dataclass
class Hopper:
    """Follows `path` over `clients` (one per replica), hopping after a random number of messages in `take`."""

    clients: list[httpx.AsyncClient]
    path: str
    rng: random.Random
    take: tuple[int, int] = (5, 80)
    ids: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    got: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once `min_messages` messages arrived (for tests that act mid-run)."""
    min_messages: int = 100

    @property
    def finished(self) -> bool:
        """True once the terminal event arrived."""
        return bool(self.events) and self.events[-1] in TERMINAL_EVENTS

    def endings(self, *kinds: Ending) -> list[Connection]:
        """The connections that ended in one of these ways."""
        return [c for c in self.connections if c.ending in kinds]

    async def follow(self) -> Hopper:
        """Hop until the terminal event; a refused answer (not 200) is recorded and ends the hopping."""
        replica = self.rng.randrange(len(self.clients))
        while not self.finished:
            connection = await self._read_once(replica, self.rng.randint(*self.take))
            self.connections.append(connection)
            if connection.ending == "refused":
                return self
            if connection.ending in ("cut", "reconnect hint"):
                await asyncio.sleep(RETRY_SECONDS)
            if len(self.clients) > 1:
                replica = (replica + self.rng.randrange(1, len(self.clients))) % len(self.clients)
        return self

    async def _read_once(self, replica: int, take: int) -> Connection:
        after = self.ids[-1] if self.ids else None
        headers = {"Accept": "text/event-stream"}
        if after is not None:
            headers["Last-Event-ID"] = str(after)
        received = 0
        try:
            async with self.clients[replica].stream("GET", self.path, headers=headers,
                                                    timeout=httpx.Timeout(5.0, read=30.0)) as response:
                if response.status_code != 200:
                    body = (await response.aread()).decode(errors="replace")[:300]
                    return Connection(replica, after, 0, "refused", f"{response.status_code} {body}")
                message: dict[str, str] = {}
                async for line in response.aiter_lines():
                    if line.startswith(SHUTTING_DOWN_COMMENT):
                        return Connection(replica, after, received, "reconnect hint")
                    if line:
                        name, _, value = line.partition(":")
                        message[name] = value.removeprefix(" ")
                        continue
                    if "data" not in message:
                        message = {}
                        continue
                    self._add(int(message["id"]), message.get("event", "message"))
                    message, received = {}, received + 1
                    if self.finished:
                        return Connection(replica, after, received, "terminal")
                    if received >= take:
                        return Connection(replica, after, received, "hopped")
        except httpx.TransportError as error:
            return Connection(replica, after, received, "cut", type(error).__name__)
        return Connection(replica, after, received, "clean end without the terminal event")

    def _add(self, position: int, event: str) -> None:
        self.ids.append(position)
        self.events.append(event)
        if len(self.ids) >= self.min_messages:
            self.got.set()
