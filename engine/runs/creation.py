"""Run creation with an optional idempotency claim, race-safe across processes and replicas.

The claim (version 1 of the key's own stream) and the RunCreated event are appended in
one transaction: either both are in the log or neither is. A concurrent duplicate loses
the race on the claim's position, reads the winner's claim and answers with its run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple
from uuid import UUID

from domain.idempotency import IdempotencyKeyClaimed, claim_key, claim_stream_id, replay_of
from domain.run import create_run
from engine.clock import utcnow
from engine.store import AsyncEventStore, ConcurrentAppend
from engine.streams.hot import LiveHub


@dataclass(frozen=True)
class IdempotentRequest:
    """Who asked, with which key, for what (normalised digest) and against which version."""

    caller_key_id: str
    key: str
    digest: str
    workflow_name: str
    workflow_version: int


class Creation(NamedTuple):
    """The run a creation request stands for, and whether it existed before."""

    run_id: UUID
    replayed: bool


class RunCreator:
    """Creates runs; with an idempotency key, at most one run per (caller, key)."""

    def __init__(self, store: AsyncEventStore, hub: LiveHub) -> None:
        self.store = store
        self.hub = hub

    async def existing(self, request: IdempotentRequest) -> UUID | None:
        """The run an earlier identical request created; None when the key is unused.

        Raises IdempotencyKeyReused when the key was used for a different request.
        """
        events = await self.store.read_stream(claim_stream_id(request.caller_key_id, request.key))
        claims = [e for e in events if isinstance(e, IdempotencyKeyClaimed)]
        if not claims:
            return None
        return replay_of(
            claims[0], digest=request.digest, workflow_name=request.workflow_name,
            workflow_version=request.workflow_version,
        )

    async def create(self, run_id: UUID, fields: dict[str, Any], request: IdempotentRequest | None) -> Creation:
        """Append RunCreated (with the key's claim when there is a key); keep the new run hot."""
        at = utcnow()
        created = create_run(run_id, at, **fields, idempotency_key=request.key if request else None)
        events: list[Any] = [created]
        if request is not None:
            claim = claim_key(
                caller_key_id=request.caller_key_id, key=request.key, run_id=run_id, digest=request.digest,
                workflow_name=request.workflow_name, workflow_version=request.workflow_version, at=at,
            )
            events.insert(0, claim)
        try:
            await self.store.append_to_stream(events)
        except ConcurrentAppend:
            if request is None:
                raise
            winner = await self.existing(request)
            if winner is None:
                raise
            return Creation(winner, True)
        self.hub.open(run_id).offer([created])
        return Creation(run_id, False)
