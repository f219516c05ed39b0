"""Idempotency keys of run creation: one tiny stream per (caller, key), one claim in it.

The claim binds the key to the caller, the normalised request and the workflow version,
and names the run it created. Tags are stored with every event and must never change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

import msgspec

from domain.canonical import canonical_digest
from domain.errors import DomainError

IDEMPOTENCY_NAMESPACE = UUID("0b7e3c52-9d1a-5f64-8e2b-4c6a1d9f3e70")
MAX_KEY_LENGTH = 255


class IdempotencyKeyClaimed(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="IdempotencyKeyClaimed"):
    """A caller used an idempotency key for the first time; it created `run_id`."""

    originator_id: UUID
    originator_version: int
    timestamp: datetime
    caller_key_id: str
    idempotency_key: str
    run_id: UUID
    request_digest: str
    workflow_name: str
    workflow_version: int


IDEMPOTENCY_EVENT_TYPES: tuple[type[msgspec.Struct], ...] = (IdempotencyKeyClaimed,)


class IdempotencyKeyInvalid(DomainError):
    """The Idempotency-Key header is empty, too long or not visible ASCII."""


class IdempotencyKeyReused(DomainError):
    """The key was used before by this caller for a different request or workflow version."""

    code = "IDEMPOTENCY_KEY_REUSED"


def check_key(raw: str) -> str:
    """The key itself when it is 1..255 visible ASCII characters; IdempotencyKeyInvalid otherwise."""
    if not raw or len(raw) > MAX_KEY_LENGTH or any(not ("!" <= ch <= "~") for ch in raw):
        raise IdempotencyKeyInvalid(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} visible ASCII characters (no spaces)"
        )
    return raw


def claim_stream_id(caller_key_id: str, key: str) -> UUID:
    """The stream of one caller's key: uuid5 of `caller:key` in a fixed namespace."""
    return uuid5(IDEMPOTENCY_NAMESPACE, f"{caller_key_id}:{key}")


def request_digest(request: dict[str, Any]) -> str:
    """sha256 (hex) of the request's canonical JSON (sorted keys, no spaces, UTF-8)."""
    return canonical_digest(request)


def claim_key(
    *, caller_key_id: str, key: str, run_id: UUID, digest: str, workflow_name: str, workflow_version: int,
    at: datetime,
) -> IdempotencyKeyClaimed:
    """The first (and only) event of the key's stream."""
    return IdempotencyKeyClaimed(
        originator_id=claim_stream_id(caller_key_id, key), originator_version=1, timestamp=at,
        caller_key_id=caller_key_id, idempotency_key=key, run_id=run_id, request_digest=digest,
        workflow_name=workflow_name, workflow_version=workflow_version,
    )


def replay_of(claim: IdempotencyKeyClaimed, *, digest: str, workflow_name: str, workflow_version: int) -> UUID:
    """The claimed run when the repeat is the same request; IdempotencyKeyReused otherwise."""
    if claim.workflow_name != workflow_name or claim.request_digest != digest:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {claim.idempotency_key!r} was already used with a different request; "
            "use a new key for a new request",
            run_id=claim.run_id.hex,
        )
    if claim.workflow_version != workflow_version:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {claim.idempotency_key!r} was used with version {claim.workflow_version} of "
            f"workflow {workflow_name!r}, which is now at version {workflow_version}; use a new key",
            run_id=claim.run_id.hex,
        )
    return claim.run_id
