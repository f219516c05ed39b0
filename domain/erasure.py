"""What erasing a run removes from its stored events, and the bytes each event is stored as afterwards.

An event's *skeleton* is the event with every field that holds content replaced by the empty
value of its type; positions, tags, ids, statuses, times and token counts stay. The skeleton is
computed from the stored JSON itself (decoded as plain JSON, the fields replaced, encoded again
with msgspec, which keeps the order of the keys), never from the event class, so the bytes are
the same whichever version of the code computes them: once when the event is appended (its
digest enters the hash chain, `domain.chain`) and once when it is erased (the stored bytes
become the skeleton). These rules are stored implicitly in every chain: never change them for
an existing tag; a new tag may get rules of its own (docs/history.md lists them).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

ERASED_VALUES: dict[str, dict[str, Any]] = {
    "RunCreated": {"variables": {}, "uploaded_files": [], "webhook": None},
    "NodeStreamed": {"content": ""},
    "VisitCompleted": {"output": {}},
    "VisitFailed": {"error": "", "output": None},
    "VisitSkipped": {"reason": ""},
    "PlannerDecided": {"reason": ""},
    "ClarifyRequested": {"question": "", "choices": []},
    "ClarifyAnswered": {"answer": ""},
    "RunCancelRequested": {"reason": ""},
    "RunCancelled": {"reason": ""},
    "RunCompleted": {"output": {}, "working_dir_files": []},
    "RunFailed": {"error": ""},
    "ModelCalled": {"prompt_sha256": ""},
    "RemoteRunEnded": {"output": "", "error": ""},
}
"""By event tag: each field that holds content and the value it has once erased (`RunFailed.error`: see `KEPT_PREFIX`)."""
KEPT_PREFIX = re.compile(r"^([A-Z][A-Z0-9_]{2,63}):|^internal error:")
"""The start of a run's error text that names its code (`MODEL_TIMEOUT: ...`, `internal error: ...`): erasing
`RunFailed.error` keeps this much of it, so the run's error code (the listing's `errorCode`) survives."""
ERASED_MARK = "erased"
"""The field of RunCreated that the skeleton sets to true: a reader of the first event knows the run is erased."""
_encoder = msgspec.json.Encoder()


def may_hold_content(tag: str) -> bool:
    """True when events with this tag have fields that erasure empties."""
    return tag in ERASED_VALUES


def skeleton_of(state: bytes) -> bytes:
    """The stored JSON of an event once erased (the same bytes when the event holds nothing to erase)."""
    fields: dict[str, Any] = msgspec.json.decode(state)
    rules = ERASED_VALUES.get(str(fields.get("type")))
    if rules is None:
        return state
    error = fields.get("error")
    for name, empty in rules.items():
        if name in fields:
            fields[name] = empty
    if fields["type"] == "RunFailed" and isinstance(error, str) and (kept := KEPT_PREFIX.match(error)) is not None:
        fields["error"] = kept.group(0)
    if fields["type"] == "RunCreated":
        fields[ERASED_MARK] = True
    skeleton = _encoder.encode(fields)
    return state if skeleton == state else skeleton
