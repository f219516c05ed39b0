"""agent and smartAction nodes on a remote Hermes Agent gateway: client, probe, event mapping, the agent."""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).parent / "demos"
"""The demo workflows that need a gateway (published only when one is configured)."""
