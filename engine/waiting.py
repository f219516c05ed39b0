"""Waiting for an asyncio.Event with a time limit, in a way that never loses a cancellation."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until `event` is set (True) or `timeout` seconds pass (False; None waits for ever).

    Uses `asyncio.timeout`, not `asyncio.wait_for`: on Python 3.11, `wait_for` can swallow
    a cancellation that arrives just as the event is set, and the cancelled task then
    runs on (a live tail that never stopped hung its service's shutdown).
    """
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
