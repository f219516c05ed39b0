"""Which provider answers for which model id; `scripted` is always there."""

from __future__ import annotations

from collections.abc import Iterable

import httpx

from engine.llm.config import SCRIPTED_ID, ModelConfig
from engine.llm.openai import OpenAIProvider
from engine.llm.scripted import ScriptedProvider
from engine.llm.types import LlmError, LlmProvider


class UnknownModel(LlmError):
    """No provider is registered under the asked model id."""


class ModelRegistry:
    """Maps model ids to providers: the configured OpenAI-compatible endpoints plus `scripted`."""

    def __init__(
        self,
        models: Iterable[ModelConfig] = (),
        *,
        default_model_id: str | None = None,
        scripted: ScriptedProvider | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._providers: dict[str, LlmProvider] = {SCRIPTED_ID: scripted or ScriptedProvider()}
        for config in models:
            if config.id in self._providers:
                raise ValueError(f"model id {config.id!r} is reserved or configured twice")
            self._providers[config.id] = OpenAIProvider(config, transport=transport)
        configured = [i for i in self._providers if i != SCRIPTED_ID]
        self.default_model_id = default_model_id or (configured[0] if configured else SCRIPTED_ID)
        if self.default_model_id not in self._providers:
            raise ValueError(f"default model {self.default_model_id!r} is not configured")

    @property
    def model_ids(self) -> list[str]:
        """Every model id this registry answers for."""
        return list(self._providers)

    def provider_for(self, model_id: str | None = None) -> LlmProvider:
        """The provider for `model_id` (the default model when None); raises UnknownModel."""
        key = model_id or self.default_model_id
        try:
            return self._providers[key]
        except KeyError:
            raise UnknownModel(f"no model is configured under id {key!r}") from None

    async def aclose(self) -> None:
        """Close every provider's HTTP client."""
        for provider in self._providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
