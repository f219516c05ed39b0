"""The workflow engine: starts runs, answers their questions, cancels them, recovers them after a restart.

Each executing run has one task that runs sessions (engine.execution.session) until the run
ends or pauses. Nothing the engine knows lives only in memory: a session is rebuilt from the
log every time, so a pause, a restart or a crash all resume the same way.

Where a run executes is pluggable: without a dispatch (SQLite) this process drives it at once;
with one (PostgreSQL) starting, answering, cancelling and recovering defer a job, and the
replica whose worker takes the job drives the run here (`execute_here`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal, Protocol
from uuid import UUID

from domain import events as ev
from domain import run as decide
from domain.errors import FlowtrailError, RunAlreadyFinished
from domain.run import EXECUTING, RunStatus
from domain.workflow import WorkflowDefinition
from engine.catalogue import WorkflowNotFound
from engine.clock import utcnow
from engine.execution.agentic import run_agentic
from engine.execution.dag import run_dag
from engine.execution.errors import RunFailure
from engine.execution.journal import Journal
from engine.execution.outcomes import Failed
from engine.execution.ports import ContextTools, WorkflowVersions
from engine.execution.progress import Progress, fold_progress
from engine.execution.session import RunSession, SessionTools
from engine.llm import ModelRegistry
from engine.observability.metrics import RUNS_ACTIVE
from engine.runs.service import RunService
from engine.runs.writer import RunTakenOver
from engine.settings import EngineSettings
from engine.store.deadline import outside_requests
from engine.store.event_store import StoreUnavailable
from engine.workspace.directory import Workspace

logger = logging.getLogger("flowtrail.engine")


CancelOutcome = Literal["requested", "already_requested", "already_finished"]
FAIL_RETRY_FIRST_SECONDS = 0.5
FAIL_RETRY_MAX_SECONDS = 10.0
"""Backoff while the store cannot record a run's failure: 0.5 s, doubling, at most 10 s, until it can."""


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

    async def close(self) -> None:
        """Stop executing; the log keeps where every run stands."""
        ...


