"""A server process a test can kill -9 at a chosen moment and start again on the same store and port."""

from __future__ import annotations

import asyncio
import signal

from tests.support.process import ServerProcess, healthy

RECOVERING = "recovering run"
"""What the log says when start-up takes over a run the last process was executing (engine/execution/recovery.py);
a test that kills the process "during recovery" waits for it."""


class KillableServer(ServerProcess):
    """`flowtrail serve` that can be launched without waiting, killed with SIGKILL and watched in its log."""

    async def ready(self, timeout: float = 20.0) -> None:
        """Wait until /healthz answers 200 (the process dying first is an error)."""
        assert self.process is not None
        process = self.process
        await healthy(self.base_url, process, lambda: f"server exited {process.returncode}: {self.log()[-2000:]}",
                      seconds=timeout, every=0.02, late=lambda: f": {self.log()[-2000:]}")

    def kill(self) -> float:
        """SIGKILL the process and reap it; the loop time just before the signal."""
        assert self.process is not None and self.process.poll() is None, "the server is not running"
        at = asyncio.get_running_loop().time()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(5)
        return at

    async def log_says(self, text: str, more_than: int, timeout: float = 20.0) -> None:
        """Wait until the log holds `text` more than `more_than` times (checked every 5 ms)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.log().count(text) <= more_than:
            if loop.time() > deadline:
                raise AssertionError(f"the log never said {text!r} a {more_than + 1}th time: {self.log()[-2000:]}")
            await asyncio.sleep(0.005)
