"""AGENTIC mode: a planner model picks each next node; nodes may be visited again, within limits.

The next step is a pure function of the log (`next_step`): resume an open visit, ask the
planner after a finished one, or visit the node the last decision named. A finish decision
visits the workflow's output node, whose envelope becomes the run's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from domain import run as decide
from domain.errors import AnswerNotJson
from domain.events import PlannerDecided
from domain.failures import FailureCode
from domain.outputs import parse_json_answer
from domain.vocabulary import VISIT_FAILED, VISIT_SKIPPED, VISIT_SUCCESS
from domain.workflow import AnyNode, WorkflowDefinition, node_by_id, start_nodes
from engine.execution.calls import ModelCalls
from engine.execution.errors import CancelHalt, RunFailure, describe_llm_error
from engine.execution.models import scripted_planner
from engine.execution.outcomes import Completed, Failed, Paused, RunOutcome, node_failed
from engine.execution.progress import Progress, VisitProgress
from engine.execution.session import RunSession
from engine.llm import (
    SCRIPTED_ID,
    CompletionRequest,
    LlmCancelled,
    LlmError,
    LlmProvider,
    Message,
    RetryBudget,
)
from engine.llm.metered import metered
from projections.wire import to_json

PLANNER_ATTEMPTS = 2
OUTPUT_PREVIEW_CHARS = 300
StepKind = Literal["visit", "resume", "plan", "complete", "fail"]


class PlannerAnswerInvalid(ValueError):
    """The planner's answer is not a valid decision; the message says why."""


@dataclass(frozen=True)
class Step:
    """What an AGENTIC run does next."""

    kind: StepKind
    node_id: str | None = None
    visit: VisitProgress | None = None
    error: str = ""
    code: FailureCode = "RUN_FAILED"


def parse_decision(text: str, node_ids: list[str]) -> tuple[str | None, str]:
    """(next node id or None to finish, reason) from the planner's strict JSON answer."""
    try:
        answer = parse_json_answer(text)
    except AnswerNotJson as error:
        raise PlannerAnswerInvalid(error.message) from None
    reason = answer.get("reason")
    if not isinstance(reason, str):
        raise PlannerAnswerInvalid('the answer needs a "reason" string')
    if answer.get("finish") is True or ("nextNodeId" in answer and answer["nextNodeId"] is None):
        return None, reason
    next_node = answer.get("nextNodeId")
    if not isinstance(next_node, str):
        raise PlannerAnswerInvalid('the answer needs "nextNodeId": a node id, or null to finish')
    if next_node not in node_ids:
        raise PlannerAnswerInvalid(f"nextNodeId {next_node!r} is not a node of the workflow ({', '.join(node_ids)})")
    return next_node, reason


def _last_visit_before(trail: list[Any], end: int) -> VisitProgress | None:
    return next((item for item in reversed(trail[:end]) if isinstance(item, VisitProgress)), None)


def next_step(defn: WorkflowDefinition, progress: Progress) -> Step:
    """The next step of an AGENTIC run, from its log alone."""
    trail = progress.trail
    if not trail:
        starts = start_nodes(defn)
        return Step("visit", starts[0]) if starts else Step("fail", error="the workflow has no start node", code="VALIDATION_FAILED")
    last = trail[-1]
    if isinstance(last, PlannerDecided):
        came = _last_visit_before(trail, len(trail))
        if last.next_node_id is not None:
            return Step("visit", last.next_node_id, came)
        outputs = [node.id for node in defn.nodes if node.type == "output"]
        return Step("visit", outputs[0], came) if outputs else Step("fail", error="the workflow has no output node", code="VALIDATION_FAILED")
    if last.is_open:
        return Step("resume", last.node_id, last)
    if last.status == VISIT_FAILED:
        return Step("fail", last.node_id, last, error=node_failed(last.node_id, last.error or ""),
                    code=last.error_code or "RUN_FAILED")
    node = node_by_id(defn, last.node_id)
    if last.status == VISIT_SUCCESS and node is not None and node.type == "output":
        return Step("complete", last.node_id, last)
    return Step("plan", last.node_id, last)


def _preview(value: Any) -> str:
    text = to_json(value)
    return text if len(text) <= OUTPUT_PREVIEW_CHARS else text[:OUTPUT_PREVIEW_CHARS] + "..."


def _describe(node: AnyNode) -> str:
    about = node.data.about[:200]
    label = f" {node.label!r}" if node.label else ""
    return f"- {node.id} ({node.type}){label}" + (f": {about}" if about else "")


def planner_messages(defn: WorkflowDefinition, progress: Progress, goal: str) -> list[Message]:
    """The planner's prompt: the nodes, the run's inputs, the visits so far, and the answer format."""
    nodes = "\n".join(_describe(node) for node in defn.nodes)
    visits = "\n".join(
        f"{visit.sort_order}. {visit.node_id} (visit {visit.iter_seq}): {visit.status} {_preview(visit.data)}"
        for visit in progress.visits.values()
    )
    text = (
        f"You plan the workflow {defn.display_name!r} ({defn.name}). {defn.description}\n{goal}\n\n"
        f"Nodes:\n{nodes}\n\nRun inputs: {_preview(progress.variables)}\n\nVisits so far:\n{visits}\n\n"
        'Choose the next node to visit. Answer with only a JSON object: {"nextNodeId": "<node id>", "reason": "<why>"}. '
        'To finish the run, answer {"nextNodeId": null, "reason": "<why>"}.'
    )
    return [Message("user", text)]


