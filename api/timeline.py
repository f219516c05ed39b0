"""GET /api/v1/runs/{runId}/timeline: when each visit ran and waited, and the tokens (and cost) of each and of the run.

Folded from the run's events with its other projections (`projections.timeline`, held by the hot run); costs use
FLOWTRAIL_MODEL_PRICES.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from litestar import Controller, get
from litestar.di import Provide

from api.dependencies import Injected, run_by_id
from api.envelope import Envelope, ok
from api.openapi import error_responses
from api.paths import RUN_TIMELINE
from api.schemas import RunTimelineView, TimedTokens, VisitTimeView, WaitView
from engine.clock import utcnow
from engine.llm.config import ModelPrice
from engine.runs.hot import HotRun
from engine.settings import Settings
from projections.timeline import RunTimeline, VisitTime
from projections.wire import iso_utc

COST_DIGITS = 6


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def millis(start: datetime | None, end: datetime | None) -> int | None:
    """Whole milliseconds from `start` to `end` (None when either is unknown)."""
    if start is None or end is None:
        return None
    return max(0, round((_aware(end) - _aware(start)).total_seconds() * 1000))


def priced(tokens: Mapping[str, list[int]], prices: Mapping[str, ModelPrice]) -> TimedTokens:
    """The tokens summed over models, and their cost when every model that used some has a price in one currency."""
    prompt = sum(counts[0] for counts in tokens.values())
    completion = sum(counts[1] for counts in tokens.values())
    used = {model: counts for model, counts in tokens.items() if counts[0] or counts[1]}
    if not prices or any(model not in prices for model in used):
        return TimedTokens(prompt_tokens=prompt, completion_tokens=completion, cost=None, currency=None)
    currencies = {prices[model].currency for model in used} or {next(iter(prices.values())).currency}
    if len(currencies) > 1:
        return TimedTokens(prompt_tokens=prompt, completion_tokens=completion, cost=None, currency=None)
    cost = sum(counts[0] / 1000 * prices[model].input_per_1k + counts[1] / 1000 * prices[model].output_per_1k
               for model, counts in used.items())
    return TimedTokens(prompt_tokens=prompt, completion_tokens=completion, cost=round(cost, COST_DIGITS),
                       currency=currencies.pop())


def visit_view(visit: VisitTime, prices: Mapping[str, ModelPrice], as_of: datetime) -> VisitTimeView:
    """One visit on the timeline; a visit still running is measured to `as_of`."""
    end = visit.ended_at or as_of
    return VisitTimeView(
        visit_uuid=visit.visit_uuid, node_id=visit.node_id, node_label=visit.node_label, iter_seq=visit.iter_seq,
        status=visit.status, started_at=iso_utc(visit.started_at), completed_at=iso_utc(visit.ended_at),
        duration_ms=millis(visit.started_at, end),
        waiting_ms=sum(millis(wait.asked_at, wait.answered_at or end) or 0 for wait in visit.waits),
        waits=[WaitView(asked_at=iso_utc(w.asked_at), answered_at=iso_utc(w.answered_at)) for w in visit.waits],
        usage=priced(visit.tokens, prices), models=sorted(visit.tokens),
    )


def timeline_view(run_id: str, timeline: RunTimeline, prices: Mapping[str, ModelPrice], as_of: datetime) -> RunTimelineView:
    """The whole timeline as the API answers it."""
    return RunTimelineView(
        run_id=run_id, as_of=iso_utc(as_of), created_at=iso_utc(timeline.created_at),
        started_at=iso_utc(timeline.started_at), completed_at=iso_utc(timeline.ended_at),
        duration_ms=millis(timeline.started_at, timeline.ended_at or (as_of if timeline.started_at else None)),
        usage=priced(timeline.tokens, prices),
        visits=[visit_view(visit, prices, as_of) for visit in timeline.in_order()],
    )


class RunTimelineController(Controller):
    """A run's visits in time, with their tokens and cost."""

    path = RUN_TIMELINE
    dependencies = {"run": Provide(run_by_id)}
    tags = ["runs"]

    @get(
        operation_id="getRunTimeline",
        summary="When each visit of a run ran and waited for answers, and the tokens (and cost) of each and of the run",
        description=(
            "Folded from the run's stored events. `cost` is set where FLOWTRAIL_MODEL_PRICES prices every model "
            "(or Hermes gateway) that used tokens, in one currency; otherwise null. The run's usage counts the "
            "planner's calls too, so it can be more than the sum over visits. Times are ISO UTC; a visit still "
            "running is measured to `asOf`."
        ),
        responses=error_responses(400, 404),
    )
    async def timeline(self, run: Injected[HotRun], settings: Injected[Settings]) -> Envelope[RunTimelineView]:
        """The run's timeline as of now (folded with the run's other projections as its events arrive)."""
        prices = {price.model: price for price in settings.engine.model_prices}
        return ok(timeline_view(run.run_id.hex, run.timeline, prices, utcnow()))
