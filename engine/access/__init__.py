"""API keys: who the caller is, what it may touch, and the keys in force (reloaded from a key file)."""

from engine.access.keys import (
    DEMO_KEY,
    ApiKey,
    KeyRing,
    StandingAccess,
    Unauthorized,
    check_api_keys,
    former_id,
    ids_naming_their_secret,
    may_erase_run,
    may_use,
    reaches,
    sees_run,
)
from engine.access.reload import KeyFile, read_key_file, warn_of_former_ids

__all__ = [
    "DEMO_KEY", "ApiKey", "KeyFile", "KeyRing", "StandingAccess", "Unauthorized", "check_api_keys", "former_id",
    "ids_naming_their_secret", "may_erase_run", "may_use", "reaches", "read_key_file", "sees_run", "warn_of_former_ids",
]
