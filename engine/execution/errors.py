"""Why a visit or a run stops early: failures, pauses and halts the executors raise."""

from __future__ import annotations

from domain.failures import FailureCode
from engine.llm import LlmError, LlmHttpError, LlmRetriesExhausted, LlmStreamBroken, LlmTimeout


class VisitFailure(Exception):
    """The visit cannot produce its output; the message says why (it becomes the visit's error), `code` what kind."""

    def __init__(self, message: str, code: FailureCode = "VALIDATION_FAILED") -> None:
        super().__init__(message)
        self.code: FailureCode = code


class RunFailure(Exception):
    """The run must fail as a whole (a limit, the planner, a missing workflow); the message says why, `code` what kind."""

    def __init__(self, message: str, code: FailureCode = "VALIDATION_FAILED") -> None:
        super().__init__(message)
        self.code: FailureCode = code


class CancelHalt(Exception):
    """A cancel request was seen at a safe point: stop and record the run as cancelled."""


class HandOverHalt(Exception):
    """This process is stopping and a safe point between visits was reached: stop and record nothing (the run goes
    on from its log elsewhere)."""


class RunHandedOver(Exception):
    """The run stopped at a visit boundary because this process is stopping; it still needs executing (elsewhere)."""


class PauseForAnswer(Exception):
    """The visit asked the user a question; the run pauses until it is answered."""

    def __init__(self, clarify_id: str, question: str, choices: list[str], turn: int) -> None:
        super().__init__(question)
        self.clarify_id = clarify_id
        self.question = question
        self.choices = list(choices)
        self.turn = turn


def describe_llm_error(error: LlmError) -> str:
    """A model failure in words a reader of the run understands."""
    if isinstance(error, LlmRetriesExhausted):
        return f"model retries exhausted after {error.attempts} attempt(s), {error.why}: {describe_llm_error(error.last)}"
    if isinstance(error, LlmTimeout):
        return f"model call timed out: {error}"
    if isinstance(error, LlmStreamBroken):
        return f"model stream broke: {error}"
    if isinstance(error, LlmHttpError):
        return str(error)
    return f"model call failed: {error}"
