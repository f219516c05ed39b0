"""The workflow engine: DAG and agentic execution, node executors, clarify, cancel and recovery."""

from engine.execution.engine import Engine

__all__ = ["Engine"]
