"""Taking runs up again: after a restart, and (PostgreSQL) when a run that needs execution has no job.

A run is taken up from its log like any other session (engine.execution.tasks); these only
decide which runs need it, and hand them to this process or to the dispatch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from uuid import UUID

from domain.run import RunStatus
from engine.execution.ports import RunDispatch
from engine.execution.progress import fold_progress
from engine.execution.tasks import RunTasks, needs_execution
from engine.runs.service import RunService

logger = logging.getLogger("flowtrail.engine")


async def recover(runs: RunService, tasks: RunTasks, dispatch: RunDispatch | None) -> None:
    """Resume runs that were executing when the process stopped; paused runs wait for their answer (within their time limit)."""
    unfinished = await runs.unfinished()
    queued = await dispatch.queued(unfinished) if dispatch is not None else set()
    for run_id in unfinished:
        run = await runs.state(run_id)
        if needs_execution(run):
            if run_id in queued:
                logger.info("recovering run %s (%s): its job is queued", run_id.hex, run.status.value)
                continue
            logger.info("recovering run %s (%s)", run_id.hex, run.status.value)
            async with tasks.locks.of(run_id):
                await tasks.ensure(run_id, dispatch)
                await tasks.release_if_idle(run_id)
        elif run.status is RunStatus.PAUSED:
            tasks.deadlines.arm(run_id, fold_progress(await runs.events(run_id)).started_at)


async def requeue_orphans(runs: RunService, tasks: RunTasks, dispatch: RunDispatch | None,
                          running: Sequence[tuple[UUID, int]], needs_no_job: dict[UUID, int]) -> list[UUID]:
    """Queue a job for each run that needs execution and has none (its start was stored but its job
    was not, say); `running` is (run, last position) of the runs the read model says are RUNNING.

    `needs_no_job` holds the runs without a job found not to need one (paused), by the last position
    they were checked at; it is kept up to date here, so a run is checked again only once it moved.
    """
    if dispatch is None or not running:
        return []
    queued = await dispatch.queued([run_id for run_id, _ in running])
    requeued = []
    for run_id, position in running:
        if run_id in queued or tasks.executing(run_id) or needs_no_job.get(run_id) == position:
            continue
        if not needs_execution(await runs.state(run_id)):
            needs_no_job[run_id] = position
            continue
        logger.warning("run %s was executing with no job to carry it; queued one", run_id.hex)
        await dispatch.defer(run_id)
        requeued.append(run_id)
    still = set(running)
    for run_id, position in list(needs_no_job.items()):
        if (run_id, position) not in still:
            del needs_no_job[run_id]
    return requeued
