"""The workflow engine's commands: start a run, answer its question, cancel it; and take runs up again.

Each command is get -> decide -> save under the run's lock: the run's writer, the decision
(domain.run) appended through it, then the run handed to whatever executes it. Where a run
executes is pluggable: without a dispatch (SQLite) this process drives it at once (a run
task, engine.execution.tasks); with one (PostgreSQL) starting, answering, cancelling and
recovering defer a job, and the replica whose worker takes the job drives the run here
(`RunTasks.execute_here`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from uuid import UUID

from domain.errors import RunAlreadyFinished
from domain.run import EXECUTING, Run, answer_clarify, request_cancel, start_run
from engine.execution import recovery
from engine.execution.ports import CancelOutcome, RunDispatch, RunExecutor
from engine.execution.tasks import RunTasks
from engine.runs.service import RunService


class Engine(RunExecutor):
    """Executes runs; every step it takes is an appended run event."""

    def __init__(self, runs: RunService, tasks: RunTasks, *, dispatch: RunDispatch | None = None) -> None:
        self.runs = runs
        self.tasks = tasks
        self.dispatch = dispatch
        """None: runs execute in this process at once; else they are deferred as jobs."""
        self._needs_no_job: dict[UUID, int] = {}
        """Runs without a job found not to need one (paused), by the last position they were checked at."""

    async def start(self, run_id: UUID) -> None:
        """Append RunStarted (RunAlreadyStarted / RunAlreadyFinished refuse it) and begin executing."""
        async with self.tasks.writing(run_id) as writer:
            await writer.decide(start_run)
            await self.tasks.ensure(run_id, self.dispatch)

    async def answer(self, run_id: UUID, clarify_id: str, answer: str) -> bool:
        """Append ClarifyAnswered and resume the run; True when it resumed at once."""
        async with self.tasks.writing(run_id) as writer:
            await writer.decide(partial(answer_clarify, clarify_id=clarify_id, answer=answer))
            resumed = writer.run.status in EXECUTING
            self.tasks.deadlines.disarm(run_id)
            if resumed:
                await self.tasks.ensure(run_id, self.dispatch)
            return resumed

    async def cancel(self, run_id: UUID) -> CancelOutcome:
        """Record a cancel request: "requested", "already_requested" or "already_finished"."""
        async with self.tasks.writing(run_id) as writer:
            if (needless := _needless_cancel(writer.run)) is not None:
                return needless
            try:
                await writer.decide(request_cancel)
            except RunAlreadyFinished:
                return "already_finished"
            self.tasks.deadlines.disarm(run_id)
            self.tasks.signal_cancel(run_id)
            await self.tasks.ensure(run_id, self.dispatch)
            return "requested"

    async def recover(self) -> None:
        """Resume runs that were executing when the process stopped; paused runs wait for their answer (within their time limit)."""
        await recovery.recover(self.runs, self.tasks, self.dispatch)

    async def requeue_orphans(self, running: Sequence[tuple[UUID, int]]) -> list[UUID]:
        """Queue a job for each run that needs execution and has none; `running` is (run, last position)
        of the runs the read model says are RUNNING."""
        return await recovery.requeue_orphans(self.runs, self.tasks, self.dispatch, running, self._needs_no_job)

    def executing(self, run_id: UUID) -> bool:
        """True while this process has a task for the run."""
        return self.tasks.executing(run_id)

    def stop_taking_runs(self) -> None:
        """The process stops: no visit begins here any more (each run stops at its next visit boundary)."""
        self.tasks.stop_taking_runs()

    async def drain(self, window: float) -> None:
        """Let the visits in flight end within `window` seconds, each run handed over at its visit boundary; stop
        the runs still in a visit then (logged)."""
        await self.tasks.drain(window)

    async def close(self) -> None:
        """Stop every run task; runs stay as the log has them and are recovered on the next start."""
        await self.tasks.close()


def _needless_cancel(run: Run) -> CancelOutcome | None:
    """Why a cancel request is not needed (None: it is)."""
    if run.status.is_terminal:
        return "already_finished"
    if run.cancel_requested:
        return "already_requested"
    return None
