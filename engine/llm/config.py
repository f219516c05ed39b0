"""What an operator configures for one OpenAI-compatible model (FLOWTRAIL_MODELS)."""

from __future__ import annotations

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
