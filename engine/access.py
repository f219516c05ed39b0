"""API keys: who the caller is (constant-time) and which workflows it may touch."""

from __future__ import annotations

import hmac

from domain.errors import FlowtrailError
from engine.settings import ApiKey


class Unauthorized(FlowtrailError):
    """No key, or a key this service does not know."""

    code = "UNAUTHORIZED"


class KeyRing:
    """The configured external API keys."""

    def __init__(self, keys: tuple[ApiKey, ...]) -> None:
        self.keys = keys
        self._encoded = [(k.key.encode(), k) for k in keys]

    def authenticate(self, presented: str | None) -> ApiKey:
        """The key matching the presented secret, compared in constant time."""
        if not presented:
            raise Unauthorized("missing X-API-Key header")
        candidate = presented.encode()
        found: ApiKey | None = None
        for secret, key in self._encoded:
            if hmac.compare_digest(secret, candidate) and found is None:
                found = key
        if found is None:
            raise Unauthorized("invalid API key")
        return found


def may_use(key: ApiKey, workflow_name: str, workflow_id: int) -> bool:
    """True when the key's scope includes the workflow (both lists empty: no limit)."""
    if not key.workflow_names and not key.workflow_ids:
        return True
    return workflow_name in key.workflow_names or workflow_id in key.workflow_ids


def sees_run(key: ApiKey, owner_key_id: str) -> bool:
    """True when the run is the key's own (compared by stable key id), or the key sees all runs."""
    return key.sees_all_runs or hmac.compare_digest(owner_key_id.encode(), key.key_id().encode())
