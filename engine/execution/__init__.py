"""The workflow engine: DAG and agentic execution, node executors, clarify, cancel and recovery."""

from engine.execution.engine import Engine
from engine.execution.ports import CancelOutcome, RunExecutor

__all__ = ["CancelOutcome", "Engine", "RunExecutor"]
