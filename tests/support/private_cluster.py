"""A private PostgreSQL cluster for fault tests: its own port, its data, log and configuration under /tmp.

Tests stop, restart and kill the connections of this cluster, never the shared one on 5432.
Use the module-scoped `private_postgres` fixture (import it into the test module), or
`private_cluster()` as a context manager.
It is made with Debian's postgresql-common tools (`pg_createcluster`, `pg_ctlcluster`,
`pg_dropcluster`) with `PG_CLUSTER_CONF_ROOT` pointing into its temporary directory, so not even
its configuration lands in /etc/postgresql; `pg_dropcluster --stop` removes it afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.support.server import free_port

TOOLS = ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster")
POSTGRES_LIB = Path("/usr/lib/postgresql")


def installed_version() -> str | None:
    """The newest PostgreSQL major version with a server installed (`/usr/lib/postgresql/<v>/bin/postgres`)."""
    if not POSTGRES_LIB.is_dir():
        return None
    versions = [p.name for p in POSTGRES_LIB.iterdir() if (p / "bin" / "postgres").exists()]
    return max(versions, key=lambda v: float(v), default=None)


def why_not_available() -> str | None:
    """None when a private cluster can be made here, else why not."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"postgresql-common tools missing: {', '.join(missing)}"
    if installed_version() is None:
        return f"no PostgreSQL server under {POSTGRES_LIB}"
    if os.geteuid() != 0:
        return "making a cluster for user postgres needs root"
    return None


@dataclass
class PrivateCluster:
    """One running private cluster; `url(schema)` is a FLOWTRAIL_DATABASE_URL for a schema of it."""

    version: str
    name: str
    port: int
    root: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment the cluster tools need to find this cluster's configuration."""
        return {**os.environ, "PG_CLUSTER_CONF_ROOT": str(self.root / "etc")}

    def tool(self, *args: str, timeout: float = 60) -> None:
        """Run one postgresql-common tool on this cluster; a failure raises with its output."""
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")

    @property
    def base(self) -> str:
        """postgresql://postgres@127.0.0.1:PORT/postgres"""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, schema: str) -> str:
        """The database URL of one schema."""
        return f"{self.base}?schema={schema}"

    def new_schema(self) -> str:
        """Create an empty schema; its name."""
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.base, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return name

    def start(self) -> None:
        """Start the cluster and wait until it accepts connections."""
        self.tool("pg_ctlcluster", self.version, self.name, "start")
        self.wait_ready()

    def stop(self) -> None:
        """Stop it the fast way: sessions are disconnected, nothing is lost."""
        self.tool("pg_ctlcluster", self.version, self.name, "stop", "-m", "fast")

    def restart(self) -> None:
        """Stop (fast) and start again."""
        self.tool("pg_ctlcluster", self.version, self.name, "restart", "-m", "fast")
        self.wait_ready()

    def wait_ready(self, seconds: float = 20) -> None:
        """Wait until a connection succeeds."""
        give_up = time.monotonic() + seconds
        while True:
            try:
                psycopg.connect(self.base, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.05)

    def terminate_backends(self) -> int:
        """`pg_terminate_backend` of every other session of the cluster (the server's own); how many."""
        with psycopg.connect(self.base, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchall()
        return sum(1 for (terminated,) in rows if terminated)

    def drop(self) -> None:
        """Stop and remove the cluster, then its directory."""
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.tool("pg_dropcluster", "--stop", self.version, self.name)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivateCluster]:
    """A private cluster for a test module (import this fixture into the module that uses it)."""
    with private_cluster() as cluster:
        yield cluster


@contextlib.contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    """A new running cluster on a free port (skipped where one cannot be made, failed under CI); dropped after."""
    problem = why_not_available()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"a private PostgreSQL cluster cannot be made under CI: {problem}")
        pytest.skip(problem)
    version = installed_version()
    assert version is not None
    root = Path(tempfile.mkdtemp(prefix="flowtrail-pg-", dir="/tmp"))
    root.chmod(0o755)  # the server runs as postgres and must reach its data directory
    (root / "etc").mkdir()
    cluster = PrivateCluster(version, f"flowtrail_{uuid.uuid4().hex[:8]}", free_port(), root)
    try:
        cluster.tool(
            "pg_createcluster", version, cluster.name, "-p", str(cluster.port), "-d", str(root / "data"),
            "-l", str(root / "postgresql.log"), "--user", "postgres", "--start-conf", "manual",
            "--", "--auth=trust",
        )
        cluster.start()
        yield cluster
    finally:
        cluster.drop()
