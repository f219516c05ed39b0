"""What execution needs from outside itself, as Protocols: the context tools and the catalogue.

The context package implements `ContextTools`; the composition root hands an implementation
to the engine. Execution never imports the packages that implement these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from domain.catalogue import WorkflowEntry
from engine.llm.types import ToolSpec


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


class WorkflowVersions(Protocol):
    """The published workflow versions a run may have recorded."""

    def version(self, name: str, version: int) -> WorkflowEntry:
        """One version of a workflow (WorkflowNotFound when it was never published)."""
        ...

    async def load(self) -> None:
        """Fold the versions published since it last read the log (by another process too)."""
        ...
