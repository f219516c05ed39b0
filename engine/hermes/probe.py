"""Is a gateway usable? `GET /v1/capabilities` tells `ok` from `key_missing`, `unreachable`, `unauthorized`, `incompatible`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import httpx
import msgspec

from engine.hermes.client import GatewayClient, GatewayError, gateway_key
from engine.hermes.gateways import HermesGateway

CAPABILITIES_OBJECT = "hermes.api_server.capabilities"
REQUIRED_FEATURES = ("run_submission", "run_events_sse", "run_stop", "run_approval_response", "session_resources")

ProbeStatus = Literal["ok", "not_configured", "disabled", "key_missing", "unreachable", "unauthorized", "incompatible"]


class ProbeResult(msgspec.Struct, frozen=True):
    """One gateway's availability: its id, the status, and what is wrong (empty when ok)."""

    gateway: str
    status: ProbeStatus
    detail: str = ""

    @property
    def ok(self) -> bool:
        """True when the gateway can run nodes."""
        return self.status == "ok"


def missing_capabilities(answer: dict[str, Any]) -> list[str]:
    """What a capabilities answer lacks: the object name, or required features not advertised as true."""
    if answer.get("object") != CAPABILITIES_OBJECT:
        return [f"object {CAPABILITIES_OBJECT!r}"]
    features = answer.get("features")
    features = features if isinstance(features, dict) else {}
    return [name for name in REQUIRED_FEATURES if features.get(name) is not True]


async def probe(gateway: HermesGateway, *, transport: httpx.AsyncBaseTransport | None = None) -> ProbeResult:
    """One gateway's availability, from its capabilities (a disabled gateway is not asked)."""
    if not gateway.enabled:
        return ProbeResult(gateway.id, "disabled", "enabled: false in FLOWTRAIL_HERMES_GATEWAYS")
    key = gateway_key(gateway)
    if key is None:
        return ProbeResult(gateway.id, "key_missing", f"the environment variable {gateway.api_key_env} is not set")
    client = GatewayClient(gateway, key, transport=transport)
    try:
        answer = await client.capabilities()
    except GatewayError as error:
        status: ProbeStatus = "unauthorized" if error.code == "unauthorized" else (
            "unreachable" if error.code == "unreachable" else "incompatible")
        return ProbeResult(gateway.id, status, error.message)
    finally:
        await client.aclose()
    missing = missing_capabilities(answer)
    if missing:
        return ProbeResult(gateway.id, "incompatible", "missing: " + ", ".join(missing))
    return ProbeResult(gateway.id, "ok")


def select_gateway(gateways: Sequence[HermesGateway], wanted: str | None) -> HermesGateway | None:
    """The gateway named `wanted`; with no name, the only configured one (else None)."""
    if wanted:
        return next((gateway for gateway in gateways if gateway.id == wanted), None)
    return gateways[0] if len(gateways) == 1 else None


async def probe_gateways(gateways: Sequence[HermesGateway], wanted: str | None = None) -> list[ProbeResult]:
    """The probe of every configured gateway (or only `wanted`); `not_configured` when there is none to probe."""
    if wanted is not None:
        chosen = select_gateway(gateways, wanted)
        if chosen is None:
            return [ProbeResult(wanted, "not_configured", f"no gateway {wanted!r} in FLOWTRAIL_HERMES_GATEWAYS")]
        return [await probe(chosen)]
    if not gateways:
        return [ProbeResult("", "not_configured", "FLOWTRAIL_HERMES_GATEWAYS is empty")]
    return [await probe(gateway) for gateway in gateways]
