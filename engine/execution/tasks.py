"""Run tasks: each run executing in this process has one task that runs sessions until the run ends or pauses.

Nothing the engine knows lives only in memory: a session (engine.execution.session) is rebuilt
from the log every time, so a pause, a restart or a crash all resume the same way. A task whose
run another process took over stops without recording anything; one that stops on an error
records the run's failure, and keeps trying while the store cannot record it.

When the process stops, its runs are drained (`drain`): no visit begins any more, the visits in
flight may end within the drain window, and each run stops at that visit boundary and is handed
over (to another replica's worker, or to this process's next start); a run still in a visit when
the window closes is stopped there, and that visit runs again wherever the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any
from uuid import UUID

from domain import events as ev
from domain.errors import FlowtrailError
from domain.failures import FailureCode, without_addresses
from domain.run import EXECUTING, Run, RunStatus, fail_run
from domain.workflow import WorkflowDefinition
from engine.catalogue import WorkflowNotFound
from engine.execution.agentic import run_agentic
from engine.execution.dag import run_dag
from engine.execution.deadlines import PauseDeadlines
from engine.execution.errors import RunFailure, RunHandedOver
from engine.execution.journal import Journal
from engine.execution.locks import RunLocks
from engine.execution.outcomes import Failed, HandedOver
from engine.execution.ports import ContextTools, RunDispatch, WorkflowVersions
from engine.execution.progress import Progress, fold_progress
from engine.execution.session import RunSession, SessionTools
from engine.llm import ModelRegistry
from engine.observability.metrics import RUNS_ACTIVE
from engine.observability.requests import outside_any_request
from engine.observability.tracing import run_ended, run_handed_over, run_span
from engine.runs.service import RunService
from engine.runs.writer import RunTakenOver, RunWriter
from engine.settings import EngineSettings
from engine.store.deadline import outside_requests
from engine.store.event_store import StoreUnavailable
from engine.workspace.directory import Workspace

logger = logging.getLogger("flowtrail.engine")

FAIL_RETRY_FIRST_SECONDS = 0.5
FAIL_RETRY_MAX_SECONDS = 10.0
"""Backoff while the store cannot record a run's failure: 0.5 s, doubling, at most 10 s, until it can."""


def needs_execution(run: Run) -> bool:
    """True when a run is executing, or was asked to cancel and has not ended."""
    return run.status in EXECUTING or (run.cancel_requested and not run.status.is_terminal)


def session_tools(settings: EngineSettings, registry: ModelRegistry, workspace: Workspace,
                  context: ContextTools | None) -> SessionTools:
    """What every session works with besides its run; it runs DAG and AGENTIC workflows."""
    return SessionTools(settings=settings, registry=registry, workspace=workspace, context=context,
                        modes={"DAG": run_dag, "AGENTIC": run_agentic})


