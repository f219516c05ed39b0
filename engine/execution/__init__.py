"""The workflow engine: DAG and agentic execution, node executors, clarify, cancel and recovery.

Its parts construct in order: RunLocks, then RunTasks (which executes runs here), then a
dispatch that hands runs to the replica that takes them (PostgreSQL), then the Engine's commands.
"""

from engine.execution.executor import Engine
from engine.execution.locks import RunLocks
from engine.execution.ports import CancelOutcome, RunDispatch, RunExecutor
from engine.execution.tasks import RunTasks, session_tools

__all__ = ["CancelOutcome", "Engine", "RunDispatch", "RunExecutor", "RunLocks", "RunTasks", "session_tools"]
