"""What one visit's executor works with: its node, inputs, models, stream and the run's cancel signal."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar
from uuid import UUID

from domain.workflow import AnyNode, NodeData
from engine.execution.calls import ModelCalls
from engine.execution.errors import CancelHalt
from engine.execution.journal import Journal
from engine.execution.models import VisitModels
from engine.execution.ports import ContextTools, Toolbox
from engine.execution.progress import Answer, VisitProgress
from engine.llm import RetryBudget
from engine.settings import EngineSettings
from engine.workspace.directory import Workspace

D = TypeVar("D", bound=NodeData)


class RunInputs(Protocol):
    """What the caller gave the run: its variables and the files it uploaded."""

    @property
    def variables(self) -> dict[str, Any]:
        """The run's variables."""
        ...

    @property
    def uploaded_files(self) -> Sequence[str]:
        """Workspace paths of the uploaded files."""
        ...


class VisitContext:
    """One visit in progress; `turn` counts the model turns it has played (resumed visits start past theirs).

    `budget` is the visit's one retry budget: model-call retries, re-formats and re-runs all spend it.
    """

    def __init__(self, node: AnyNode, visit: VisitProgress, *, run_id: UUID, journal: Journal,
                 workspace: Workspace, settings: EngineSettings, cancel_event: asyncio.Event, inputs: RunInputs,
                 models: VisitModels, scope: dict[str, Any], toolbox: Toolbox | None = None,
                 closing: asyncio.Event | None = None, context: ContextTools | None = None) -> None:
        self.node = node
        self.visit = visit
        self.run_id = run_id
        self.journal = journal
        self.workspace = workspace
        self.settings = settings
        self.cancel_event = cancel_event
        self.inputs = inputs
        self.models = models
        self.scope = scope
        self.toolbox = toolbox
        self.closing = closing if closing is not None else asyncio.Event()
        self.context = context
        """What gives a remote visit its context section (local visits get a toolbox instead)."""
        self.turn = visit.turns_done
        self.budget = RetryBudget(settings.model_retry_budget)
        self.calls = ModelCalls(journal, settings, self.budget, visit_uuid=visit.visit_uuid, node_id=node.id,
                                status=self.status, cancel=cancel_event)

    def data_as(self, kind: type[D]) -> D:
        """The node's settings as the type its executor reads (executors are chosen by node type, so it is that type)."""
        data = self.node.data
        if not isinstance(data, kind):
            raise TypeError(f"node {self.node.id!r} ({self.node.type}) has no {kind.__name__}")
        return data

    @property
    def answers(self) -> list[Answer]:
        """Questions this visit asked earlier and their answers."""
        return self.visit.answers

    @property
    def handing_over(self) -> bool:
        """True once the process shuts down: work that outlives the visit's task (a gateway run) is left for the next."""
        return self.closing.is_set()

    def check_cancel(self) -> None:
        """A safe point: stop here when a cancel was requested (the cancel event is set then too)."""
        if self.journal.run.cancel_requested:
            raise CancelHalt()

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append one chunk to this visit's stream."""
        await self.journal.stream(
            visit_uuid=self.visit.visit_uuid, node_id=self.node.id, kind=kind, content=content, tool_name=tool_name,
        )

    async def status(self, text: str) -> None:
        """Append a `status` line."""
        await self.stream("status", text)
