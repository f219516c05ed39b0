"""URLs as logs, events and settings show them: no credentials, query or fragment (they may carry secrets)."""

from __future__ import annotations

from urllib.parse import urlsplit


def shown_url(url: str) -> str:
    """The URL as the run's history shows it: scheme, host, port and path (no credentials, query or fragment)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
