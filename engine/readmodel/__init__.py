"""The run read model: one row per run in the log's own database, kept current from the log; it owns its tables."""

from engine.readmodel.listing import RunQuery
from engine.readmodel.model import ReadModel, rebuild, rebuilt_rows, run_rows

__all__ = ["ReadModel", "RunQuery", "rebuild", "rebuilt_rows", "run_rows"]
