"""The workflow engine: DAG and agentic execution, node executors, clarify, cancel and recovery."""

from engine.execution.engine import CancelOutcome, Engine, RunExecutor

__all__ = ["CancelOutcome", "Engine", "RunExecutor"]