class RunTasks:
    """The run tasks of this process, the signals that cancel them, and the time limits of paused runs."""

    def __init__(self, runs: RunService, workflows: WorkflowVersions, tools: SessionTools, locks: RunLocks) -> None:
        self.runs = runs
        self.workflows = workflows
        self.tools = tools
        self.locks = locks
        self.deadlines = PauseDeadlines(tools.settings.run_timeout_seconds, on_expire=self._time_out)
        """Built here because they go round in a circle: a session that pauses arms a deadline, and
        an expired deadline ends the run with a session."""
        self.closing = False
        self.stopping = asyncio.Event()
        """Set when the process stops: sessions end at their next visit boundary (`drain`)."""
        self._tasks: dict[UUID, asyncio.Task[None]] = {}
        self._live: dict[asyncio.Task[None], UUID] = {}
        """Every run task not yet done (one leaves `_tasks` a moment before it ends: it still releases its writer)."""
        self._cancel_events: dict[UUID, asyncio.Event] = {}
        self._inflight: set[asyncio.Future[Any]] = set()
        self._deliveries: set[asyncio.Task[None]] = set()

    # ---- what commands and recovery use ----------------------------------------------

    def executing(self, run_id: UUID) -> bool:
        """True while this process has a task for the run."""
        return run_id in self._tasks

    @contextlib.asynccontextmanager
    async def writing(self, run_id: UUID) -> AsyncIterator[RunWriter]:
        """The run's writer under the run's lock; released afterwards unless a task here executes the run."""
        async with self.locks.of(run_id):
            writer = await self.runs.writer(run_id)
            try:
                yield writer
            finally:
                await self.release_if_idle(run_id)

    async def release_if_idle(self, run_id: UUID) -> None:
        """Release the run's writer unless a task here executes the run."""
        if run_id not in self._tasks:
            await self.runs.release(run_id)

    async def ensure(self, run_id: UUID, dispatch: RunDispatch | None) -> None:
        """Have the run executed: here at once (no dispatch), or by a job (unless it executes here already)."""
        task = self._tasks.get(run_id)
        if task is not None and not task.done():
            return
        if dispatch is None:
            self._run_here(run_id)
        else:
            await dispatch.defer(run_id)

    def signal_cancel(self, run_id: UUID) -> None:
        """Tell the run's task, if it executes here, that a cancel was recorded."""
        signal = self._cancel_events.get(run_id)
        if signal is not None:
            signal.set()

    # ---- what the dispatch and the live tail use --------------------------------------

    async def execute_here(self, run_id: UUID) -> None:
        """Drive the run in this process until it ends or pauses (what a dispatched job does).

        Returns at once when the run needs no execution. Cancelled while the process shuts down,
        it stops the run's task first (the log keeps where the run stands); cancelled otherwise
        (the job worker stopped), the run goes on here. RunHandedOver when the run stopped at a
        visit boundary because the process stops (its job goes back to the queue).
        """
        if not needs_execution(await self.runs.state(run_id)) and run_id not in self._tasks:
            return
        task = self._run_here(run_id)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if self.closing:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            raise
        if self.stopping.is_set() and needs_execution(await self.runs.state(run_id)):
            raise RunHandedOver(f"run {run_id.hex} stopped at a visit boundary: this process is stopping")

    def stop_taking_runs(self) -> None:
        """The process is stopping: sessions end at their next visit boundary, and a dispatched run cancelled from
        now on stops its task here."""
        self.closing = True
        self.stopping.set()
        self.tools.closing.set()

    async def drain(self, window: float) -> None:
        """Give the runs executing here up to `window` seconds to reach a visit boundary (each is handed over
        there, `_drive`); stop the ones still in a visit then, saying so in the log."""
        self.stop_taking_runs()
        if not self._live:
            return
        loop = asyncio.get_running_loop()
        began = loop.time()
        logger.info("stopping: %d run(s) executing here get up to %g s to end the visits in flight; each is handed "
                    "over at its next visit boundary and goes on from its log", len(self._live), window)
        while self._live and (left := began + window - loop.time()) > 0:
            await asyncio.wait(list(self._live), timeout=left, return_when=asyncio.FIRST_COMPLETED)
        if not self._live:
            logger.info("drained in %.1f s: every run here reached a visit boundary", loop.time() - began)
            return
        for run_id in self._live.values():
            logger.warning("run %s was still in a visit when the drain window (%g s) closed: handed over now, and "
                           "that visit runs again from its start (or its last answer)", run_id.hex, window)
        stopped = list(self._live)
        for task in stopped:
            task.cancel()
        await asyncio.gather(*stopped, return_exceptions=True)

    def foreign_events(self, events: Sequence[ev.RunEvent]) -> None:
        """Events another process appended: a cancel of a run executing here reaches its task."""
        for event in events:
            if isinstance(event, ev.RunCancelRequested) and event.originator_id in self._tasks:
                task = asyncio.ensure_future(self._cancelled_elsewhere(event.originator_id))
                self._deliveries.add(task)
                task.add_done_callback(self._deliveries.discard)

    async def _cancelled_elsewhere(self, run_id: UUID) -> None:
        try:
            await (await self.runs.writer(run_id)).catch_up()
        except Exception:
            logger.warning("run %s: could not read the cancel another process recorded", run_id.hex, exc_info=True)
        self.signal_cancel(run_id)

    async def close(self) -> None:
        """Stop every run task and close the model clients; runs stay as the log has them."""
        self.stop_taking_runs()
        expiring = self.deadlines.stop()
        tasks = list(self._live) + list(self._deliveries)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *expiring, return_exceptions=True)
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        self._tasks.clear()
        self._cancel_events.clear()
        await self.tools.registry.aclose()

    # ---- one run's task ----------------------------------------------------------------

    def _run_here(self, run_id: UUID) -> asyncio.Task[None]:
        """The run's task in this process (started if there is none), outside any request's deadline."""
        task = self._tasks.get(run_id)
        if task is None or task.done():
            task = self._tasks[run_id] = asyncio.create_task(
                self._drive(run_id), name=f"flowtrail-run-{run_id.hex}", context=outside_any_request(outside_requests()),
            )
            self._live[task] = run_id
            RUNS_ACTIVE.inc()
            task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._live.pop(task, None)
        RUNS_ACTIVE.dec()

    def _forget(self, run_id: UUID) -> None:
        """The run no longer executes here."""
        self._tasks.pop(run_id, None)
        self._cancel_events.pop(run_id, None)

    async def _drive(self, run_id: UUID) -> None:
        """Run sessions until the run ends or waits for an answer."""
        signal = self._cancel_events.setdefault(run_id, asyncio.Event())
        try:
            (await self.runs.writer(run_id)).executing = True
            while True:
                before = (await self.runs.writer(run_id)).run.version
                progress = await self._session(run_id, signal)
                async with self.locks.of(run_id):
                    run = (await self.runs.writer(run_id)).run
                    if run.status in EXECUTING and self.stopping.is_set():
                        logger.info("run %s: handed over at a visit boundary (this process is stopping); it goes on "
                                    "from its log", run_id.hex)
                        self._forget(run_id)
                        await self.runs.release(run_id)
                        return
                    if run.status in EXECUTING and run.version != before:
                        continue  # answered, or cancel requested, while this session was ending
                    if run.status in EXECUTING:
                        raise RuntimeError(f"the engine made no progress with the run ({run.status.value})")
                    if run.status is RunStatus.PAUSED and progress is not None:
                        self.deadlines.arm(run_id, progress.started_at)
                    self._forget(run_id)
                    await self.runs.release(run_id)
                    return
        except asyncio.CancelledError:
            raise
        except RunTakenOver as taken:
            logger.warning("run %s: %s; stopped here without recording anything", run_id.hex, taken)
            await self._let_go(run_id)
        except StoreUnavailable as error:
            logger.error("run %s stopped: the store is unavailable (%s)", run_id.hex, error)
            await self._fail_after_error(run_id, error)
        except Exception as error:
            logger.exception("run %s stopped on an unexpected error", run_id.hex)
            await self._fail_after_error(run_id, error)

    async def _session(self, run_id: UUID, signal: asyncio.Event) -> Progress | None:
        """One session from the log to the run's end or pause; the progress it ended with."""
        writer = await self.runs.writer(run_id)
        run = writer.run
        if run.status.is_terminal:
            return None
        if run.cancel_requested:
            signal.set()
        elif run.status in (RunStatus.CREATED, RunStatus.PAUSED):
            return None
        journal = Journal(writer, self._inflight)
        await journal.flush()
        progress = fold_progress(await self.runs.events(run_id))
        await self._know_version(progress)
        with run_span(run_id, progress.workflow_name, progress.workflow_version, progress.trace_parent,
                      continues=bool(progress.visits)) as traced:
            session = RunSession(self.tools, run_id, journal, progress, signal, self.stopping)
            outcome = await session.execute(lambda: self._definition(progress))
            await session.finish(outcome)
            if isinstance(outcome, HandedOver):
                run_handed_over(traced)
            else:
                run_ended(traced, writer.run.status.value, outcome.code if isinstance(outcome, Failed) else None)
        return progress

    def _definition(self, progress: Progress) -> WorkflowDefinition:
        """The workflow version the run recorded (its AGENTIC planner settings included)."""
        name, version = progress.workflow_name, progress.workflow_version
        try:
            return self.workflows.version(name, version).definition
        except WorkflowNotFound:
            raise RunFailure(
                f"workflow {name!r} version {version} is not in the catalogue; the run cannot go on", "VALIDATION_FAILED",
            ) from None

    async def _know_version(self, progress: Progress) -> None:
        """Read the catalogue again when the run's version is not known here (published through another replica)."""
        try:
            self.workflows.version(progress.workflow_name, progress.workflow_version)
        except WorkflowNotFound:
            await self.workflows.load()

    async def _time_out(self, run_id: UUID) -> None:
        """Fail the run if it still waits for an answer (its deadline passed)."""
        async with self.writing(run_id) as writer:
            try:
                if writer.run.status is RunStatus.PAUSED:
                    progress = fold_progress(await self.runs.events(run_id))
                    session = RunSession(self.tools, run_id, Journal(writer, self._inflight), progress, asyncio.Event())
                    limit = self.tools.settings.run_timeout_seconds
                    await session.finish(Failed(
                        f"the run timed out after {limit:g} s (its time limit) while waiting for an answer", "RUN_TIMEOUT"))
            except FlowtrailError as refused:  # another replica answered, cancelled or failed it first
                logger.info("run %s: its time limit passed, but %s", run_id.hex, refused)

    async def _let_go(self, run_id: UUID) -> None:
        """Forget a run another process executes now (its buffered events are not stored)."""
        async with self.locks.of(run_id):
            self._forget(run_id)
            try:
                await self.runs.release(run_id)
            except RunTakenOver:
                pass

    async def _fail_after_error(self, run_id: UUID, error: Exception) -> None:
        """Record the run's failure; the run's task stays registered until it is recorded (the store may be
        unavailable for a while), so shutdown cancels it."""
        try:
            await record_failure(self.runs, self.locks, run_id, error)
        finally:
            async with self.locks.of(run_id):
                self._forget(run_id)
                await forget_writer(self.runs, run_id)


