"""Following a run's stream through disconnects: resume after the last id, back off, then poll.

The seed's client behaviour: after a drop, reconnect with `Last-Event-ID` after 1, 2, 4, 8 and
16 seconds; after five failures, poll the run every 30 seconds and reconnect as soon as it
answers; stop at the terminal event. A message is never handed out twice, whatever the drops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass

import httpx
from httpx_sse import SSEError

from flowtrail_client.errors import ServiceUnavailable
from flowtrail_client.types import StreamEvent

DISCONNECTS: tuple[type[Exception], ...] = (httpx.TransportError, SSEError, ServiceUnavailable)
"""What ends a connection without ending the run: the stream is resumed after these."""


@dataclass(frozen=True)
class Reconnection:
    """How a stream is resumed: the delays between attempts, then the poll interval."""

    delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0, 16.0)
    poll_seconds: float = 30.0


Connect = Callable[[int], AsyncGenerator[StreamEvent, None]]
"""Opens the stream after a position and yields its messages."""
Poll = Callable[[], Awaitable[object]]
"""Asks for the run once (raises one of DISCONNECTS while the service is away)."""


async def resuming(connect: Connect, poll: Poll, after: int, policy: Reconnection) -> AsyncGenerator[StreamEvent, None]:
    """Every message after `after`, once and in order, until the terminal one, across any number of drops."""
    last = after
    failures = 0
    while True:
        try:
            async with aclosing(connect(last)) as events:
                async for event in events:
                    if event.id <= last:
                        continue
                    last, failures = event.id, 0
                    yield event
                    if event.terminal:
                        return
        except DISCONNECTS:
            pass
        if failures < len(policy.delays):
            await asyncio.sleep(policy.delays[failures])
            failures += 1
        else:
            await poll_until_answered(poll, policy.poll_seconds)


async def poll_until_answered(poll: Poll, every: float) -> None:
    """Ask for the run every `every` seconds until the service answers."""
    while True:
        await asyncio.sleep(every)
        try:
            await poll()
            return
        except DISCONNECTS:
            continue
