"""Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.

Signed by hand (three lines of hmac) rather than with the `standardwebhooks` package, so that the tests, which
verify with that package, check an implementation that is not the one that signed (decision 41).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from engine.config import SettingsError

SECRET_PREFIX = "whsec_"


def parse_secret(variable: str, value: str) -> bytes:
    """The key bytes of a `whsec_<base64>` secret; a SettingsError naming the variable (never the value) otherwise."""
    encoded = value.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) < 16:
        raise SettingsError(variable, "not a webhook signing secret", "`whsec_` and the base64 of 16 to 64 random bytes")
    return key


def signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header of one attempt."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one attempt: `webhook-id`, `webhook-timestamp` (seconds) and `webhook-signature`."""
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(key, webhook_id, timestamp, body),
    }
