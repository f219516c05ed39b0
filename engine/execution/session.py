"""One stretch of a run's execution: rebuilt from the log, it runs until the run ends or pauses.

A session starts from what the log says (visits done, visits still open, questions answered)
and appends every step it takes. Open visits are resumed from their last checkpoint: their
start, or the answer to their last question.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from uuid import UUID, uuid4

from domain import run as decide
from domain.errors import IllegalTransition
from domain.events import RunEvent, VisitSkipped
from domain.failures import FailureCode, without_addresses
from domain.outputs import OutputEnvelope
from domain.run import Run, RunStatus
from domain.workflow import MODEL_NODE_TYPES, AnyNode, ModelData, WorkflowDefinition, node_by_id
from engine.clock import utcnow
from engine.execution.errors import (
    CancelHalt,
    HandOverHalt,
    PauseForAnswer,
    RunFailure,
    VisitFailure,
    describe_llm_error,
)
from engine.execution.journal import Journal
from engine.execution.models import VisitModels
from engine.execution.nodes import EXECUTORS
from engine.execution.outcomes import (
    Cancelled,
    Completed,
    Done,
    Failed,
    HandedOver,
    Paused,
    RunOutcome,
    Skip,
    VisitOutcome,
)
from engine.execution.ports import ContextTools, Toolbox
from engine.execution.progress import Progress, VisitProgress
from engine.execution.remote import settle_remote_runs
from engine.execution.tools import is_idempotent
from engine.execution.visit import VisitContext
from engine.llm import LlmCancelled, LlmError, ModelRegistry
from engine.observability.tracing import visit_ended, visit_span
from engine.runs.writer import Decision
from engine.settings import EngineSettings
from engine.workspace.directory import Workspace

logger = logging.getLogger("flowtrail.engine")

RUN_OK = "工作流执行成功"
ModeRunner = Callable[["RunSession"], Awaitable[RunOutcome]]


@dataclass(frozen=True)
class SessionTools:
    """What every session of the engine works with besides its run."""

    settings: EngineSettings
    registry: ModelRegistry
    workspace: Workspace
    modes: Mapping[str, ModeRunner]
    context: ContextTools | None = None
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the process shuts down: visits then leave their gateway runs running for the next process."""


