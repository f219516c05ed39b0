"""The model calls of a visit (or of the planner): each attempt recorded, retried within one budget.

Every attempt ends in one `ModelCalled` event: model id, purpose, latency, tokens, finish
reason, attempt number, the sha256 of the prompt (never the prompt) and, when it failed, the
error code. A retryable failure (429, 5xx, timeouts, broken streams, no connection) is sent
again after a backoff while the visit's retry budget lasts, each retry announced as a
`status` line of the visit; the budget is the one the visit's re-formats and re-runs spend.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from functools import partial

import msgspec

from domain import run as decide
from engine.execution.errors import describe_llm_error
from engine.execution.journal import Journal
from engine.llm import (
    Backoff,
    Chunk,
    Completion,
    CompletionRequest,
    LlmError,
    LlmProvider,
    LlmTimeout,
    RetryBudget,
    collect,
    retried,
)
from engine.settings import EngineSettings

ChunkSink = Callable[[Chunk], Awaitable[None]]
StatusLine = Callable[[str], Awaitable[None]]


def prompt_sha256(request: CompletionRequest) -> str:
    """The sha256 of what the model is asked (messages and tools as JSON): comparable, never readable."""
    return hashlib.sha256(msgspec.json.encode([request.messages, request.tools])).hexdigest()


def backoff_of(settings: EngineSettings) -> Backoff:
    """The engine's backoff settings."""
    return Backoff(settings.model_retry_base_seconds, settings.model_retry_max_seconds)


class ModelCalls:
    """Calls models for one visit (`visit_uuid`, `node_id`) or for the planner (both empty)."""

    def __init__(self, journal: Journal, settings: EngineSettings, budget: RetryBudget, *,
                 visit_uuid: str = "", node_id: str = "", status: StatusLine | None = None,
                 cancel: asyncio.Event | None = None) -> None:
        self.journal = journal
        self.settings = settings
        self.budget = budget
        self.visit_uuid = visit_uuid
        self.node_id = node_id
        self.status = status
        self.cancel = cancel

    async def complete(self, model_id: str, provider: LlmProvider, request: CompletionRequest,
                       on_chunk: ChunkSink | None = None) -> Completion:
        """The model's whole answer; `on_chunk` sees each chunk of each attempt as it arrives."""
        digest = prompt_sha256(request)

        async def attempt(number: int) -> Completion:
            return await self._attempt(number, model_id, provider, request, digest, on_chunk)

        announce = self._announce if self.status is not None else None
        return await retried(attempt, self.budget, backoff_of(self.settings), announce=announce, cancel=self.cancel)

    async def _attempt(self, number: int, model_id: str, provider: LlmProvider, request: CompletionRequest,
                       digest: str, on_chunk: ChunkSink | None) -> Completion:
        record = partial(self._record, model_id=model_id, purpose=request.purpose, attempt=number,
                         started=time.monotonic(), digest=digest)
        limit = self.settings.model_call_timeout_seconds
        try:
            async with asyncio.timeout(limit if limit > 0 else None):
                async with contextlib.aclosing(provider.stream(request, cancel=self.cancel)) as chunks:
                    completion = await collect(_forward(chunks, on_chunk))
        except TimeoutError:
            error = LlmTimeout(f"model {model_id!r} gave no whole answer within {limit:g}s (one call's time limit)")
            await record(error_code=error.code)
            raise error from None
        except LlmError as error:
            await record(error_code=error.code)
            raise
        except Exception:  # a pause asked for while the answer streamed: the call ended there
            await record()
            raise
        await record(completion=completion)
        return completion

    async def _record(self, *, model_id: str, purpose: str, attempt: int, started: float, digest: str,
                      completion: Completion | None = None, error_code: str | None = None) -> None:
        if self.visit_uuid and self.visit_uuid not in self.journal.run.open_visits:
            return  # the visit was closed meanwhile (its run ended): there is nothing to record it on
        usage = completion.usage if completion is not None else None
        await self.journal.decide(partial(
            decide.record_model_call, visit_uuid=self.visit_uuid, node_id=self.node_id, model_id=model_id,
            purpose=purpose, attempt=attempt, latency_ms=round((time.monotonic() - started) * 1000, 3),
            prompt_tokens=usage.prompt_tokens if usage is not None else 0,
            completion_tokens=usage.completion_tokens if usage is not None else 0,
            finish_reason=(completion.finish_reason or "") if completion is not None else "",
            prompt_sha256=digest, error_code=error_code,
        ))

    async def _announce(self, error: LlmError, attempt: int, delay: float) -> None:
        assert self.status is not None
        await self.status(
            f"model call failed ({describe_llm_error(error)}); retrying in {delay:.2f} s "
            f"(attempt {attempt}; {self.budget.left} of {self.budget.limit} retries left in this visit)"
        )


async def _forward(chunks: AsyncIterator[Chunk], on_chunk: ChunkSink | None) -> AsyncGenerator[Chunk, None]:
    async for chunk in chunks:
        if on_chunk is not None:
            await on_chunk(chunk)
        yield chunk
