"""The Idempotency-Key header of run creation, bound to caller, normalised request and version."""

from __future__ import annotations

from api.uploads import CreateBody
from domain.catalogue import WorkflowEntry
from domain.idempotency import request_digest
from engine.access import ApiKey
from engine.runs.creation import IdempotentRequest


def idempotent_request(
    key: str | None, caller: ApiKey, entry: WorkflowEntry, body: CreateBody
) -> IdempotentRequest | None:
    """What a (checked) key is bound to; None without one. The API key itself is never kept, only its id."""
    if key is None:
        return None
    return IdempotentRequest(
        caller_key_id=caller.id,
        key=key,
        digest=request_digest(body.normalised(entry.name)),
        workflow_name=entry.name,
        workflow_version=entry.version,
    )
