"""Workspace retention: a run's files are deleted `ttlHours` after the run was created."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable
from uuid import UUID

from domain.events import RunCreated
from engine.aio import AsyncLog
from engine.clock import utcnow
from engine.workspace import Workspace


def expired_runs(created: Iterable[RunCreated], now: datetime) -> list[UUID]:
    """Runs whose workspace retention has passed."""
    return [e.originator_id for e in created if e.timestamp + timedelta(hours=e.ttl_hours) <= now]


async def sweep_workspaces(log: AsyncLog, workspace: Workspace, now: datetime | None = None) -> list[UUID]:
    """Delete the workspaces of every run past its retention; returns those runs."""
    created = await log.call(log.log.all_events_tagged, "RunCreated")
    expired = [run_id for run_id in expired_runs(created, now or utcnow()) if workspace.path_for(run_id).exists()]
    for run_id in expired:
        await log.call(workspace.remove, run_id)
    return expired
