"""Why a run failed, as a program reads it: a closed list of codes (docs/api.md, "Failure categories").

The engine names the code where a failure happens and records it with the failure (`RunFailed.error_code`,
`VisitFailed.error_code`). Failures stored before codes were recorded have only their text: `code_of_text`
gives them the code their text says, by the engine's own wording, so every stored log keeps one meaning.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

FailureCode = Literal[
    "VALIDATION_FAILED",
    "OUTPUT_INVALID",
    "MODEL_UNAVAILABLE",
    "BUDGET_EXHAUSTED",
    "NODE_TIMEOUT",
    "RUN_TIMEOUT",
    "REMOTE_FAILED",
    "REMOTE_OUTCOME_UNKNOWN",
    "INTERRUPTED",
    "EMPTY_RESULT",
    "STORE_UNAVAILABLE",
    "RUN_CANCELLED",
    "INTERNAL_ERROR",
    "RUN_FAILED",
]
"""Every `errorCode` a failed run can carry; RUN_FAILED only for failures stored before codes were recorded
whose text names no other."""
FAILURE_CODES: tuple[FailureCode, ...] = get_args(FailureCode)
_BY_NAME: dict[str | None, FailureCode] = {code: code for code in FAILURE_CODES}

_LEADING_CODE = re.compile(r"^([A-Z][A-Z0-9_]{2,63}):")
_TEXT_RULES: tuple[tuple[FailureCode, re.Pattern[str]], ...] = (
    ("INTERNAL_ERROR", re.compile(r"(^|: )internal error: ")),
    ("STORE_UNAVAILABLE", re.compile(r"the store could not record")),
    ("RUN_TIMEOUT", re.compile(r"the run timed out after")),
    ("NODE_TIMEOUT", re.compile(r"the node timed out after")),
    ("INTERRUPTED", re.compile(r"the engine stopped while this visit was running")),
    ("REMOTE_OUTCOME_UNKNOWN", re.compile(r"hermes (run_lost|incomplete_stream):")),
    ("REMOTE_FAILED", re.compile(r"hermes ")),
    ("BUDGET_EXHAUSTED", re.compile(r"reached its limit of \d+ visits|the node's turn limit|before its retry budget")),
    ("OUTPUT_INVALID", re.compile(
        r"fails validation|does not match the declared|no valid decision|not one of|output (invalid|not valid JSON)")),
    ("MODEL_UNAVAILABLE", re.compile(r"model (call|stream|endpoint|retries)|could not reach model|the planner failed")),
    ("EMPTY_RESULT", re.compile(r"no output node ran")),
    ("VALIDATION_FAILED", re.compile(r"missing reference|required input|has no (start|output) node|is not in the catalogue")),
)
"""The engine's wording of each kind of failure, first match wins (a node's failure quotes the visit's error)."""


def code_of_text(error: str) -> FailureCode:
    """The code of a failure recorded with its text only: a leading `CODE:` of the list, else the wording's."""
    found = _LEADING_CODE.match(error)
    leading = _BY_NAME.get(found.group(1)) if found is not None else None
    if leading is not None:
        return leading
    for code, pattern in _TEXT_RULES:
        if pattern.search(error):
            return code
    return "RUN_FAILED"


def failure_code(error: str, recorded: str | None) -> FailureCode:
    """A failure's code: the one recorded with it when it is of the list, else the one its text says."""
    return _BY_NAME.get(recorded) or code_of_text(error)


_ADDRESS = re.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()]+"  # a URL
    r"|\[[0-9a-fA-F:.]*:[0-9a-fA-F:.]*\](:\d+)?"  # a bracketed IPv6 address
    r"|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b"  # an IPv4 address
    r"|\bat \"[^\"]+\"(, port \d+| \([^)]*\))*"  # a driver's `at "host" (addr), port n`
)


def without_addresses(text: str) -> str:
    """The text with every URL, IP address and quoted server location replaced by `[address]`: a failure a
    client reads never names where the service's models, gateways or database live."""
    return _ADDRESS.sub("[address]", text)
