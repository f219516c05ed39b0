"""Counts every model call and the tokens it reported, under the model id the engine asked for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from engine.llm.types import Chunk, CollectingProvider, CompletionRequest, Finished, LlmProvider, Usage
from engine.observability.metrics import MODEL_CALLS, MODEL_TOKENS


class MeteredProvider(CollectingProvider):
    """A provider whose calls (by purpose and outcome) and reported tokens are counted under `model_id`."""

    def __init__(self, provider: LlmProvider, model_id: str) -> None:
        self.provider = provider
        self.model_id = model_id

    async def stream(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """The provider's stream, passed through; the call counts as `ok` once its Finished chunk came."""
        outcome = "error"
        try:
            async with contextlib.aclosing(self.provider.stream(request, cancel=cancel)) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, Usage):
                        MODEL_TOKENS.labels(self.model_id, "prompt").inc(chunk.prompt_tokens)
                        MODEL_TOKENS.labels(self.model_id, "completion").inc(chunk.completion_tokens)
                    elif isinstance(chunk, Finished):
                        outcome = "ok"
                    yield chunk
        finally:
            MODEL_CALLS.labels(self.model_id, request.purpose, outcome).inc()


def metered(provider: LlmProvider, model_id: str) -> LlmProvider:
    """`provider`, counted under `model_id` (once: a metered provider is returned as it is)."""
    return provider if isinstance(provider, MeteredProvider) else MeteredProvider(provider, model_id)
