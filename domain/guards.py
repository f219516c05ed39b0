"""The guards the Run aggregate's decisions share, and the fields every new event of a run begins with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from domain.errors import IllegalTransition, RunAlreadyFinished, UnknownVisit
from domain.run_state import EXECUTING, Run


def next_fields(run: Run, at: datetime) -> dict[str, Any]:
    """The id, position and time of the run's next event."""
    return {"originator_id": run.id, "originator_version": run.version + 1, "timestamp": at}


def check_not_finished(run: Run, action: str) -> None:
    """RunAlreadyFinished when the run has ended."""
    if run.status.is_terminal:
        raise RunAlreadyFinished(
            f"run {run.id.hex} has already finished ({run.status.value}); cannot {action}",
            run_id=run.id.hex,
            status=run.status.value,
        )


def check_executing(run: Run, action: str) -> None:
    """Refused unless the run executes (started, not paused, not ended)."""
    if run.status not in EXECUTING:
        check_not_finished(run, action)
        raise IllegalTransition(
            f"run {run.id.hex} is {run.status.value}; cannot {action}",
            run_id=run.id.hex,
            status=run.status.value,
        )


def check_open_visit(run: Run, visit_uuid: str, action: str) -> None:
    """Refused unless the run executes and the visit is open."""
    check_executing(run, action)
    if visit_uuid not in run.open_visits:
        raise UnknownVisit(
            f"visit {visit_uuid} is not open in run {run.id.hex}; cannot {action}",
            run_id=run.id.hex,
            visit_uuid=visit_uuid,
        )
