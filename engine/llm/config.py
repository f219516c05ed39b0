"""What an operator configures for one OpenAI-compatible model (FLOWTRAIL_MODELS)."""

from __future__ import annotations

from typing import Annotated

import msgspec

SCRIPTED_ID = "scripted"
"""The deterministic scripted provider's model id: always there, never configured."""
RESERVED_MODEL_IDS = frozenset({SCRIPTED_ID})
"""Ids no configured model may take."""


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An OpenAI-compatible endpoint; the key is read from the env var `api_key_env` at call time."""

    id: str
    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_seconds: float = 60.0
    first_token_timeout: float = 30.0


class ModelPrice(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What an operator pays for one model's tokens (FLOWTRAIL_MODEL_PRICES), per 1,000 tokens; shown, never billed."""

    model: str
    """A model id of FLOWTRAIL_MODELS, `scripted`, or a Hermes gateway's id."""
    input_per_1k: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """Per 1,000 prompt (input) tokens."""
    output_per_1k: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """Per 1,000 completion (output) tokens."""
    currency: Annotated[str, msgspec.Meta(min_length=1, max_length=8)] = "USD"