class Engine:
    """Executes runs in this process; every step it takes is an appended run event."""

    def __init__(self, *, runs: RunService, workflows: WorkflowVersions, workspace: Workspace,
                 settings: EngineSettings, registry: ModelRegistry, context_tools: ContextTools | None = None) -> None:
        self.runs = runs
        self.workflows = workflows
        self.settings = settings
        self.registry = registry
        self.tools = SessionTools(
            settings=settings, registry=registry, workspace=workspace, context=context_tools,
            modes={"DAG": run_dag, "AGENTIC": run_agentic},
        )
        self._tasks: dict[UUID, asyncio.Task[None]] = {}
        self._cancel_events: dict[UUID, asyncio.Event] = {}
        self._locks: weakref.WeakValueDictionary[UUID, asyncio.Lock] = weakref.WeakValueDictionary()
        self._inflight: set[asyncio.Future[Any]] = set()
        self._deadlines: dict[UUID, asyncio.TimerHandle] = {}
        self._expiring: set[asyncio.Task[None]] = set()
        self.dispatch: RunDispatch | None = None
        """None: runs execute in this process at once; else they are deferred as jobs."""
        self.closing = False
        self._needs_no_job: dict[UUID, int] = {}
        """Runs without a job found not to need one (paused), by the last position they were checked at."""

    @property
    def context_tools(self) -> ContextTools | None:
        """What hands model visits their context tools (None: no context tools)."""
        return self.tools.context

    @context_tools.setter
    def context_tools(self, tools: ContextTools | None) -> None:
        self.tools = replace(self.tools, context=tools)

    # ---- commands --------------------------------------------------------------------

    async def start(self, run_id: UUID) -> None:
        """Append RunStarted (RunAlreadyStarted / RunAlreadyFinished refuse it) and begin executing."""
        async with self._lock(run_id):
            writer = await self.runs.writer(run_id)
            started = False
            try:
                await writer.decide(decide.start_run)
                started = True
            finally:
                await self._settle(run_id, schedule=started)

    async def answer(self, run_id: UUID, clarify_id: str, answer: str) -> bool:
        """Append ClarifyAnswered and resume the run; True when it resumed in this process."""
        async with self._lock(run_id):
            writer = await self.runs.writer(run_id)
            resumed = False
            try:
                await writer.decide(partial(decide.answer_clarify, clarify_id=clarify_id, answer=answer))
                resumed = writer.run.status in EXECUTING
                self._disarm(run_id)
            finally:
                await self._settle(run_id, schedule=resumed)
            return resumed

    async def cancel(self, run_id: UUID) -> CancelOutcome:
        """Record a cancel request: "requested", "already_requested" or "already_finished"."""
        async with self._lock(run_id):
            writer = await self.runs.writer(run_id)
            requested = False
            try:
                if writer.run.status.is_terminal:
                    return "already_finished"
                if writer.run.cancel_requested:
                    return "already_requested"
                try:
                    await writer.decide(decide.request_cancel)
                except RunAlreadyFinished:
                    return "already_finished"
                requested = True
                self._disarm(run_id)
                signal = self._cancel_events.get(run_id)
                if signal is not None:
                    signal.set()
                return "requested"
            finally:
                await self._settle(run_id, schedule=requested)

    async def recover(self) -> None:
        """Resume runs that were executing when the process stopped; paused runs wait for their answer (within their time limit)."""
        unfinished = await self.runs.unfinished()
        queued = await self.dispatch.queued(unfinished) if self.dispatch is not None else set()
        for run_id in unfinished:
            run = await self.runs.state(run_id)
            if _needs_execution(run):
                if run_id in queued:
                    logger.info("recovering run %s (%s): its job is queued", run_id.hex, run.status.value)
                    continue
                logger.info("recovering run %s (%s)", run_id.hex, run.status.value)
                async with self._lock(run_id):
                    await self._schedule(run_id)
                    if run_id not in self._tasks:
                        await self.runs.release(run_id)
            elif run.status is RunStatus.PAUSED:
                self._arm(run_id, fold_progress(await self.runs.events(run_id)))

    async def requeue_orphans(self, running: Sequence[tuple[UUID, int]]) -> list[UUID]:
        """Queue a job for each run that needs execution and has none (its start was stored but its job
        was not, say); `running` is (run, last position) of the runs the read model says are RUNNING."""
        if self.dispatch is None or not running:
            return []
        queued = await self.dispatch.queued([run_id for run_id, _ in running])
        requeued = []
        for run_id, position in running:
            if run_id in queued or run_id in self._tasks or self._needs_no_job.get(run_id) == position:
                continue
            if not _needs_execution(await self.runs.state(run_id)):
                self._needs_no_job[run_id] = position
                continue
            logger.warning("run %s was executing with no job to carry it; queued one", run_id.hex)
            await self.dispatch.defer(run_id)
            requeued.append(run_id)
        still = set(running)
        self._needs_no_job = {run_id: p for run_id, p in self._needs_no_job.items() if (run_id, p) in still}
        return requeued

    async def execute_here(self, run_id: UUID) -> None:
        """Drive the run in this process until it ends or pauses (what a dispatched job does).

        Returns at once when the run needs no execution. Cancelled while the process shuts down,
        it stops the run's task first (the log keeps where the run stands); cancelled otherwise
        (the job worker stopped), the run goes on here.
        """
        if not _needs_execution(await self.runs.state(run_id)) and run_id not in self._tasks:
            return
        task = self._run_here(run_id)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if self.closing:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            raise

    def foreign_events(self, events: Sequence[ev.RunEvent]) -> None:
        """Events another process appended: a cancel of a run executing here reaches its task."""
        for event in events:
            if isinstance(event, ev.RunCancelRequested) and event.originator_id in self._tasks:
                task = asyncio.ensure_future(self._cancelled_elsewhere(event.originator_id))
                self._expiring.add(task)
                task.add_done_callback(self._expiring.discard)

    async def _cancelled_elsewhere(self, run_id: UUID) -> None:
        try:
            await (await self.runs.writer(run_id)).catch_up()
        except Exception:
            logger.warning("run %s: could not read the cancel another process recorded", run_id.hex, exc_info=True)
        signal = self._cancel_events.get(run_id)
        if signal is not None:
            signal.set()

    def stop_taking_runs(self) -> None:
        """The process is shutting down: a dispatched run cancelled from now on stops its task here."""
        self.closing = True

    async def close(self) -> None:
        """Stop every run task; runs stay as the log has them and are recovered on the next start."""
        self.closing = True
        for handle in self._deadlines.values():
            handle.cancel()
        self._deadlines.clear()
        tasks = list(self._tasks.values()) + list(self._expiring)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        self._tasks.clear()
        self._cancel_events.clear()
        await self.registry.aclose()

    # ---- reads the sessions use ------------------------------------------------------

    def executing(self, run_id: UUID) -> bool:
        """True while this process has a task for the run."""
        return run_id in self._tasks

    def definition(self, progress: Progress) -> WorkflowDefinition:
        """The workflow version the run recorded (its AGENTIC planner settings included)."""
        name, version = progress.workflow_name, progress.workflow_version
        try:
            return self.workflows.version(name, version).definition
        except WorkflowNotFound:
            raise RunFailure(f"workflow {name!r} version {version} is not in the catalogue; the run cannot go on") from None

    # ---- execution ---------------------------------------------------------------------

    def _lock(self, run_id: UUID) -> asyncio.Lock:
        """The run's control lock (start, answer, cancel and a session's end take turns); kept while in use."""
        lock = self._locks.get(run_id)
        if lock is None:
            lock = self._locks[run_id] = asyncio.Lock()
        return lock

    async def _schedule(self, run_id: UUID) -> None:
        """Have the run executed: here at once, or by a job (unless it executes here already)."""
        task = self._tasks.get(run_id)
        if task is not None and not task.done():
            return
        if self.dispatch is None:
            self._run_here(run_id)
        else:
            await self.dispatch.defer(run_id)

    def _run_here(self, run_id: UUID) -> asyncio.Task[None]:
        """The run's task in this process (started if there is none), outside any request's deadline."""
        task = self._tasks.get(run_id)
        if task is None or task.done():
            task = self._tasks[run_id] = asyncio.create_task(
                self._drive(run_id), name=f"flowtrail-run-{run_id.hex}", context=outside_requests(),
            )
            RUNS_ACTIVE.inc()
            task.add_done_callback(lambda _: RUNS_ACTIVE.dec())
        return task

    async def _settle(self, run_id: UUID, *, schedule: bool) -> None:
        try:
            if schedule:
                await self._schedule(run_id)
        finally:
            if run_id not in self._tasks:
                await self.runs.release(run_id)

    async def _drive(self, run_id: UUID) -> None:
        """Run sessions until the run ends or waits for an answer."""
        signal = self._cancel_events.setdefault(run_id, asyncio.Event())
        try:
            (await self.runs.writer(run_id)).executing = True
            while True:
                before = (await self.runs.writer(run_id)).run.version
                progress = await self._session(run_id, signal)
                async with self._lock(run_id):
                    run = (await self.runs.writer(run_id)).run
                    if run.status in EXECUTING and run.version != before:
                        continue  # answered, or cancel requested, while this session was ending
                    if run.status in EXECUTING:
                        raise RuntimeError(f"the engine made no progress with the run ({run.status.value})")
                    if run.status is RunStatus.PAUSED and progress is not None:
                        self._arm(run_id, progress)
                    self._tasks.pop(run_id, None)
                    self._cancel_events.pop(run_id, None)
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

    async def _let_go(self, run_id: UUID) -> None:
        """Forget a run another process executes now (its buffered events are not stored)."""
        async with self._lock(run_id):
            self._tasks.pop(run_id, None)
            self._cancel_events.pop(run_id, None)
            try:
                await self.runs.release(run_id)
            except RunTakenOver:
                pass

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
        session = RunSession(self.tools, run_id, journal, progress, signal)
        await session.finish(await session.execute(lambda: self.definition(progress)))
        return progress

    async def _know_version(self, progress: Progress) -> None:
        """Read the catalogue again when the run's version is not known here (published through another replica)."""
        try:
            self.workflows.version(progress.workflow_name, progress.workflow_version)
        except WorkflowNotFound:
            await self.workflows.load()

    # ---- paused runs keep their time limit ---------------------------------------------

    def _arm(self, run_id: UUID, progress: Progress) -> None:
        """Fail the paused run when its time limit passes (answering or cancelling disarms it)."""
        self._disarm(run_id)
        started = progress.started_at or utcnow()
        remaining = self.settings.run_timeout_seconds - (utcnow() - started).total_seconds()
        loop = asyncio.get_running_loop()
        self._deadlines[run_id] = loop.call_later(max(0.0, remaining), self._expire_soon, run_id)

    def _disarm(self, run_id: UUID) -> None:
        handle = self._deadlines.pop(run_id, None)
        if handle is not None:
            handle.cancel()

    def _expire_soon(self, run_id: UUID) -> None:
        self._deadlines.pop(run_id, None)
        task = asyncio.ensure_future(self._expire(run_id))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    async def _expire(self, run_id: UUID) -> None:
        async with self._lock(run_id):
            writer = await self.runs.writer(run_id)
            try:
                if writer.run.status is RunStatus.PAUSED:
                    progress = fold_progress(await self.runs.events(run_id))
                    session = RunSession(self.tools, run_id, Journal(writer, self._inflight), progress, asyncio.Event())
                    limit = self.settings.run_timeout_seconds
                    await session.finish(Failed(
                        f"the run timed out after {limit:g} s (its time limit) while waiting for an answer"))
            except FlowtrailError as refused:  # another replica answered, cancelled or failed it first
                logger.info("run %s: its time limit passed, but %s", run_id.hex, refused)
            finally:
                if run_id not in self._tasks:
                    await self.runs.release(run_id)

    async def _fail_after_error(self, run_id: UUID, error: Exception) -> None:
        """Record RunFailed; while the store is unavailable, try again with capped backoff until it records
        it or the process shuts down (the run's task stays registered meanwhile, so shutdown cancels it)."""
        if isinstance(error, StoreUnavailable):
            reason = f"the store could not record the run's events: {error}"
        else:
            reason = f"internal error: {type(error).__name__}: {error}"
        delay = FAIL_RETRY_FIRST_SECONDS
        try:
            while True:
                async with self._lock(run_id):
                    try:
                        writer = await self.runs.writer(run_id)
                        writer.executing = False  # what it reads back may be its own last append
                        if not writer.run.status.is_terminal:
                            await writer.decide(partial(decide.fail_run, error=reason))
                        return
                    except StoreUnavailable as still:
                        if delay == FAIL_RETRY_FIRST_SECONDS:
                            logger.warning("run %s: cannot record its failure yet (%s); retrying", run_id.hex, still)
                        await self._forget_writer(run_id)
                    except Exception:
                        logger.exception("could not record the failure of run %s", run_id.hex)
                        return
                await asyncio.sleep(delay)
                delay = min(delay * 2, FAIL_RETRY_MAX_SECONDS)
        finally:
            async with self._lock(run_id):
                self._tasks.pop(run_id, None)
                self._cancel_events.pop(run_id, None)
                await self._forget_writer(run_id)

    async def _forget_writer(self, run_id: UUID) -> None:
        """Release the run's writer; one that cannot flush now is dropped (the next reads the log)."""
        try:
            await self.runs.release(run_id)
        except Exception:
            logger.debug("run %s: writer released without flushing", run_id.hex, exc_info=True)


def _needs_execution(run: decide.Run) -> bool:
    """True when a run is executing, or was asked to cancel and has not ended."""
    return run.status in EXECUTING or (run.cancel_requested and not run.status.is_terminal)

