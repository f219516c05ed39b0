"""Keys put in force while the service runs: the key file (FLOWTRAIL_API_KEYS_FILE), re-read on SIGHUP and when
it changes.

A file that cannot be read or holds no usable key list changes nothing: the keys in force stay and the problem
is logged once. What is logged names fields, positions and key ids, never a secret.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path

from engine.access.keys import ApiKey, KeyRing, check_api_keys, ids_naming_their_secret
from engine.config import SettingsError, decode_json_list
from engine.waiting import wait_event

log = logging.getLogger("flowtrail.keys")

KEY_FILE_VARIABLE = "FLOWTRAIL_API_KEYS_FILE"


def read_key_file(path: Path) -> tuple[ApiKey, ...]:
    """The checked key list in the file; a SettingsError naming FLOWTRAIL_API_KEYS_FILE when it holds none."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SettingsError(KEY_FILE_VARIABLE, f"cannot read {str(path)!r}: {error.strerror or error}",
                            "a file this process can read, holding a JSON list of keys") from None
    return parse_keys(raw)


def parse_keys(raw: bytes) -> tuple[ApiKey, ...]:
    """The checked key list in a key file's bytes (the JSON shape of FLOWTRAIL_API_KEYS)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SettingsError(KEY_FILE_VARIABLE, f"the file is not UTF-8 text (byte {error.start})",
                            "a UTF-8 file holding a JSON list of keys") from None
    keys = decode_json_list(KEY_FILE_VARIABLE, text, ApiKey)
    check_api_keys(keys, KEY_FILE_VARIABLE)
    return keys


def warn_of_former_ids(keys: Iterable[ApiKey]) -> None:
    """Log each key whose id is still the hash of its own secret (decision 36: change the secret, keep the id)."""
    for key_id in ids_naming_their_secret(keys):
        log.warning("the API key %r kept its former id, a hash of its secret: give it a new secret and keep the id, "
                    "so that the id no longer tells anything about the key (docs/operations.md, \"Upgrading\")", key_id)


def changes(before: Iterable[ApiKey], after: Iterable[ApiKey]) -> str:
    """What a reload changed, by key id: `added: a; removed: b; changed: c` (empty: nothing)."""
    old, new = {k.id: k for k in before}, {k.id: k for k in after}
    parts = [
        ("added", sorted(new.keys() - old.keys())),
        ("removed", sorted(old.keys() - new.keys())),
        ("changed", sorted(i for i in old.keys() & new.keys() if old[i] != new[i])),
    ]
    return "; ".join(f"{what}: {', '.join(ids)}" for what, ids in parts if ids)


class KeyFile:
    """The key file behind a key ring: re-read when asked (SIGHUP) and every `poll_seconds`; a change is put in
    force on the ring at once."""

    def __init__(self, path: Path, ring: KeyRing, *, poll_seconds: float) -> None:
        self.path, self.ring, self.poll_seconds = path, ring, poll_seconds
        self._asked = asyncio.Event()
        self._last: object = None
        """What the last read found (the bytes, or why it failed), so that one change is acted on and logged once."""

    def ask(self) -> None:
        """Re-read the file now rather than at the next poll (what SIGHUP does)."""
        self._asked.set()

    async def watch(self) -> None:
        """Re-read the file when asked, else every `poll_seconds`, until cancelled."""
        while True:
            asked = await wait_event(self._asked, self.poll_seconds)
            self._asked.clear()
            try:
                await self.reload(asked=asked)
            except Exception:
                log.exception("re-reading the API key file %s failed; the keys in force are kept", self.path)

    async def reload(self, *, asked: bool = False) -> None:
        """Read the file and put its keys in force; when it holds no usable key list, the keys in force stay.

        A poll that finds what the last read found does nothing; `asked` re-reads and logs the outcome anyway.
        """
        try:
            raw: bytes = await asyncio.to_thread(self.path.read_bytes)
        except OSError as error:
            self._refused(("unreadable", error.errno), f"cannot read it: {error.strerror or error}", asked)
            return
        if raw == self._last and not asked:
            return
        try:
            keys = parse_keys(raw)
        except SettingsError as error:
            self._refused(raw, str(error), asked)
            return
        self._last = raw
        self._put_in_force(keys, asked)

    def _refused(self, found: object, problem: str, asked: bool) -> None:
        """Log a file that holds no usable key list (once per content, or when asked); the keys in force stay."""
        if found != self._last or asked:
            log.error("API keys not reloaded from %s, the %d keys in force are kept: %s",
                      self.path, len(self.ring.keys), problem)
        self._last = found

    def _put_in_force(self, keys: tuple[ApiKey, ...], asked: bool) -> None:
        changed = changes(self.ring.keys, keys)
        if keys != self.ring.keys:
            self.ring.replace(keys)
            warn_of_former_ids(keys)
        if changed or asked:
            log.info("API keys reloaded from %s: %d keys; %s", self.path, len(keys), changed or "unchanged")
