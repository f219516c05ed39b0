"""What a run-creation request asks for, and how an idempotency key binds it.

The claim of a key (version 1 of the key's own stream) and the RunCreated event are appended
in one transaction: either both are in the log or neither is. A concurrent duplicate loses
the race on the claim's position, reads the winner's claim and answers with its run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from domain.catalogue import WorkflowEntry
from domain.idempotency import IdempotencyKeyClaimed, claim_key, claim_stream_id, replay_of
from domain.run import create_run
from domain.workflow import check_variables


@dataclass(frozen=True)
class NewRun:
    """A run of one workflow version with the caller's inputs (the facts RunCreated records)."""

    workflow_id: int
    workflow_name: str
    workflow_version: int
    display_name: str
    mode: str
    variables: dict[str, Any] = field(default_factory=dict)
    uploaded_files: tuple[str, ...] = ()
    ttl_hours: int = 720
    caller_key_id: str = ""
    webhook: str | None = None

    @classmethod
    def of(cls, entry: WorkflowEntry, **inputs: Any) -> NewRun:
        """A run of a catalogue entry's version; InvalidVariables (VALIDATION_FAILED) when the variables
        miss a required input or hold a value of the wrong declared type."""
        check_variables(entry.definition, inputs.get("variables") or {})
        return cls(
            workflow_id=entry.workflow_id, workflow_name=entry.name, workflow_version=entry.version,
            display_name=entry.definition.display_name, mode=entry.definition.mode, **inputs,
        )


@dataclass(frozen=True)
class IdempotentRequest:
    """Who asked, with which key, for what (normalised digest) and against which version."""

    caller_key_id: str
    key: str
    digest: str
    workflow_name: str
    workflow_version: int

    @property
    def stream_id(self) -> UUID:
        """The key's own stream, whose first event claims it."""
        return claim_stream_id(self.caller_key_id, self.key)

    def replayed_run(self, events: list[Any]) -> UUID | None:
        """The run an earlier identical request created (None: the key is unused).

        Raises IdempotencyKeyReused when the key was used for a different request.
        """
        claims = [e for e in events if isinstance(e, IdempotencyKeyClaimed)]
        if not claims:
            return None
        return replay_of(
            claims[0], digest=self.digest, workflow_name=self.workflow_name, workflow_version=self.workflow_version,
        )


class Creation(NamedTuple):
    """The run a creation request stands for, and whether it existed before."""

    run_id: UUID
    replayed: bool


def creation_events(run_id: UUID, new: NewRun, request: IdempotentRequest | None, at: datetime) -> list[Any]:
    """RunCreated, preceded by the key's claim when there is a key."""
    created = create_run(run_id, at, **asdict(new), idempotency_key=request.key if request else None)
    if request is None:
        return [created]
    claim = claim_key(
        caller_key_id=request.caller_key_id, key=request.key, run_id=run_id, digest=request.digest,
        workflow_name=request.workflow_name, workflow_version=request.workflow_version, at=at,
    )
    return [claim, created]
