"""Structured output for a visit: the domain's two-level retry wired to the visit's models and stream.

Inner retries re-format the answer with `reformat_model_id` (else the default model), with
no tools; outer retries ask the node again in the same conversation. Each retry is a
`status` line in the visit's stream; when retries run out the visit fails naming what was
missing or mistyped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from domain.errors import AnswerNotJson
from domain.outputs import (
    OutputField,
    RetryPolicy,
    build_instruction,
    describe_failure,
    extract_with_retry,
    parse_json_answer,
    validate_output,
)
from engine.execution.errors import VisitFailure
from engine.execution.visit import VisitContext
from engine.llm import CompletionRequest, Message, collect

Rerun = Callable[[str, str], Awaitable[str]]


def problem_of(text: str, fields: list[OutputField]) -> tuple[str, str]:
    """(the problem in brief, in detail) of an answer; ("", "") when it is valid."""
    try:
        parsed = parse_json_answer(text)
    except AnswerNotJson as error:
        return "output not valid JSON", error.message
    result = validate_output(parsed, fields)
    return ("", "") if result.ok else ("output invalid", describe_failure(result))


class _Attempts:
    """Tracks the latest answer so each retry's status line says what was wrong with it."""

    def __init__(self, ctx: VisitContext, text: str, fields: list[OutputField], policy: RetryPolicy) -> None:
        self.ctx, self.fields, self.policy = ctx, fields, policy
        self.latest = text
        self.reformats = 0
        self.reruns = 0

    async def reformat(self, prompt: str) -> str:
        """One inner retry: the re-format model turns the answer into JSON (no tools)."""
        brief, detail = problem_of(self.latest, self.fields)
        self.reformats += 1
        await self.ctx.status(f"{brief} ({detail}); re-formatting ({self.reformats}/{self.policy.format_max_retries})")
        request = CompletionRequest(messages=[Message("user", prompt)], purpose="reformat", response_format_json=True)
        completion = await collect(self.ctx.models.reformat().stream(request, cancel=self.ctx.cancel_event))
        self.latest = completion.text
        return completion.text

    async def rerun_with(self, rerun: Rerun) -> str:
        """One outer retry: the node answers again in its conversation."""
        brief, detail = problem_of(self.latest, self.fields)
        self.reruns += 1
        self.reformats = 0
        await self.ctx.status(f"{brief} ({detail}); re-running the node ({self.reruns}/{self.policy.runtime_max_retries})")
        self.latest = await rerun(detail, build_instruction(self.fields))
        return self.latest


async def structured_data(
    ctx: VisitContext, text: str, fields: list[OutputField], policy: RetryPolicy, rerun: Rerun | None,
) -> dict[str, Any]:
    """The validated output data of an answer, after as many retries as the policy allows."""
    attempts = _Attempts(ctx, text, fields, policy)
    outer = (lambda: attempts.rerun_with(rerun)) if rerun is not None else None
    result = await extract_with_retry(text, fields, policy, reformat=attempts.reformat, rerun=outer)
    if not result.ok:
        raise VisitFailure(result.error or "output does not match the declared fields")
    if result.attempts and result.attempts[-1].startswith("re-formatted"):
        await ctx.status(result.attempts[-1])
    elif result.attempts:
        await ctx.status(f"re-run output is valid ({attempts.reruns}/{policy.runtime_max_retries})")
    return result.data
