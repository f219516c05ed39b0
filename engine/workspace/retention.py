"""Workspace retention: a run's files are deleted `ttlHours` after the run was created.

A folder whose run was never created (the process stopped during a multipart upload,
before RunCreated was stored) is deleted once it has not changed for an hour.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime, timedelta
from uuid import UUID

from domain.events import RunCreated
from engine.clock import utcnow
from engine.store import AsyncEventStore
from engine.workspace.directory import Workspace


def expired_runs(created: Iterable[RunCreated], now: datetime) -> list[UUID]:
    """Runs whose workspace retention has passed."""
    return [e.originator_id for e in created if e.timestamp + timedelta(hours=e.ttl_hours) <= now]


ORPHAN_GRACE = timedelta(hours=1)


def orphaned_folders(folders: dict[UUID, float], created: Iterable[RunCreated], now: datetime) -> list[UUID]:
    """Folders of runs that were never created and have not changed for ORPHAN_GRACE."""
    known = {e.originator_id for e in created}
    cutoff = (now - ORPHAN_GRACE).timestamp()
    return [run_id for run_id, modified in folders.items() if run_id not in known and modified <= cutoff]


async def sweep_workspaces(store: AsyncEventStore, workspace: Workspace, now: datetime | None = None) -> list[UUID]:
    """Delete the workspaces of runs past their retention, and orphaned upload folders; returns their ids."""
    now = now or utcnow()
    created = await store.read_all("RunCreated")
    folders = await asyncio.to_thread(workspace.run_folders)
    doomed = [run_id for run_id in expired_runs(created, now) if run_id in folders]
    doomed += orphaned_folders(folders, created, now)
    for run_id in doomed:
        await asyncio.to_thread(workspace.remove, run_id)
    return doomed
