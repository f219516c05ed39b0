"""The job queue of the replicas: defer `execute_run(run_id)` on the run's lock, execute it here, hand it back.

Every replica runs a procrastinate worker in its own process (an asyncio task, restarted
with backoff when it fails, e.g. while PostgreSQL is down) and a periodic check that
replaces the jobs of workers that stopped heart-beating (a replica killed with -9), so
another replica continues their runs from the log.

When the process stops (`stop_taking_jobs`, at the signal) the worker takes no job any more
and waits for the jobs running here (procrastinate's `shutdown_graceful_timeout`: the drain
window, and a little more for the hand-backs), heart-beating meanwhile so that no replica
takes them for stalled; each job ends when its run reaches a visit boundary and goes back
to the queue at once (`HandBack`), for another replica. `close` without that stops at once:
the jobs of runs still executing here are re-queued, never left `doing` nor marked done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

from procrastinate import App, PsycopgConnector
from procrastinate.jobs import Job, Status
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from procrastinate.worker import Worker

from engine.dispatch.schema import conninfo, ensure_job_schema
from engine.dispatch.settings import DispatchSettings
from engine.store.url import StoreLocation

logger = logging.getLogger("flowtrail.dispatch")
TASK_NAME = "flowtrail.execute_run"
RESTART_FIRST_SECONDS = 0.5
RESTART_MAX_SECONDS = 10.0
HEALTHY_SECONDS = 30.0
"""A worker that ran this long before it failed counts as recovered: its next failure is logged again."""
MAX_POLL_SECONDS = 1.0
"""Longest wait before a worker looks for jobs without a notification (a re-queued job sends none)."""
HAND_BACK_SECONDS = 5.0
"""After the drain window, what the jobs get to hand their runs back before the worker aborts them itself."""
SELECT_QUEUED = (
    "SELECT DISTINCT lock FROM procrastinate_jobs "
    "WHERE task_name = %(task)s AND status IN ('todo', 'doing') AND lock = ANY(%(locks)s)"
)


def quiet_library_logs() -> None:
    """procrastinate logs every job's start and end at INFO (a hand-back with a traceback): keep its warnings only,
    unless its logger was given a level on purpose, and each of its errors as one line (a filter on each of its
    loggers: a logger's filters do not see its children's records)."""
    library = logging.getLogger("procrastinate")
    if library.level == logging.NOTSET:
        library.setLevel(logging.WARNING)
    one_line = OneLineLibraryErrors()
    for name in [n for n in logging.root.manager.loggerDict if n.split(".")[0] == "procrastinate"]:
        named = logging.getLogger(name)
        if not any(isinstance(f, OneLineLibraryErrors) for f in named.filters):
            named.addFilter(one_line)


class OneLineLibraryErrors(logging.Filter):
    """The queue's own errors (its listener losing PostgreSQL, say) as one line each, without a traceback:
    the store logs the outage itself, once."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Fold the exception into the message and drop its traceback."""
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            cause = error.__cause__ or error
            record.msg = f"{record.getMessage()} ({type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


class HandBack(BaseRetryStrategy):
    """Re-queue at once a job its worker stopped, or that ended while its replica stops (its run handed over at a
    visit boundary); one that failed, after a capped backoff."""

    def __init__(self, stopping: Callable[[], bool]) -> None:
        self.stopping = stopping

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        """When (and whether) the job runs again."""
        if isinstance(exception, asyncio.CancelledError) or self.stopping():
            return RetryDecision(retry_in={"seconds": 0})
        if job.attempts >= 20:
            return None
        return RetryDecision(retry_in={"seconds": min(RESTART_MAX_SECONDS, 0.5 * 2 ** job.attempts)})


