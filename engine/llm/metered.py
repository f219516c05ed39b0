"""Counts and traces every model call and the tokens it reported, under the model id the engine asked for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from engine.llm.openai import OpenAIProvider
from engine.llm.scripted import ScriptedProvider
from engine.llm.types import Chunk, CollectingProvider, CompletionRequest, Finished, LlmProvider, Usage
from engine.observability.metrics import MODEL_CALLS, MODEL_TOKENS
from engine.observability.tracing import model_call_span, model_finished, model_usage

SCRIPTED_SYSTEM = "flowtrail.scripted"
"""The GenAI provider name of the scripted provider (a configured model speaks OpenAI's protocol: `openai`)."""
OTHER_SYSTEM = "_OTHER"
"""The GenAI conventions' provider name for one they do not list."""


class MeteredProvider(CollectingProvider):
    """A provider whose calls (by purpose and outcome) and reported tokens are counted under `model_id`, each call
    in a GenAI `chat` span."""

    def __init__(self, provider: LlmProvider, model_id: str) -> None:
        self.provider = provider
        self.model_id = model_id
        self.system, self.model = _system_and_model(provider, model_id)

    async def stream(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """The provider's stream, passed through; the call counts as `ok` once its Finished chunk came."""
        outcome = "error"
        try:
            with model_call_span(self.system, self.model, self.model_id, request.purpose,
                                 temperature=request.temperature, max_tokens=request.max_tokens) as traced:
                async with contextlib.aclosing(self.provider.stream(request, cancel=cancel)) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, Usage):
                            MODEL_TOKENS.labels(self.model_id, "prompt").inc(chunk.prompt_tokens)
                            MODEL_TOKENS.labels(self.model_id, "completion").inc(chunk.completion_tokens)
                            model_usage(traced, chunk.prompt_tokens, chunk.completion_tokens)
                        elif isinstance(chunk, Finished):
                            outcome = "ok"
                            model_finished(traced, chunk.finish_reason)
                        yield chunk
        finally:
            MODEL_CALLS.labels(self.model_id, request.purpose, outcome).inc()


def _system_and_model(provider: LlmProvider, model_id: str) -> tuple[str, str]:
    """The GenAI provider name and the model name a request goes out with."""
    if isinstance(provider, OpenAIProvider):
        return "openai", provider.config.model
    return (SCRIPTED_SYSTEM if isinstance(provider, ScriptedProvider) else OTHER_SYSTEM), model_id


def metered(provider: LlmProvider, model_id: str) -> LlmProvider:
    """`provider`, counted and traced under `model_id` (once: a metered provider is returned as it is)."""
    return provider if isinstance(provider, MeteredProvider) else MeteredProvider(provider, model_id)
