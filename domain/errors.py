"""Named errors; each carries a stable code and the ids involved.

`FlowtrailError` is the one base of every error a caller may be answered with, in every layer:
its `code` is what the API's one table (`api/errors.py`) turns into an HTTP status. A code
that table does not know is a failure of the service, not of the request.
"""

from __future__ import annotations

from typing import Any, ClassVar


class FlowtrailError(Exception):
    """A refusal with a stable code and a readable message; nothing was appended."""

    code: ClassVar[str] = "VALIDATION_FAILED"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class DomainError(FlowtrailError):
    """A request the model refuses; nothing is appended."""


class IllegalTransition(DomainError):
    """The run's state does not allow this step (it changed since the caller looked)."""

    code = "RUN_STATE_CONFLICT"


class RunAlreadyStarted(IllegalTransition):
    """A run can be started once."""

    code = "RUN_ALREADY_STARTED"


class RunAlreadyFinished(IllegalTransition):
    """The run has reached a terminal state."""

    code = "RUN_ALREADY_FINISHED"


class ClarifyNotFound(DomainError):
    """No such question is pending or was ever asked in this run."""

    code = "CLARIFY_NOT_FOUND"


class ClarifyAlreadyAnswered(DomainError):
    """The question was answered before (idempotent success for callers)."""

    code = "CLARIFY_ALREADY_ANSWERED"


class UnknownVisit(IllegalTransition):
    """The visit is not open in this run."""


class GraphInvalid(DomainError):
    """A workflow definition has one or more problems."""

    code = "GRAPH_INVALID"

    def __init__(self, problems: list[str], **details: Any) -> None:
        super().__init__("; ".join(problems), problems=problems, **details)
        self.problems = problems


class MissingReference(DomainError):
    """A template or condition refers to a variable or node output that is not there."""

    code = "MISSING_REFERENCE"

    def __init__(self, path: str, reason: str = "", **details: Any) -> None:
        message = "missing reference {{" + path + "}}" + (f": {reason}" if reason else "")
        super().__init__(message, path=path, **details)
        self.path = path


class AnswerNotJson(DomainError):
    """A model's answer holds no single JSON object where one was required."""

    code = "ANSWER_NOT_JSON"