class Planner:
    """The run's planner model: one strict-JSON decision per call, one retry for an invalid answer."""

    def __init__(self, session: RunSession) -> None:
        self.session = session
        assert session.defn is not None
        settings = session.defn.planner
        model_id = self.model_id = settings.model_id or session.registry.default_model_id
        if model_id == SCRIPTED_ID:
            self.provider: LlmProvider = scripted_planner(
                settings.script, skip_turns=session.progress.decisions,
                seed=f"{session.run_id}:planner", pace_seconds=session.settings.scripted_pace_seconds,
            )
        else:
            self.provider = session.registry.provider_for(model_id)
        self.provider = metered(self.provider, model_id)
        self.goal = settings.prompt

    async def decide(self) -> tuple[str | None, str]:
        """The next node (None: finish) and the reason; RunFailure after two invalid answers.

        One decision has one retry budget, spent by its model-call retries and its second ask alike.
        """
        session = self.session
        assert session.defn is not None
        messages = planner_messages(session.defn, session.progress, self.goal)
        node_ids = [node.id for node in session.defn.nodes]
        budget = RetryBudget(session.settings.model_retry_budget)
        calls = ModelCalls(session.journal, session.settings, budget, cancel=session.cancel_event)
        problem = ""
        for attempt in range(PLANNER_ATTEMPTS):
            if attempt and not budget.take():
                raise RunFailure(
                    f"the planner gave no valid decision before its retry budget of {budget.limit} was spent: {problem}",
                    "OUTPUT_INVALID")
            text = await self._ask(calls, messages)
            try:
                return parse_decision(text, node_ids)
            except PlannerAnswerInvalid as error:
                problem = str(error)
                messages += [Message("assistant", text), Message("user", f"That answer is invalid: {problem}. Answer again.")]
        raise RunFailure(f"the planner gave no valid decision in {PLANNER_ATTEMPTS} attempts: {problem}", "OUTPUT_INVALID")

    async def _ask(self, calls: ModelCalls, messages: list[Message]) -> str:
        request = CompletionRequest(messages=list(messages), purpose="planner", response_format_json=True)
        try:
            return (await calls.complete(self.model_id, self.provider, request)).text
        except LlmCancelled:
            if self.session.cancel_requested:
                raise CancelHalt() from None
            raise RunFailure("the planner call was cancelled", "MODEL_UNAVAILABLE") from None
        except LlmError as error:
            raise RunFailure(f"the planner failed: {describe_llm_error(error)}", "MODEL_UNAVAILABLE") from None


def check_limits(session: RunSession, node_id: str) -> None:
    """RunFailure when one more visit of the node would pass its limit or the run's."""
    assert session.defn is not None
    limits, settings = session.defn.limits, session.settings
    per_node = min(limits.max_visits_per_node, settings.max_visits_per_node)
    per_run = min(limits.max_visits_per_run, settings.max_visits_per_run)
    visits = [visit for visit in session.progress.visits_of(node_id) if visit.status != VISIT_SKIPPED]
    if len(visits) >= per_node:
        raise RunFailure(f"node {node_id!r} reached its limit of {per_node} visits", "BUDGET_EXHAUSTED")
    if session.progress.started_visits() >= per_run:
        raise RunFailure(f"the run reached its limit of {per_run} visits", "BUDGET_EXHAUSTED")


async def run_agentic(session: RunSession) -> RunOutcome:
    """Visit, plan, visit... until an output node completes, a visit fails, or one asks a question."""
    assert session.defn is not None
    planner: Planner | None = None
    while True:
        step = next_step(session.defn, session.progress)
        if step.kind == "complete":
            assert step.visit is not None
            return Completed(step.visit.data)
        if step.kind == "fail":
            return Failed(step.error, step.code)
        session.check_handover()  # the step is a planner call or a visit: none begins while the process stops
        if step.kind == "plan":
            session.check_cancel()
            planner = planner or Planner(session)
            next_node, reason = await planner.decide()
            await session.decide(partial(decide.decide_next, next_node_id=next_node, reason=reason, from_node_id=step.node_id))
            continue
        assert step.node_id is not None
        node = session.node(step.node_id)
        if step.kind == "resume":
            assert step.visit is not None
            outcome = await session.run_visit(node, step.visit, resumed=True)
        else:
            check_limits(session, node.id)
            iter_seq = len(session.progress.visits_of(node.id)) + 1
            came = step.visit
            visit = await session.start_visit(node, iter_seq=iter_seq, came_from=came,
                                              predecessors=(came.visit_uuid,) if came else ())
            outcome = await session.run_visit(node, visit)
        if isinstance(outcome, Failed):
            return Failed(node_failed(node.id, outcome.error), outcome.code)
        if isinstance(outcome, Paused):
            return outcome
