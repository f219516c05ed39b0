"""Debian's haproxy on a loopback port in front of server processes: round robin, SSE unbuffered, health-checked."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.process import healthy
from tests.support.server import free_port

CONFIG = """\
global
    maxconn 4000

defaults
    mode http
    option redispatch
    retries 3
    timeout connect 1s
    timeout client 120s
    timeout server 120s
    timeout tunnel 120s
    timeout http-keep-alive 10s

frontend flowtrail
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    # SSE: responses are forwarded as they come (no buffering, no compression); long timeouts above for streams
    no option http-buffer-request
    option httpchk GET {check}
    default-server inter 300ms fall 2 rise 1
{servers}
"""


def haproxy_binary() -> str:
    """The haproxy executable; skipped when missing, except under CI, where that is a failure."""
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.path.exists(p)), None)
    if found is not None:
        return found
    reason = "haproxy is not installed (./test installs Debian's haproxy with apt-get)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


class Haproxy:
    """haproxy in the foreground, balancing the given loopback ports (health-checked on `check`); its log goes next
    to `workdir`."""

    def __init__(self, backend_ports: list[int], workdir: Path, *, check: str = "/healthz") -> None:
        self.binary = haproxy_binary()
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "haproxy.cfg"
        self.log_path = workdir / "haproxy.log"
        servers = "\n".join(f"    server r{i} 127.0.0.1:{port} check" for i, port in enumerate(backend_ports))
        self.config_path.write_text(CONFIG.format(port=self.port, servers=servers, check=check), encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT of the balancer."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Haproxy:
        """Start and wait until a request passes through to a replica."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen([self.binary, "-db", "-f", str(self.config_path)],
                                            stdout=log, stderr=log)
        await healthy(self.base_url, self.process,
                      lambda: f"haproxy exited: {self.log_path.read_text(errors='replace')[-2000:]}", seconds=10)
        return self

    async def stop(self) -> None:
        """Terminate and wait."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            await asyncio.to_thread(self.process.wait, 10)
