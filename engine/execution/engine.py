"""The workflow engine: starts runs, answers their questions, cancels them, recovers them after a restart.

Each executing run has one task that runs sessions (engine.execution.session) until the run
ends or pauses. Nothing the engine knows lives only in memory: a session is rebuilt from the
log every time, so a pause, a restart or a crash all resume the same way.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import replace
from functools import partial
from typing import Any, Literal, Protocol
from uuid import UUID

from domain import run as decide
from domain.errors import RunAlreadyFinished
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
from engine.settings import EngineSettings
from engine.store.deadline import outside_requests
from engine.workspace.directory import Workspace

logger = logging.getLogger("flowtrail.engine")


CancelOutcome = Literal["requested", "already_requested", "already_finished"]


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
        for run_id in await self.runs.unfinished():
            run = await self.runs.state(run_id)
            if run.status in EXECUTING or (run.cancel_requested and not run.status.is_terminal):
                logger.info("recovering run %s (%s)", run_id.hex, run.status.value)
                async with self._lock(run_id):
                    self._schedule(run_id)
            elif run.status is RunStatus.PAUSED:
                self._arm(run_id, fold_progress(await self.runs.events(run_id)))

    async def close(self) -> None:
        """Stop every run task; runs stay as the log has them and are recovered on the next start."""
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

    def _schedule(self, run_id: UUID) -> None:
        task = self._tasks.get(run_id)
        if task is None or task.done():
            task = self._tasks[run_id] = asyncio.create_task(
                self._drive(run_id), name=f"flowtrail-run-{run_id.hex}", context=outside_requests(),
            )
            RUNS_ACTIVE.inc()
            task.add_done_callback(lambda _: RUNS_ACTIVE.dec())

    async def _settle(self, run_id: UUID, *, schedule: bool) -> None:
        if schedule:
            self._schedule(run_id)
        elif run_id not in self._tasks:
            await self.runs.release(run_id)

    async def _drive(self, run_id: UUID) -> None:
        """Run sessions until the run ends or waits for an answer."""
        signal = self._cancel_events.setdefault(run_id, asyncio.Event())
        try:
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
        session = RunSession(self.tools, run_id, journal, progress, signal)
        await session.finish(await session.execute(lambda: self.definition(progress)))
        return progress

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
            finally:
                if run_id not in self._tasks:
                    await self.runs.release(run_id)

    async def _fail_after_error(self, run_id: UUID, error: Exception) -> None:
        async with self._lock(run_id):
            self._tasks.pop(run_id, None)
            self._cancel_events.pop(run_id, None)
            try:
                writer = await self.runs.writer(run_id)
                if not writer.run.status.is_terminal:
                    await writer.decide(partial(decide.fail_run, error=f"internal error: {type(error).__name__}: {error}"))
            except Exception:
                logger.exception("could not record the failure of run %s", run_id.hex)
            finally:
                await self.runs.release(run_id)