class JobDispatch:
    """procrastinate on the store's PostgreSQL: defers run executions and executes the ones this replica takes."""

    def __init__(
        self, location: StoreLocation, settings: DispatchSettings, *, execute: Callable[[UUID], Awaitable[None]],
    ) -> None:
        self.location = location
        self.settings = settings
        self.execute = execute
        quiet_library_logs()
        self.app = App(connector=PsycopgConnector(
            conninfo=conninfo(location), min_size=1, max_size=settings.pool_size, name="flowtrail-jobs",
        ))
        self.app.task(name=TASK_NAME, retry=HandBack(lambda: self._stopping), pass_context=False)(self._execute_run)
        self.retried_when_stalled: list[str] = []
        """Other tasks whose jobs a silent worker left `doing` are run again as they are (they may repeat)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._worker: Worker | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False

    async def _execute_run(self, run_id: str) -> None:
        await self.execute(UUID(hex=run_id))

    async def start(self) -> None:
        """Create the job tables if missing, open the pool, start the worker and the stalled-job check."""
        if await ensure_job_schema(self.location):
            logger.info("created the job queue's tables in schema %s", self.location.schema)
        await self.app.open_async()
        self._supervisor = asyncio.create_task(self._supervise(), name="flowtrail-job-worker")
        self._tasks = [
            self._supervisor,
            asyncio.create_task(self._replace_stalled_forever(), name="flowtrail-stalled-jobs"),
        ]

    async def defer(self, run_id: UUID) -> None:
        """Queue one execution of the run (a duplicate is harmless: it returns at once)."""
        await self.app.configure_task(TASK_NAME, lock=run_id.hex).defer_async(run_id=run_id.hex)

    async def queued(self, run_ids: Sequence[UUID]) -> set[UUID]:
        """The runs among these with a job waiting or executing."""
        if not run_ids:
            return set()
        rows = await self.app.connector.execute_query_all_async(
            SELECT_QUEUED, task=TASK_NAME, locks=[r.hex for r in run_ids],
        )
        return {UUID(hex=row["lock"]) for row in rows}

    async def _supervise(self) -> None:
        """Run the worker; when it fails, log it once and start it again with backoff."""
        delay, logged = RESTART_FIRST_SECONDS, False
        loop = asyncio.get_running_loop()
        while not self._stopping:
            began = loop.time()
            self._worker = Worker(app=self.app, **self._worker_options())
            try:
                await self._worker.run()
                failure: str = "it stopped on its own"
            except Exception as error:  # noqa: BLE001 - any failure of the worker is logged once and retried
                failure = f"{type(error).__name__}: {error}"
            if self._stopping:
                return
            if loop.time() - began > HEALTHY_SECONDS:
                delay, logged = RESTART_FIRST_SECONDS, False
            if not logged:
                logger.error("the job worker stopped (%s); restarting it with backoff until it runs", failure)
                logged = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX_SECONDS)

    def _worker_options(self) -> dict[str, Any]:
        return {
            "name": "flowtrail", "concurrency": self.settings.worker_concurrency, "wait": True,
            "install_signal_handlers": False, "shutdown_graceful_timeout": 0, "delete_jobs": "successful",
            "update_heartbeat_interval": self.settings.heartbeat_seconds,
            "stalled_worker_timeout": self.settings.stall_seconds,
            "fetch_job_polling_interval": min(MAX_POLL_SECONDS, self.settings.heartbeat_seconds),
            "abort_job_polling_interval": 60.0,
        }

    async def _replace_stalled_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            try:
                await self.replace_stalled()
            except Exception as error:  # noqa: BLE001 - the worker's supervisor reports outages; this tries again
                logger.debug("stalled-job check failed: %s", error)

    async def replace_stalled(self) -> int:
        """Replace the jobs of workers silent for longer than the stall threshold; how many were.

        Each gets a new job on the same lock, then is marked aborted (which lets the new one run). A new job,
        not `retry_job`: a worker that was only slow would otherwise finish (delete) the job another replica
        now executes, and free the run's lock. Two replicas replacing one job at once make a duplicate job,
        which is harmless.
        """
        manager = self.app.job_manager
        stalled = await manager.get_stalled_jobs(task_name=TASK_NAME, seconds_since_heartbeat=self.settings.stall_seconds)
        replaced = 0
        for job in stalled:
            if job.lock is None:
                continue
            await self.defer(UUID(hex=job.lock))
            try:
                await manager.finish_job(job, status=Status.ABORTED, delete_job=False)
            except Exception as error:  # noqa: BLE001 - another replica replaced it first
                logger.debug("stalled job %s was replaced elsewhere: %s", job.id, error)
                continue
            replaced += 1
            logger.warning("run %s: its replica stopped heart-beating; another replica continues it", job.lock)
        replaced += await self._retry_stalled()
        await manager.prune_stalled_workers(self.settings.stall_seconds)
        return replaced

    async def _retry_stalled(self) -> int:
        """Run again the stalled jobs of `retried_when_stalled` tasks (at-least-once work); how many."""
        manager = self.app.job_manager
        retried = 0
        for task_name in self.retried_when_stalled:
            for job in await manager.get_stalled_jobs(task_name=task_name,
                                                      seconds_since_heartbeat=self.settings.stall_seconds):
                try:
                    await manager.retry_job(job)
                except Exception as error:  # noqa: BLE001 - another replica retried it first
                    logger.debug("stalled job %s was retried elsewhere: %s", job.id, error)
                    continue
                retried += 1
                logger.warning("job %s (%s): its replica stopped heart-beating; it runs again", job.id, task_name)
        return retried

    def stop_taking_jobs(self, window: float) -> None:
        """Take no job from now on; the jobs running here get `window` seconds (plus HAND_BACK_SECONDS) to end,
        while the worker keeps heart-beating (`stopped` waits for them)."""
        if self._stopping:
            return
        self._stopping = True
        worker = self._worker
        if worker is None:
            return
        worker.shutdown_graceful_timeout = window + HAND_BACK_SECONDS
        worker.stop()
        self._tasks.append(asyncio.create_task(self._beat_while_draining(worker), name="flowtrail-drain-heartbeat"))

    async def _beat_while_draining(self, worker: Worker) -> None:
        """The heart-beat procrastinate stops while it waits for the jobs of a stopping worker (until it ended)."""
        while self._supervisor is not None and not self._supervisor.done():
            if (worker_id := worker.worker_id) is not None:
                try:
                    await self.app.job_manager.update_heartbeat(worker_id)
                except Exception as error:  # noqa: BLE001 - a missed beat is retried; the stall threshold is far off
                    logger.debug("heart-beat while draining failed: %s", error)
            await asyncio.sleep(self.settings.heartbeat_seconds)

    async def stopped(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) until the stopping worker has ended and recorded its jobs' hand-backs."""
        if self._supervisor is not None:
            await asyncio.wait({self._supervisor}, timeout=timeout)

    async def close(self) -> None:
        """Stop the worker (runs still executing here are stopped and their jobs re-queued), then close the pool."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        try:
            await self.app.close_async()
        except Exception as error:  # noqa: BLE001 - closing goes on; the pool is dropped either way
            logger.warning("the job queue's pool did not close cleanly: %s", error)
