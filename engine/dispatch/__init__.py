"""Runs shared by replicas on one PostgreSQL: one procrastinate job per run execution, locked on the run."""

from engine.dispatch.jobs import JobDispatch

__all__ = ["JobDispatch"]
