"""Context tokens: one-time, in-memory credentials bound to one visit of one run.

The service keeps only a SHA-256 digest of each token, so the token text lives nowhere
but in the caller's hands; it never reaches a URL, a log line, an event or the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from domain.errors import FlowtrailError
from engine.settings import ContextSettings

log = logging.getLogger("flowtrail.context")

TOKEN_HEX_LENGTH = 48
_HEX = frozenset("0123456789abcdef")


class ContextTokenError(FlowtrailError):
    """A context token was refused."""

    code = "UNAUTHORIZED"


class InvalidToken(ContextTokenError):
    """No token, a malformed one, or one this process never issued (or already invalidated)."""


class ExpiredToken(ContextTokenError):
    """The token outlived its TTL."""


class RunMismatch(ContextTokenError):
    """The token belongs to another run than the one asked about."""

    code = "FORBIDDEN"


class TooManyTokens(RuntimeError):
    """A visit already holds the maximum number of live tokens (a bug in the caller)."""


@dataclass(frozen=True)
class Grant:
    """What a valid token allows: reading `run_id` as visit `visit_uuid` sees it."""

    run_id: UUID
    visit_uuid: str


@dataclass
class _Live:
    grant: Grant
    expires_at: float


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("ascii")).digest()


def looks_like_token(token: str | None) -> bool:
    """True for 48 lowercase hex characters."""
    return token is not None and len(token) == TOKEN_HEX_LENGTH and _HEX.issuperset(token)


def parse_run_id(raw: object) -> UUID | None:
    """A run id given as 32 hex characters or a dashed UUID; None when it is neither."""
    if not isinstance(raw, str) or len(raw) not in (32, 36):
        return None
    try:
        return UUID(raw)
    except ValueError:
        return None


class ContextTokens:
    """Issues, checks, invalidates and sweeps the context tokens of this process."""

    def __init__(self, settings: ContextSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._live: dict[bytes, _Live] = {}
        self._by_visit: dict[tuple[UUID, str], set[bytes]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"ContextTokens(enabled={self.settings.enabled}, live={len(self._live)})"

    def __len__(self) -> int:
        return len(self._live)

    def issue(self, run_id: UUID, visit_uuid: str) -> str | None:
        """A new token for the visit (None when context query is disabled); TooManyTokens at the limit."""
        if not self.settings.enabled:
            return None
        key = (run_id, visit_uuid)
        now = self._clock()
        held = self._by_visit.get(key, set())
        for digest in [d for d in held if self._live[d].expires_at <= now]:
            self._drop(digest)
        held = self._by_visit.get(key, set())
        if len(held) >= self.settings.max_tokens_per_visit:
            raise TooManyTokens(
                f"visit {visit_uuid} of run {run_id.hex} already holds {len(held)} live context tokens "
                f"(limit {self.settings.max_tokens_per_visit}); invalidate them before issuing another"
            )
        token = secrets.token_hex(TOKEN_HEX_LENGTH // 2)
        digest = _digest(token)
        self._live[digest] = _Live(Grant(run_id, visit_uuid), now + self.settings.token_ttl_seconds)
        self._by_visit.setdefault(key, set()).add(digest)
        return token

    def invalidate_visit(self, run_id: UUID, visit_uuid: str) -> None:
        """Forget every token of the visit (called when the visit ends, however it ends)."""
        for digest in list(self._by_visit.get((run_id, visit_uuid), ())):
            self._drop(digest)

    def authenticate(self, token: str | None) -> Grant:
        """The grant of a live token; InvalidToken or ExpiredToken otherwise."""
        if token is None or not looks_like_token(token):
            raise InvalidToken("missing or malformed context token")
        digest = _digest(token)
        live = self._live.get(digest)
        if live is None:
            raise InvalidToken("invalid context token")
        if live.expires_at <= self._clock():
            self._drop(digest)
            raise ExpiredToken("context token expired")
        return live.grant

    def check(self, token: str | None, run_id: str) -> Grant:
        """The grant of a live token for this run; 401 errors for bad tokens, RunMismatch for another run."""
        return require_run(self.authenticate(token), run_id)

    def sweep(self) -> int:
        """Drop every expired token; returns how many."""
        now = self._clock()
        expired = [digest for digest, live in self._live.items() if live.expires_at <= now]
        for digest in expired:
            self._drop(digest)
        return len(expired)

    def _drop(self, digest: bytes) -> None:
        live = self._live.pop(digest, None)
        if live is None:
            return
        key = (live.grant.run_id, live.grant.visit_uuid)
        held = self._by_visit.get(key)
        if held is not None:
            held.discard(digest)
            if not held:
                del self._by_visit[key]

    def start(self) -> None:
        """Begin sweeping expired tokens every `cleanup_interval_seconds`."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="flowtrail-context-token-sweeper")

    async def _sweep_forever(self) -> None:
        interval = max(0.05, self.settings.cleanup_interval_seconds)
        while True:
            await asyncio.sleep(interval)
            swept = self.sweep()
            if swept:
                log.debug("swept %d expired context tokens", swept)

    async def close(self) -> None:
        """Stop the sweeper and forget every token."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        self._live.clear()
        self._by_visit.clear()


def require_run(grant: Grant, run_id: object) -> Grant:
    """The grant, when it belongs to `run_id`; RunMismatch otherwise."""
    if parse_run_id(run_id) != grant.run_id:
        raise RunMismatch("runId does not match the context token")
    return grant
