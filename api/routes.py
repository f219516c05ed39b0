"""Every controller the app serves (one line each)."""

from __future__ import annotations

from api.streams import RunStreamController

CONTROLLERS: list[type] = [
    RunStreamController,
]
