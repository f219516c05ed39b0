"""What a visit or a run came to: the values the runners pass back to the session."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from domain.failures import FailureCode
from domain.outputs import OutputEnvelope
from engine.execution.errors import PauseForAnswer
from engine.execution.progress import VisitProgress


@dataclass(frozen=True)
class Skip:
    """A node to record as skipped, and why."""

    node_id: str
    reason: str
    iter_seq: int = 1
    """A DAG node is visited at most once, and a skipped one never was: its skip is its first visit."""


@dataclass(frozen=True)
class Done:
    """A visit completed with this envelope."""

    envelope: OutputEnvelope


@dataclass(frozen=True)
class Failed:
    """A visit, or the run, failed with this error, of this kind."""

    error: str
    code: FailureCode


@dataclass(frozen=True)
class Paused:
    """A visit asked a question; the run pauses."""

    visit: VisitProgress
    ask: PauseForAnswer


@dataclass(frozen=True)
class Completed:
    """The run finished with this output data."""

    data: Any


@dataclass(frozen=True)
class Cancelled:
    """The run stopped after a cancel request."""


@dataclass(frozen=True)
class HandedOver:
    """The run stopped at a visit boundary because this process is stopping; nothing is recorded."""


VisitOutcome = Done | Failed | Paused
RunOutcome = Completed | Failed | Paused | Cancelled | HandedOver


_LEADING_CODE = re.compile(r"^([A-Z][A-Z0-9_]{2,63}): ")


def node_failed(node_id: str, error: str) -> str:
    """The run's error when a node's visit failed; a machine-readable code the visit's error starts with
    (`REMOTE_OUTCOME_UNKNOWN: ...`) leads the run's error too, so the run listing's `errorCode` names it."""
    found = _LEADING_CODE.match(error)
    if found is None:
        return f"node {node_id!r} failed: {error}"
    return f"{found.group(1)}: node {node_id!r} failed: {error[found.end():]}"
