"""What one visit's executor works with: its node, inputs, models, stream and the run's cancel signal."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from uuid import UUID

from domain.workflow import NodeDefinition
from engine.execution.errors import CancelHalt
from engine.execution.models import VisitModels
from engine.execution.progress import Answer, VisitProgress
from engine.settings import EngineSettings
from engine.workspace.directory import Workspace

if TYPE_CHECKING:
    from engine.execution.session import RunSession


class VisitContext:
    """One visit in progress; `turn` counts the model turns it has played (resumed visits start past theirs)."""

    def __init__(self, session: RunSession, node: NodeDefinition, visit: VisitProgress, *,
                 models: VisitModels, scope: dict[str, Any], toolbox: Any = None) -> None:
        self.session = session
        self.node = node
        self.visit = visit
        self.models = models
        self.scope = scope
        self.toolbox = toolbox
        self.turn = visit.turns_done

    @property
    def run_id(self) -> UUID:
        """The run this visit belongs to."""
        return self.session.run_id

    @property
    def data(self) -> dict[str, Any]:
        """The node's settings."""
        return self.node.data

    @property
    def answers(self) -> list[Answer]:
        """Questions this visit asked earlier and their answers."""
        return self.visit.answers

    @property
    def workspace(self) -> Workspace:
        """The workspace every run keeps its files in."""
        return self.session.services.workspace

    @property
    def settings(self) -> EngineSettings:
        """The engine's limits."""
        return self.session.settings

    @property
    def cancel_event(self) -> asyncio.Event:
        """Set when the run is asked to stop; providers watch it while streaming."""
        return self.session.cancel_event

    def check_cancel(self) -> None:
        """A safe point: stop here when a cancel was requested."""
        if self.session.cancel_requested:
            raise CancelHalt()

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append one chunk to this visit's stream."""
        await self.session.journal.stream(
            visit_uuid=self.visit.visit_uuid, node_id=self.node.id, kind=kind, content=content, tool_name=tool_name,
        )

    async def status(self, text: str) -> None:
        """Append a `status` line."""
        await self.stream("status", text)
