"""`flowtrail hermes check [ID]`: the availability probe of each configured Hermes gateway."""

from __future__ import annotations

import asyncio

from engine.hermes.probe import probe_gateways
from scripts.connect import server_settings


def check_gateways(wanted: str | None = None) -> int:
    """Print one line per gateway (`id: status [detail]`); 0 only when every probed gateway is ok."""
    gateways = server_settings().engine.hermes_gateways
    results = asyncio.run(probe_gateways(gateways, wanted))
    for result in results:
        print(f"{result.gateway or '-'}: {result.status}" + (f" ({result.detail})" if result.detail else ""))
    return 0 if all(result.ok for result in results) else 1
