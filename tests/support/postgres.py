"""A throwaway PostgreSQL cluster for tests (trust auth, loopback only, a free port, removed afterwards).

Usage from any test package: import the fixtures into its ``conftest.py``::

    from tests.support.postgres import postgres_cluster, postgres_url  # noqa: F401

* ``postgres_cluster`` (session): a running :class:`PostgresCluster` for the whole test run. Call
  :meth:`PostgresCluster.create_database` to give a test its own database.
* ``postgres_url`` (session): the SQLAlchemy URL (``postgresql+psycopg://…``) of one database created
  for this test run on that cluster.

Tests that stop or restart the server start their own cluster (``with PostgresCluster.running_cluster() as pg:``)
so the session cluster is never disturbed. :meth:`PostgresCluster.freeze` SIGSTOPs such a cluster (postmaster and
backends) to make it hang instead of going away; :meth:`PostgresCluster.thaw` resumes it.

The cluster is made with the local PostgreSQL binaries (``initdb``/``pg_ctl``; newest version under
``/usr/lib/postgresql/*/bin`` or on ``PATH``). ``initdb`` refuses to run as root, so as root the binaries run
as the ``postgres`` user via ``runuser``. Durability is off (``fsync``, ``synchronous_commit``,
``full_page_writes``), which makes ``initdb`` + start take about a second.

Environment:

* ``MONITOR_TEST_POSTGRES_URL``: use this existing server (a ``postgresql://`` URL of a role allowed to
  ``CREATE DATABASE``) instead of starting a cluster — e.g. a CI service container.
* ``MONITOR_TEST_REQUIRE_POSTGRES=1``: fail instead of skipping when no PostgreSQL is available.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

ENV_URL = "MONITOR_TEST_POSTGRES_URL"
ENV_REQUIRE = "MONITOR_TEST_REQUIRE_POSTGRES"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries, or the cluster could not be started."""


