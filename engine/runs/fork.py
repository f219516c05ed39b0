"""Forking a run: a run of its own that starts with its source's history up to a visit, and executes from there.

The fork's log holds its own copy of that history (`domain.fork`) and its workspace a copy of the
source's files, both made when the fork is created; nothing reads the source after that.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from domain import events as ev
from domain.catalogue import WorkflowEntry
from domain.fork import (
    ForkPoint,
    check_fork_version,
    copied_history,
    fork_events,
    fork_point,
    reexecuted_nodes,
    rerun_point,
)
from domain.run import fold
from engine.catalogue import Catalogue
from engine.runs.creation import Creation, IdempotentRequest, NewRun
from engine.runs.service import RunNotFound, RunService
from engine.workspace.copies import copy_workspace
from engine.workspace.directory import Workspace


@dataclass(frozen=True)
class ForkRequest:
    """Where to cut a run (a visit, a node's latest finished visit, or a re-run's first failure) and what changes."""

    visit_uuid: str | None = None
    node_id: str | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the source's variables."""
    workflow_version: int | None = None
    """None: the source's version."""
    rerun: bool = False


@dataclass(frozen=True)
class ForkPlan:
    """A fork, checked and decided, not stored yet."""

    source: ev.RunCreated
    point: ForkPoint
    entry: WorkflowEntry
    new: NewRun
    copied: list[ev.RunEvent]
    rerun: bool
    chain_head: str = ""
    """The source's hash-chain link at the cut (hex; empty when that event was stored before the chain)."""

    def history(self, created: ev.RunCreated) -> list[ev.RunEvent]:
        """The events that follow the fork's RunCreated: its RunForked and the copied history."""
        return fork_events(created, self.source, self.point, self.copied, rerun=self.rerun, chain_head=self.chain_head)


class RunForks:
    """Plans and creates forks of runs."""

    def __init__(self, runs: RunService, catalogue: Catalogue, workspace: Workspace) -> None:
        self.runs = runs
        self.catalogue = catalogue
        self.workspace = workspace

    async def plan(self, source_id: UUID, request: ForkRequest, *, caller_key_id: str) -> ForkPlan:
        """The fork a request asks for; refused (nothing stored) for an unknown or unfinished visit, a version
        that was never published, of the other mode or without the node, variables its inputs refuse, or a
        re-run of a run that did not fail."""
        events = await self.runs.events(source_id)
        run = fold(events)
        if run is None or not isinstance(events[0], ev.RunCreated):
            raise RunNotFound(source_id.hex)
        source = events[0]
        if request.rerun:
            point = rerun_point(run, events)
        else:
            point = fork_point(events, visit_uuid=request.visit_uuid, node_id=request.node_id)
        version = request.workflow_version or source.workflow_version
        entry = self.catalogue.version(source.workflow_name, version)
        check_fork_version(source, entry.definition, version, point)
        new = NewRun.of(
            entry, variables={**source.variables, **request.variables}, uploaded_files=source.uploaded_files,
            ttl_hours=source.ttl_hours, caller_key_id=caller_key_id,
        )
        copied = copied_history(events, point, reexecuted_nodes(entry.definition, point))
        return ForkPlan(source, point, entry, new, copied, request.rerun, await self._link_at(source_id, point.position))

    async def _link_at(self, run_id: UUID, position: int) -> str:
        lines = await self.runs.stored_lines(run_id, after=position - 1, limit=1)
        cells = lines[0][2] if lines else None
        return "" if cells is None else cells.link.hex()

    async def create(self, plan: ForkPlan, *, run_id: UUID, idempotency: IdempotentRequest | None = None) -> Creation:
        """Store the fork (with its copy of the source's workspace); with an idempotency key, the original
        fork of a repeated request."""
        target = self.workspace.path_for(run_id)
        try:
            await asyncio.to_thread(copy_workspace, self.workspace, plan.source.originator_id, run_id)
            creation = await self.runs.create(plan.new, run_id=run_id, idempotency=idempotency, history=plan.history)
        except BaseException:
            await asyncio.to_thread(shutil.rmtree, target, True)
            raise
        if creation.replayed:
            await asyncio.to_thread(shutil.rmtree, target, True)
        return creation
