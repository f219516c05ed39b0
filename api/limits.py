"""Per-key limits: how many SSE streams one API key holds open, and how fast it may send requests.

Both are counted per configured key (by key id), in tables that take a key's row when it first
makes a request: a request with a bad key is refused before it reaches them, so unknown keys
cost no state, and a key added by a reload of the keys is counted like the others. A refusal is
`429` with the documented envelope and a `Retry-After` header (seconds).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from domain.errors import FlowtrailError
from engine.access import ApiKey
from engine.limits import LimitSettings

STREAM_RETRY_SECONDS = 5
"""What `Retry-After` says when a key holds its most streams: a slot frees only when one of them ends."""


class TooManyStreams(FlowtrailError):
    """The key already holds as many open streams as it may."""

    code = "TOO_MANY_STREAMS"


class RateLimited(FlowtrailError):
    """The key sent requests faster than its rate (and burst) allow."""

    code = "RATE_LIMITED"


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up; a request takes one."""

    __slots__ = ("rate", "burst", "tokens", "at")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.at = float(burst), now

    def take(self, now: float) -> float:
        """0 when a token was taken; else how many seconds until one is there."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class StreamSlot:
    """One open stream counted against its key; `release` (once) gives it back, as does dropping it unreleased."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        """Give the slot back (again: nothing)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __del__(self) -> None:
        self.release()


class KeyLimits:
    """The per-key stream counts and request buckets of the configured keys."""

    def __init__(self, settings: LimitSettings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.clock = clock
        self.streams: dict[str, int] = {}
        self.buckets: dict[str, TokenBucket] = {}

    def admit(self, key: ApiKey) -> None:
        """Count one request of the key (an authenticated one); RateLimited when it is over its rate."""
        rate = self.settings.rate_limit_per_key
        if not rate:
            return
        now = self.clock()
        bucket = self.buckets.get(key.id)
        if bucket is None:
            bucket = self.buckets[key.id] = TokenBucket(rate, self.settings.rate_limit_burst, now)
        wait = bucket.take(now)
        if wait:
            raise RateLimited(
                f"more than {self.settings.rate_limit_per_key:g} requests a second (burst "
                f"{self.settings.rate_limit_burst}) with this API key; retry later",
                retry_after=max(1, math.ceil(wait)),
            )

    def open_stream(self, key: ApiKey) -> StreamSlot:
        """A stream slot of the key; TooManyStreams when it holds FLOWTRAIL_MAX_STREAMS_PER_KEY already."""
        key_id = key.id
        held = self.streams.get(key_id, 0)
        if held >= self.settings.max_streams_per_key:
            raise TooManyStreams(
                f"this API key already holds {held} open streams, the most it may (FLOWTRAIL_MAX_STREAMS_PER_KEY); "
                "close one or retry later", retry_after=STREAM_RETRY_SECONDS,
            )
        self.streams[key_id] = held + 1
        return StreamSlot(lambda: self._close_stream(key_id))

    def _close_stream(self, key_id: str) -> None:
        self.streams[key_id] -= 1