def find_bindir() -> Path | None:
    """Directory holding ``initdb`` and ``pg_ctl`` (newest version first), or None."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in Path(p).parent.name.split(".")]
    )
    for path in reversed(candidates):
        if (Path(path) / "initdb").exists() and (Path(path) / "pg_ctl").exists():
            return Path(path)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).resolve().parent
    return None


def free_port() -> int:
    """A loopback TCP port free right now (the server binds it moments later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _libpq_url(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://``) as a libpq URL psycopg accepts."""
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


def _sqlalchemy_url(url: str) -> str:
    libpq = _libpq_url(url)
    return "postgresql+psycopg://" + libpq[len("postgresql://") :]


def _with_database(url: str, dbname: str) -> str:
    base, _, _ = _libpq_url(url).partition("?")
    head, _, _ = base.rpartition("/")
    query = _libpq_url(url).partition("?")[2]
    return f"{head}/{dbname}" + (f"?{query}" if query else "")


class PostgresCluster:
    """One PostgreSQL server: either a throwaway local cluster (``start``/``stop``/``destroy``) or, with
    ``external_url``, an existing server this class only creates and drops databases on.
    """

    def __init__(self, datadir: Path | None = None, *, external_url: str | None = None) -> None:
        self.external_url = external_url
        self.bindir = None if external_url else find_bindir()
        if external_url is None and self.bindir is None:
            raise PostgresUnavailable("no PostgreSQL binaries (initdb, pg_ctl) found")
        self._own_datadir = datadir is None
        self.datadir = datadir or Path(tempfile.mkdtemp(prefix="pgtest."))
        self.port = 0
        self._initialised = False
        self._running = False
        self._databases: list[str] = []
        self._frozen = False
        self.startup_seconds = 0.0
        """Wall time of the first :meth:`start` (initdb included)."""

    # --- lifecycle -------------------------------------------------------------------------------------
    def _as_postgres(self, *args: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *args]
        return list(args)

    def _run(self, *args: str, timeout: float = 60) -> None:
        proc = subprocess.run(self._as_postgres(*args), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            log = self.datadir / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresUnavailable(
                f"{Path(args[0]).name} failed ({proc.returncode}): {proc.stderr.strip()} {proc.stdout.strip()}\n{tail}"
            )

    def start(self) -> None:
        """initdb (first time only) and start the server on a free loopback port (kept across restarts)."""
        if self.external_url is not None or self._running:
            return
        assert self.bindir is not None
        began = time.monotonic()
        if not self._initialised:
            if os.geteuid() == 0:
                shutil.chown(self.datadir, "postgres", "postgres")
            self.datadir.chmod(0o700)
            self._run(
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "--auth=trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            )
            self._initialised = True
        attempts = 3 if self.port == 0 else 1
        for attempt in range(attempts):
            port = self.port or free_port()
            try:
                self._run(
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.datadir),
                    "-l",
                    str(self.datadir / "server.log"),
                    "-w",
                    "-t",
                    "30",
                    "-o",
                    f"-c listen_addresses=127.0.0.1 -p {port} -k {self.datadir} -c fsync=off "
                    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
                    "start",
                )
            except PostgresUnavailable:
                if attempt == attempts - 1:
                    raise
                continue
            self.port = port
            break
        self._running = True
        if not self.startup_seconds:
            self.startup_seconds = time.monotonic() - began

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut). Data and port are kept. Thaws it first."""
        if self.external_url is not None or not self._running:
            return
        assert self.bindir is not None
        self.thaw()
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop")
        self._running = False

    def destroy(self) -> None:
        """Drop the databases made here (external server) or stop the server and delete its files."""
        if self.external_url is not None:
            for name in self._databases:
                with contextlib.suppress(psycopg.Error):
                    self.drop_database(name)
            return
        with contextlib.suppress(PostgresUnavailable, subprocess.TimeoutExpired):
            self.stop()
        if self._own_datadir:
            shutil.rmtree(self.datadir, ignore_errors=True)

    # --- freezing ----------------------------------------------------------------------------------------
    def postmaster_pid(self) -> int:
        """PID of the running postmaster (the first line of ``postmaster.pid``)."""
        if self.external_url is not None or not self._running:
            raise RuntimeError("only a running local cluster has a postmaster of ours")
        return int((self.datadir / "postmaster.pid").read_text().split()[0])

    def _processes(self) -> dict[int, str]:
        """{pid: state} of the postmaster and its children (every backend and auxiliary process; PostgreSQL puts
        each in a session of its own, so they do not share the postmaster's process group)."""
        postmaster = self.postmaster_pid()
        found: dict[int, str] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # "pid (comm) state ppid ...": comm may hold spaces, so split after its closing parenthesis
                head, _, tail = stat.read_text().rpartition(")")
                fields = tail.split()
                pid = int(head.split(" (", 1)[0])
                if pid == postmaster or int(fields[1]) == postmaster:
                    found[pid] = fields[0]
        return found

    def freeze(self, timeout: float = 10.0) -> None:
        """SIGSTOP the postmaster, then every process it started, and wait until all of them are stopped.

        A frozen server answers nothing, yet the kernel still completes TCP handshakes on its listening socket and
        ACKs what clients send: the way a hung host or a paused VM looks to a client. :meth:`thaw` (or
        :meth:`stop`/:meth:`destroy`) resumes it.
        """
        postmaster = self.postmaster_pid()
        if postmaster == os.getpid():
            raise RuntimeError("refusing to stop the test process")
        os.kill(postmaster, signal.SIGSTOP)  # first: a stopped postmaster starts no new backend
        self._frozen = True
        deadline = time.monotonic() + timeout
        while True:
            states = self._processes()
            running = [pid for pid, state in states.items() if state not in ("T", "t")]
            if not running:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes {running} of the cluster did not stop")
            for pid in running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            time.sleep(0.01)

    def thaw(self) -> None:
        """SIGCONT the processes :meth:`freeze` stopped (no-op when not frozen)."""
        if not self._frozen:
            return
        postmaster = self.postmaster_pid()
        for pid in sorted(self._processes(), key=lambda p: p == postmaster):  # the postmaster last
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._frozen = False

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """:meth:`freeze` for the duration of the block, thawed on exit whatever happens."""
        try:
            self.freeze()
            yield
        finally:
            self.thaw()

    @property
    def running(self) -> bool:
        return self.external_url is not None or self._running

    @classmethod
    @contextlib.contextmanager
    def running_cluster(cls, datadir: Path | None = None) -> Iterator[PostgresCluster]:
        """A started throwaway cluster, destroyed on exit."""
        cluster = cls(datadir)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.destroy()

    # --- databases ---------------------------------------------------------------------------------------
    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL (psycopg 3 driver) of a database on this server."""
        if self.external_url is not None:
            return _sqlalchemy_url(_with_database(self.external_url, dbname))
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(_libpq_url(self.url("postgres")), autocommit=True, connect_timeout=10)

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a unique name unless given) and return its SQLAlchemy URL."""
        name = name or f"test_{uuid.uuid4().hex[:16]}"
        with self._admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._databases.append(name)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting its sessions first."""
        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if name in self._databases:
            self._databases.remove(name)


def unavailable(reason: str) -> None:
    """Skip locally; fail when ``MONITOR_TEST_REQUIRE_POSTGRES`` or ``CI`` is set (``make test`` sets the first)."""
    _unavailable(reason)


def _unavailable(reason: str) -> None:
    if os.environ.get(ENV_REQUIRE, "") not in ("", "0") or os.environ.get("CI", "") not in ("", "0", "false"):
        pytest.fail(f"PostgreSQL required ({ENV_REQUIRE}) but unavailable: {reason}")
    pytest.skip(f"PostgreSQL unavailable: {reason}")


def start_session_cluster() -> PostgresCluster:
    """The cluster for a test run: the external server of ``MONITOR_TEST_POSTGRES_URL`` or a new local one.

    Skips the calling test (or fails, with ``MONITOR_TEST_REQUIRE_POSTGRES=1``) when none is available.
    """
    external = os.environ.get(ENV_URL)
    try:
        cluster = PostgresCluster(external_url=external) if external else PostgresCluster()
        cluster.start()
    except PostgresUnavailable as exc:
        _unavailable(str(exc))
        raise
    atexit.register(cluster.destroy)  # also on a crashed session
    return cluster


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A running PostgreSQL server for the whole test run, removed at its end."""
    cluster = start_session_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """SQLAlchemy URL of a database created for this test run (``postgresql+psycopg://postgres@127.0.0.1:P/db``)."""
    return postgres_cluster.create_database()
