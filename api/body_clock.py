"""The time a request body may take: `FLOWTRAIL_BODY_TIMEOUT_SECONDS`, plus a second for every
`FLOWTRAIL_BODY_MIN_BYTES_PER_SECOND` bytes received, counted only while the server reads (decision 35)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from uvicorn.protocols.http.flow_control import FlowControl

from engine.limits import LimitSettings


class TimedFlowControl(FlowControl):
    """uvicorn's flow control, keeping the time reading was paused (the app had not taken what came): a body's
    clock stops meanwhile, since the client could not send."""

    def __init__(self, transport: asyncio.Transport, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(transport)
        self.clock = clock
        self._paused_total = 0.0
        self._paused_at = 0.0

    def pause_reading(self) -> None:
        """Stop reading, and start counting the pause."""
        if not self.read_paused:
            self._paused_at = self.clock()
        super().pause_reading()

    def resume_reading(self) -> None:
        """Read again; the pause is added up."""
        if self.read_paused:
            self._paused_total += self.clock() - self._paused_at
        super().resume_reading()

    def paused_seconds(self) -> float:
        """Seconds reading has been paused since this connection opened."""
        ongoing = self.clock() - self._paused_at if self.read_paused else 0.0
        return self._paused_total + ongoing


class BodyClock:
    """One request body on its way: when it began, what arrived, and how long it may still take."""

    __slots__ = ("limits", "flow", "began", "paused_before", "received")

    def __init__(self, limits: LimitSettings, flow: TimedFlowControl) -> None:
        self.limits = limits
        self.flow = flow
        self.received = 0
        self.began = self.paused_before = 0.0
        self.restart()

    def restart(self) -> None:
        """Count from now (the client was not yet asked for the body: `Expect: 100-continue`)."""
        self.began = self.flow.clock()
        self.paused_before = self.flow.paused_seconds()

    def seconds_left(self) -> float:
        """How long the body may still take; 0 or less: it is late."""
        rate = self.limits.body_min_bytes_per_second
        allowed = self.limits.body_timeout_seconds + (self.received / rate if rate else 0.0)
        reading = self.flow.clock() - self.began - (self.flow.paused_seconds() - self.paused_before)
        return allowed - reading

    def late(self) -> str:
        """What a body that did not arrive in time is told."""
        limits = self.limits
        rate = f", plus a second for every {limits.body_min_bytes_per_second} bytes received" \
            if limits.body_min_bytes_per_second else ""
        return (f"the request body did not arrive in time: {limits.body_timeout_seconds:g} s{rate} "
                "(FLOWTRAIL_BODY_TIMEOUT_SECONDS, FLOWTRAIL_BODY_MIN_BYTES_PER_SECOND)")
