"""Execution's ports, as Protocols: what it needs from outside itself, and what the outside sees of it.

It needs the context tools, the catalogue and (PostgreSQL) a dispatch: the context package
implements `ContextTools`, the dispatch package `RunDispatch`, and the composition root hands
implementations to the engine; execution never imports the packages that implement these.
The rest of the service sees the engine as a `RunExecutor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol
from uuid import UUID

from domain.catalogue import WorkflowEntry
from engine.llm.types import ToolSpec

CancelOutcome = Literal["requested", "already_requested", "already_finished"]


class Toolbox(Protocol):
    """Tools one model visit may call besides its built-ins; results are JSON text for the model."""

    names: frozenset[str]

    def specs(self) -> Sequence[ToolSpec]:
        """What the model is told it may call."""
        ...

    async def call(self, name: str, arguments: dict[str, Any] | None) -> str:
        """Run one call; failures come back as result text."""
        ...

    async def aclose(self) -> None:
        """Release the toolbox's connections."""
        ...


class ContextTools(Protocol):
    """Hands a model visit its context toolbox, and takes it back when the visit ends."""

    def open(self, run_id: UUID, visit_uuid: str) -> Toolbox | None:
        """The visit's toolbox (None: no context tools for it)."""
        ...

    async def close(self, run_id: UUID, visit_uuid: str, toolbox: Toolbox | None) -> None:
        """End the visit's access: its credentials are revoked and the toolbox closed."""
        ...

    async def section(self, run_id: UUID, visit_uuid: str) -> str | None:
        """For a model that cannot call the tools (a remote gateway's): what the visit may read of its predecessors,
        as one bounded section of its prompt (None: none)."""
        ...


class WorkflowVersions(Protocol):
    """The published workflow versions a run may have recorded."""

    def version(self, name: str, version: int) -> WorkflowEntry:
        """One version of a workflow (WorkflowNotFound when it was never published)."""
        ...

    async def load(self) -> None:
        """Fold the versions published since it last read the log (by another process too)."""
        ...


class RunDispatch(Protocol):
    """Hands runs to whichever replica takes them (PostgreSQL: a procrastinate job per run)."""

    async def defer(self, run_id: UUID) -> None:
        """Queue the run's execution (exactly one replica executes a run at a time)."""
        ...

    async def queued(self, run_ids: Sequence[UUID]) -> set[UUID]:
        """The runs among these that already have a job waiting or executing."""
        ...


class RunExecutor(Protocol):
    """What the rest of the service asks of whatever executes runs."""

    async def start(self, run_id: UUID) -> None:
        """Record the start and begin executing."""
        ...

    async def answer(self, run_id: UUID, clarify_id: str, answer: str) -> bool:
        """Record the answer; True when the run took it up at once."""
        ...

    async def cancel(self, run_id: UUID) -> CancelOutcome:
        """Record a cancel request (or say why none was needed)."""
        ...

    async def requeue_orphans(self, running: Sequence[tuple[UUID, int]]) -> list[UUID]:
        """Queue a job for each of these runs that needs execution and has none."""
        ...

    async def recover(self) -> None:
        """Take up the runs that were executing when the process stopped."""
        ...

    def stop_taking_runs(self) -> None:
        """The process stops: no visit begins any more."""
        ...

    async def drain(self, window: float) -> None:
        """Let the visits in flight end within `window` seconds; hand every run over (the log keeps where it stands)."""
        ...

    async def close(self) -> None:
        """Stop executing; the log keeps where every run stands."""
        ...