class RunSession:
    """Executes one run from where its log stands, appending every step."""

    def __init__(self, tools: SessionTools, run_id: UUID, journal: Journal, progress: Progress,
                 cancel_event: asyncio.Event, stopping: asyncio.Event | None = None) -> None:
        self.tools = tools
        self.registry = tools.registry
        self.run_id = run_id
        self.journal = journal
        self.progress = progress
        self.cancel_event = cancel_event
        self.stopping = stopping
        """Set when this process stops: the session ends at its next visit boundary (visits in flight go on)."""
        self.defn: WorkflowDefinition | None = None

    @property
    def settings(self) -> EngineSettings:
        """The engine's limits and pace."""
        return self.tools.settings

    @property
    def cancel_requested(self) -> bool:
        """True once a cancel request is in the log."""
        return self.journal.run.cancel_requested

    def check_cancel(self) -> None:
        """A safe point: stop here when a cancel was requested."""
        if self.cancel_requested:
            raise CancelHalt()

    @property
    def handing_over(self) -> bool:
        """True once this process stops: no visit (nor planner call) begins any more."""
        return self.stopping is not None and self.stopping.is_set()

    def check_handover(self) -> None:
        """A visit boundary: stop here when this process stops (the run goes on from its log elsewhere)."""
        if self.handing_over:
            raise HandOverHalt()

    def node(self, node_id: str) -> AnyNode:
        """The workflow's node with this id (RunFailure when the definition has none)."""
        assert self.defn is not None
        node = node_by_id(self.defn, node_id)
        if node is None:
            raise RunFailure(f"workflow {self.defn.name!r} has no node {node_id!r}", "VALIDATION_FAILED")
        return node

    async def decide(self, *decisions: Decision) -> list[RunEvent]:
        """Append decisions in one transaction and fold them into the progress (even if a time limit cuts the wait)."""
        return await self.journal.decide(*decisions, then=self._fold)

    def _fold(self, events: list[RunEvent]) -> None:
        for event in events:
            self.progress.apply(event)

    # ---- the whole run -------------------------------------------------------------

    async def execute(self, definition: Callable[[], WorkflowDefinition]) -> RunOutcome:
        """Run the workflow (its recorded version, from `definition`) from where the log stands to an outcome."""
        try:
            self.check_cancel()
            self.check_handover()
            self.defn = definition()
            remaining = self._time_left()
            if remaining <= 0:
                return Failed(self._timeout_error(), "RUN_TIMEOUT")
            async with asyncio.timeout(remaining):
                return await self.tools.modes[self.defn.mode](self)
        except CancelHalt:
            return Cancelled()
        except HandOverHalt:
            return HandedOver()
        except RunFailure as error:
            return Failed(str(error), error.code)
        except TimeoutError:
            return Failed(self._timeout_error(), "RUN_TIMEOUT")

    def _time_left(self) -> float:
        started = self.progress.started_at or utcnow()
        return self.settings.run_timeout_seconds - (utcnow() - started).total_seconds()

    def _timeout_error(self) -> str:
        return f"the run timed out after {self.settings.run_timeout_seconds:g} s (its time limit)"

    async def finish(self, outcome: RunOutcome) -> None:
        """Append the outcome: the terminal event (closing any open visit), or the question that pauses the run;
        a hand-over appends nothing.

        An append the run's time limit cut short still lands (it is shielded); the flush waits for it, so the
        visits closed here are the ones still open once it has.
        """
        await self.journal.flush()
        if isinstance(outcome, (Completed, Paused, HandedOver)) and self.cancel_requested:
            outcome = Cancelled()
        if isinstance(outcome, HandedOver):
            return
        if not isinstance(outcome, Paused):
            reason = "cancelled" if self.cancel_requested else "run_ended"
            await settle_remote_runs(self.journal, self.progress, self.settings.hermes_gateways, reason)
        try:
            await self._append_outcome(outcome)
        except IllegalTransition:
            if not self.cancel_requested or isinstance(outcome, Cancelled):
                raise
            await self._append_outcome(Cancelled())

    async def _append_outcome(self, outcome: RunOutcome) -> None:
        if isinstance(outcome, Paused):
            ask, visit = outcome.ask, outcome.visit
            await self.decide(partial(
                decide.request_clarify, clarify_id=ask.clarify_id, visit_uuid=visit.visit_uuid,
                node_id=visit.node_id, question=ask.question, choices=tuple(ask.choices), turn=ask.turn,
            ))
        elif isinstance(outcome, Completed):
            files = tuple(await asyncio.to_thread(self.tools.workspace.files, self.run_id))
            output = OutputEnvelope.succeeded(outcome.data, RUN_OK).as_json()
            await self.decide(*self._close_open("stopped: the run completed"),
                              partial(decide.complete_run, output=output, working_dir_files=files))
        elif isinstance(outcome, Failed):
            error = without_addresses(outcome.error)
            await self.decide(*self._close_open(f"stopped: {error}", outcome.code),
                              partial(decide.fail_run, error=error, error_code=outcome.code))
        else:
            await self.decide(*self._close_open("cancelled: the run was cancelled", "RUN_CANCELLED"), decide.cancel_run)

    def _close_open(self, error: str, code: FailureCode | None = None) -> list[Decision]:
        """Decisions that fail (and record) every open visit; a paused run's waiting visit is abandoned."""
        decisions: list[Decision] = []
        paused = self.journal.run.status is RunStatus.PAUSED
        for visit_uuid in sorted(self.journal.run.open_visits):
            node_id = self.progress.visits[visit_uuid].node_id
            close = decide.abandon_paused_visit if paused else decide.fail_visit
            decisions.append(partial(close, visit_uuid=visit_uuid, node_id=node_id, error=error,
                                     output=OutputEnvelope.failed(error).as_json(), error_code=code))
            if not paused:
                decisions.append(partial(decide.record_visit, visit_uuid=visit_uuid, node_id=node_id))
        return decisions

    # ---- visits --------------------------------------------------------------------

    async def start_visit(self, node: AnyNode, *, iter_seq: int, came_from: VisitProgress | None = None,
                          predecessors: tuple[str, ...] = ()) -> VisitProgress:
        """Open a visit of a node (a safe point: a pending cancel stops the run instead)."""
        self.check_cancel()
        visit_uuid = str(uuid4())
        await self.decide(lambda run, at: decide.start_visit(
            run, at, visit_uuid=visit_uuid, node_id=node.id, node_type=node.type, node_label=node.label or node.id,
            iter_seq=iter_seq, sort_order=run.visit_count + 1,
            from_node_id=came_from.node_id if came_from else None,
            from_visit_uuid=came_from.visit_uuid if came_from else None,
            predecessor_visit_uuids=predecessors,
        ))
        return self.progress.visits[visit_uuid]

    async def skip(self, skips: list[Skip]) -> None:
        """Record nodes a branch condition excluded, each as a skipped (and recorded) visit."""
        decisions: list[Decision] = []
        for item in skips:
            node, visit_uuid = self.node(item.node_id), str(uuid4())
            decisions.append(partial(_skip, visit_uuid=visit_uuid, node=node, iter_seq=item.iter_seq, reason=item.reason))
            decisions.append(partial(decide.record_visit, visit_uuid=visit_uuid, node_id=node.id))
        await self.decide(*decisions)

    async def run_visit(self, node: AnyNode, visit: VisitProgress, *, resumed: bool = False) -> VisitOutcome:
        """Execute an open visit to its end: completed, failed, or paused on a question (in the visit's span)."""
        with visit_span(self.run_id, visit.visit_uuid, node.id, node.type, visit.iter_seq,
                        model=node.type in MODEL_NODE_TYPES, resumed=resumed) as traced:
            try:
                outcome = await self._run_visit(node, visit, resumed)
            except CancelHalt:
                visit_ended(traced, "CANCELLED")
                raise
            except RunFailure as failure:
                visit_ended(traced, "FAILED", failure.code)
                raise
            if isinstance(outcome, Failed):
                visit_ended(traced, "FAILED", outcome.code)
            else:
                visit_ended(traced, "PAUSED" if isinstance(outcome, Paused) else "SUCCESS")
            return outcome

    async def _run_visit(self, node: AnyNode, visit: VisitProgress, resumed: bool) -> VisitOutcome:
        ctx = self._context(node, visit)
        context = self.tools.context if node.type in MODEL_NODE_TYPES and not _remote(node) else None
        try:
            if context is not None:
                ctx.toolbox = self._toolbox(context, visit)
            outcome = await self._attempt(ctx, resumed)
        finally:
            if context is not None:
                await context.close(self.run_id, visit.visit_uuid, ctx.toolbox)
        if isinstance(outcome, Done):
            await self.decide(
                partial(decide.complete_visit, visit_uuid=visit.visit_uuid, node_id=node.id, output=outcome.envelope.as_json()),
                partial(decide.record_visit, visit_uuid=visit.visit_uuid, node_id=node.id),
            )
        return outcome

    async def _attempt(self, ctx: VisitContext, resumed: bool) -> VisitOutcome:
        """Run the node's executor; a failure is appended here, a pause is left to the runner."""
        try:
            if resumed:
                await self._resume_note(ctx)
            return Done(await self._timed(ctx))
        except PauseForAnswer as ask:
            return Paused(ctx.visit, ask)
        except LlmCancelled as error:
            if self.cancel_requested:
                raise CancelHalt() from None
            return await self._fail(ctx, f"model call cancelled: {error}", "MODEL_UNAVAILABLE")
        except LlmError as error:
            return await self._fail(ctx, describe_llm_error(error), "MODEL_UNAVAILABLE")
        except VisitFailure as error:
            return await self._fail(ctx, str(error), error.code)
        except (CancelHalt, RunFailure):
            raise
        except Exception as error:
            logger.exception("visit %s of run %s failed unexpectedly", ctx.visit.visit_uuid, self.run_id)
            return await self._fail(ctx, f"internal error: {type(error).__name__}: {error}", "INTERNAL_ERROR")

    def _context(self, node: AnyNode, visit: VisitProgress) -> VisitContext:
        scope = self.progress.scope()
        models = VisitModels(
            self.registry, node.data, iter_seq=visit.iter_seq, seed=f"{self.run_id}:{node.id}:{visit.iter_seq}",
            pace_seconds=self.settings.scripted_pace_seconds, skip_turns=visit.turns_done, scope=scope,
        )
        return VisitContext(
            node, visit, run_id=self.run_id, journal=self.journal, workspace=self.tools.workspace,
            settings=self.settings, cancel_event=self.cancel_event, inputs=self.progress, models=models, scope=scope,
            closing=self.tools.closing, context=self.tools.context if _remote(node) else None,
        )

    async def _timed(self, ctx: VisitContext) -> OutputEnvelope:
        seconds = ctx.node.data.timeout_seconds or self.settings.node_timeout_seconds
        try:
            async with asyncio.timeout(seconds):
                return await EXECUTORS[ctx.node.type](ctx)
        except TimeoutError:
            raise VisitFailure(f"the node timed out after {seconds:g} s (its time limit)", "NODE_TIMEOUT") from None

    async def _fail(self, ctx: VisitContext, error: str, code: FailureCode) -> Failed:
        """Record the visit's failure; its text never names an address (a client reads it)."""
        visit, node_id, error = ctx.visit, ctx.node.id, without_addresses(error)
        await ctx.status(f"error: {error}")
        await self.decide(
            partial(decide.fail_visit, visit_uuid=visit.visit_uuid, node_id=node_id, error=error,
                    output=OutputEnvelope.failed(error).as_json(), error_code=code),
            partial(decide.record_visit, visit_uuid=visit.visit_uuid, node_id=node_id),
        )
        return Failed(error, code)

    async def _resume_note(self, ctx: VisitContext) -> None:
        visit = ctx.visit
        if visit.answers and not visit.streamed_since_checkpoint:
            answer = visit.answers[-1].answer
            shown = answer if len(answer) <= 200 else answer[:197] + "..."
            await ctx.status(f"answer received ({shown}); continuing")
            return
        if visit.interrupted and _remote(ctx.node) and visit.remote_events:
            await ctx.status("this visit was interrupted before it ended; taking up its gateway run where the log left it")
            return
        if visit.interrupted:
            unsafe = self._unsafe_to_rerun(ctx.node, visit)
            if unsafe:
                code: FailureCode = "REMOTE_OUTCOME_UNKNOWN" if _remote(ctx.node) else "INTERRUPTED"
                raise VisitFailure(
                    f"the engine stopped while this visit was running, and it cannot be re-run safely: {unsafe}", code)
        where = "after the answer to its last question" if visit.answers else "from its start"
        await ctx.status(f"this visit was interrupted before it ended; running it again {where}")

    def _unsafe_to_rerun(self, node: AnyNode, visit: VisitProgress) -> str | None:
        if not node.data.recoverable:
            return "the node is marked recoverable=false"
        repeated = [name for name in visit.tools_since_checkpoint if not is_idempotent(name)]
        if repeated:
            return f"it had already called {', '.join(dict.fromkeys(repeated))}, which must not run twice"
        return None

    def _toolbox(self, context: ContextTools, visit: VisitProgress) -> Toolbox | None:
        """The context toolbox of a model visit (None when it gets none)."""
        try:
            return context.open(self.run_id, visit.visit_uuid)
        except Exception as error:  # noqa: BLE001 - the visit goes on without context tools
            logger.warning("no context tools for visit %s of run %s: %s", visit.visit_uuid, self.run_id, type(error).__name__)
            return None


def _remote(node: AnyNode) -> bool:
    """True when the node's visits run on a Hermes gateway."""
    return isinstance(node.data, ModelData) and node.data.remote


def _skip(run: Run, at: datetime, *, visit_uuid: str, node: AnyNode, iter_seq: int, reason: str) -> VisitSkipped:
    return decide.skip_visit(
        run, at, visit_uuid=visit_uuid, node_id=node.id, node_type=node.type, node_label=node.label or node.id,
        iter_seq=iter_seq, sort_order=run.visit_count + 1, reason=reason,
    )
