"""Runs shared by replicas on one PostgreSQL: a procrastinate job per run execution; it owns the job tables."""

from engine.dispatch.jobs import HAND_BACK_SECONDS, JobDispatch

__all__ = ["HAND_BACK_SECONDS", "JobDispatch"]
