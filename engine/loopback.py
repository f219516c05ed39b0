"""Whether an address is this machine's own: the one loopback check of the service."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_address(address: str | None) -> bool:
    """True for an IP address in 127.0.0.0/8, ::1 (bracketed too) or IPv4-mapped loopback; a name is not one."""
    try:
        parsed = ipaddress.ip_address((address or "").strip("[]"))
    except ValueError:
        return False
    mapped = getattr(parsed, "ipv4_mapped", None)
    return parsed.is_loopback or (mapped is not None and mapped.is_loopback)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses: only this machine reaches them."""
    return host == "localhost" or is_loopback_address(host)


def is_loopback_url(url: str) -> bool:
    """True for an http(s) URL whose host is localhost or a loopback address."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.hostname is not None and is_loopback(parts.hostname)