async def record_failure(runs: RunService, locks: RunLocks, run_id: UUID, error: Exception) -> None:
    """Record RunFailed; while the store is unavailable, try again with capped backoff until it records
    it or the process shuts down."""
    code: FailureCode = "STORE_UNAVAILABLE" if isinstance(error, StoreUnavailable) else "INTERNAL_ERROR"
    if code == "STORE_UNAVAILABLE":
        reason = "the store could not record the run's events (it was unavailable; the server log has the details)"
    else:
        reason = without_addresses(f"internal error: {type(error).__name__}: {error}")
    delay = FAIL_RETRY_FIRST_SECONDS
    while True:
        async with locks.of(run_id):
            try:
                writer = await runs.writer(run_id)
                writer.executing = False  # what it reads back may be its own last append
                if not writer.run.status.is_terminal:
                    await writer.decide(partial(fail_run, error=reason, error_code=code))
                return
            except StoreUnavailable as still:
                if delay == FAIL_RETRY_FIRST_SECONDS:
                    logger.warning("run %s: cannot record its failure yet (%s); retrying", run_id.hex, still)
                await forget_writer(runs, run_id)
            except Exception:
                logger.exception("could not record the failure of run %s", run_id.hex)
                return
        await asyncio.sleep(delay)
        delay = min(delay * 2, FAIL_RETRY_MAX_SECONDS)


async def forget_writer(runs: RunService, run_id: UUID) -> None:
    """Release the run's writer; one that cannot flush now is dropped (the next reads the log)."""
    try:
        await runs.release(run_id)
    except Exception:
        logger.debug("run %s: writer released without flushing", run_id.hex, exc_info=True)
