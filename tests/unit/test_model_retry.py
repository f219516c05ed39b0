"""Retrying model calls: which errors are retried, how long each wait is, and the one budget they spend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from domain import run as decide
from domain.errors import IllegalTransition
from engine.execution.calls import prompt_sha256
from engine.execution.errors import describe_llm_error
from engine.llm import (
    Backoff,
    CompletionRequest,
    LlmCancelled,
    LlmHttpError,
    LlmRetriesExhausted,
    LlmStreamBroken,
    Message,
    RetryBudget,
    retried,
)
from engine.llm.openai import parse_retry_after
from tests.unit.builders import T0, RunLog

QUICK = Backoff(base_seconds=0.001, max_seconds=0.01)


class Flaky:
    """Fails with the given errors in turn, then answers "ok"; counts its calls."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.numbers: list[int] = []

    async def __call__(self, number: int) -> str:
        self.numbers.append(number)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_retryable_errors_are_retried_and_each_retry_is_announced_with_its_wait():
    call, said = Flaky(LlmHttpError(503), LlmStreamBroken("cut")), []

    async def announce(error: Any, attempt: int, wait: float) -> None:
        said.append((type(error).__name__, attempt, 0 <= wait <= QUICK.max_seconds))

    budget = RetryBudget(5)
    assert await retried(call, budget, QUICK, announce=announce) == "ok"
    assert call.numbers == [1, 2, 3]
    assert said == [("LlmHttpError", 2, True), ("LlmStreamBroken", 3, True)]
    assert (budget.spent, budget.left) == (2, 3)


async def test_a_retry_after_is_the_wait_before_the_next_attempt():
    call, waits = Flaky(LlmHttpError(429, retry_after=0.005)), []

    async def announce(error: Any, attempt: int, wait: float) -> None:
        waits.append(wait)

    assert await retried(call, RetryBudget(1), QUICK, announce=announce) == "ok"
    assert waits == [0.005]


async def test_an_error_not_worth_retrying_is_raised_at_once_and_spends_nothing():
    call, budget = Flaky(LlmHttpError(401)), RetryBudget(3)
    with pytest.raises(LlmHttpError):
        await retried(call, budget, QUICK)
    assert call.numbers == [1] and budget.spent == 0


async def test_a_spent_budget_ends_in_retries_exhausted_naming_the_last_error():
    call = Flaky(*[LlmHttpError(500, "down")] * 3)
    with pytest.raises(LlmRetriesExhausted) as failure:
        await retried(call, RetryBudget(2), QUICK)
    assert (failure.value.attempts, failure.value.why) == (3, "the retry budget of 2 is spent")
    assert describe_llm_error(failure.value) == (
        "model retries exhausted after 3 attempt(s), the retry budget of 2 is spent: "
        "model endpoint answered 500: server error - down")


async def test_a_retry_after_longer_than_the_longest_wait_is_not_waited_for():
    call = Flaky(LlmHttpError(429, retry_after=60))
    with pytest.raises(LlmRetriesExhausted, match="asked to wait 60 s, more than the 0.01 s allowed"):
        await retried(call, RetryBudget(5), QUICK)
    assert call.numbers == [1]


async def test_a_cancel_during_the_wait_stops_the_retries():
    cancel = asyncio.Event()
    cancel.set()
    call = Flaky(LlmHttpError(503))
    with pytest.raises(LlmCancelled):
        await retried(call, RetryBudget(5), Backoff(1.0, 5.0), cancel=cancel)
    assert call.numbers == [1]


def test_a_budget_spends_one_retry_at_a_time_and_never_below_zero():
    budget = RetryBudget(1)
    assert (budget.take(), budget.take(), budget.left) == (True, False, 0)


@pytest.mark.parametrize(("header", "seconds"), [("0", 0.0), ("12", 12.0), ("", None), (None, None), ("-3", None),
                                                 ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)])
def test_retry_after_is_read_as_seconds_or_an_http_date_already_past(header, seconds):
    assert parse_retry_after(header) == seconds


def test_retry_after_as_a_future_http_date_is_the_seconds_until_then():
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    wait = parse_retry_after(later)
    assert wait is not None and 80 < wait <= 90


def test_the_prompt_hash_depends_on_the_messages_and_tools_alone():
    ask = CompletionRequest(messages=[Message("user", "hello")], purpose="node")
    again = CompletionRequest(messages=[Message("user", "hello")], purpose="reformat", model="other")
    other = CompletionRequest(messages=[Message("user", "hello!")])
    assert prompt_sha256(ask) == prompt_sha256(again) != prompt_sha256(other)
    assert len(prompt_sha256(ask)) == 64 and "hello" not in prompt_sha256(ask)


def test_a_model_call_is_recorded_for_an_open_visit_or_for_the_planner_and_refused_otherwise():
    log = RunLog().created().started()
    visit = log.visit("A")
    run = decide.fold(log.events)
    assert run is not None
    fields: dict[str, Any] = dict(model_id="gpt", attempt=1, latency_ms=3.0)
    assert decide.record_model_call(run, T0, visit_uuid=visit, node_id="A", purpose="node", **fields).attempt == 1
    assert decide.record_model_call(run, T0, visit_uuid="", node_id="", purpose="planner", **fields).visit_uuid == ""
    with pytest.raises(IllegalTransition, match="unknown model call purpose 'chat'"):
        decide.record_model_call(run, T0, visit_uuid=visit, node_id="A", purpose="chat", **fields)
    with pytest.raises(IllegalTransition, match="not open"):
        decide.record_model_call(run, T0, visit_uuid="", node_id="", purpose="node", **fields)
