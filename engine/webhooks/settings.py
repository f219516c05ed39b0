"""How the service sends webhooks: the settings group `Settings.webhooks` (read by engine.settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from engine.config import setting

DEFAULT_SECRET_ENV = "FLOWTRAIL_WEBHOOK_SECRET"


@dataclass(frozen=True)
class WebhookSettings:
    """Where webhooks may go, how they are signed, and how long a delivery is retried (docs/api.md, "Webhooks")."""

    secret_env: Annotated[str, setting(
        "FLOWTRAIL_WEBHOOKS_SECRET_ENV", "the environment variable holding the webhook signing secret "
        "(`whsec_` and base64, Standard Webhooks); unset or empty: the service sends no webhooks", min_length=1,
    )] = DEFAULT_SECRET_ENV
    allow_http: Annotated[bool, setting(
        "FLOWTRAIL_WEBHOOKS_ALLOW_HTTP", "accept `http://` webhook URLs (default: https only)",
    )] = False
    allow_private: Annotated[bool, setting(
        "FLOWTRAIL_WEBHOOKS_ALLOW_PRIVATE", "send webhooks to loopback, private, link-local and reserved addresses "
        "(default: refused when the URL is given and again when its host resolves to one)",
    )] = False
    timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_WEBHOOKS_TIMEOUT_SECONDS", "how long one delivery attempt waits for the receiver's answer", gt=0,
    )] = 10.0
    delivery_seconds: Annotated[float, setting(
        "FLOWTRAIL_WEBHOOKS_DELIVERY_SECONDS", "how long after its trigger a delivery is retried; no attempt starts "
        "later, and the delivery is recorded abandoned", gt=0,
    )] = 86400.0
    retry_first_seconds: Annotated[float, setting(
        "FLOWTRAIL_WEBHOOKS_RETRY_FIRST_SECONDS", "the wait after a delivery's first failed attempt; it doubles after "
        "each further one", gt=0,
    )] = 5.0
    retry_max_seconds: Annotated[float, setting(
        "FLOWTRAIL_WEBHOOKS_RETRY_MAX_SECONDS", "the longest wait between two attempts of a delivery", gt=0,
    )] = 600.0
    link_base: Annotated[str, setting(
        "FLOWTRAIL_WEBHOOKS_LINK_BASE", "the scheme, host and port the links in a webhook's body start with "
        "(default: `http://FLOWTRAIL_HOST:FLOWTRAIL_PORT`)",
    )] = ""
