"""The workflow model (the lenient form still runs while the typed one is proven on stored data)."""

from domain.workflow.lenient import *  # noqa: F403
