"""A real Prometheus server (and promtool) for tests: the Debian ``prometheus`` package.

:func:`require_binary` fails the test (never skips) with the install line when a binary is missing.
:class:`PrometheusServer` runs ``prometheus`` in the foreground on a free loopback port with a 1 s
scrape interval, the given static scrape targets and rule files, and exemplar storage enabled;
:meth:`PrometheusServer.start` returns when ``/-/ready`` answers 200 (about 0.2 s). The first sample
of a target lands about 6 s later (Prometheus 2.42 applies target updates on a fixed 5 s tick):
**poll** with :meth:`PrometheusServer.wait_for`, don't sleep. :meth:`stop` sends SIGTERM.

The ``prometheus`` fixture (a session-scoped factory) starts servers on demand and stops them all at
the end of the session; import it into a package's ``conftest.py``::

    from tests.support.prometheus import prometheus  # noqa: F401  (fixture)

    def test_x(prometheus):
        prom = prometheus(targets=["127.0.0.1:9464"], rule_files=[path])
        value = prom.wait_for("sum(monitor_runs_scored_total)", lambda r: r and float(r[0]["value"][1]) >= 1)
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import pytest

INSTALL_HINT: Final = (
    "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus"
)


class PrometheusMissing(RuntimeError):
    """A Prometheus binary is not installed."""


def find_binary(name: str) -> str:
    """Path of ``prometheus`` or ``promtool``; raises :class:`PrometheusMissing` naming the install step."""
    path = shutil.which(name)
    if path is None:
        raise PrometheusMissing(f"`{name}` not found on PATH; install the Debian package: {INSTALL_HINT}")
    return path


def require_binary(name: str) -> str:
    """Like :func:`find_binary`, but fails the current test (not a skip) when missing."""
    try:
        return find_binary(name)
    except PrometheusMissing as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    """One ``prometheus`` process; see the module docstring."""

    def __init__(
        self,
        workdir: Path,
        targets: Sequence[str],
        rule_files: Sequence[str | Path] = (),
        *,
        scrape_interval: str = "1s",
        job: str = "monitor",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.workdir = Path(workdir)
        self.targets = list(targets)
        self.rule_files = [str(Path(p).resolve()) for p in rule_files]
        self.scrape_interval = scrape_interval
        self.job = job
        self.extra_args = list(extra_args)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def config(self) -> dict[str, Any]:
        return {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "rule_files": self.rule_files,
            "scrape_configs": [{"job_name": self.job, "static_configs": [{"targets": self.targets}]}],
        }

    def start(self, timeout: float = 20.0) -> PrometheusServer:
        binary = find_binary("prometheus")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(json.dumps(self.config(), indent=1))  # JSON is YAML
        self.port = free_port()
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--enable-feature=exemplar-storage",
                    "--log.level=warn",
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited rc={self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"prometheus not ready within {timeout}s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # ------------------------------------------------------------------ HTTP API

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return ``data`` (raises on a non-success answer)."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{url}: {exc.code} {exc.read()[:500]!r}") from exc
        if body.get("status") != "success":
            raise RuntimeError(f"{url}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the ``result`` list of a vector answer."""
        data = self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait_for(
        self,
        expr: str,
        predicate: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout: float = 20.0,
        interval: float = 0.25,
    ) -> list[dict[str, Any]]:
        """Poll ``expr`` until ``predicate(result)`` holds; return that result (AssertionError on timeout)."""
        deadline = time.monotonic() + timeout
        last: list[dict[str, Any]] = []
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"prometheus is not running: {self.log_path.read_text()[-2000:]}")
            last = self.query(expr)
            if predicate(last):
                return last
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
        targets = self.api("targets")
        raise AssertionError(f"{expr!r} never satisfied within {timeout}s; last={last}; targets={targets}")

    def exemplars(self, expr: str, window_s: float = 3600) -> list[dict[str, Any]]:
        """``/api/v1/query_exemplars`` over the last ``window_s`` seconds."""
        now = time.time()
        data: list[dict[str, Any]] = self.api("query_exemplars", query=expr, start=str(now - window_s), end=str(now))
        return data


@pytest.fixture(scope="session")
def prometheus() -> Iterator[Callable[..., PrometheusServer]]:
    """Factory: ``prometheus(targets=[...], rule_files=[...], **kw) -> PrometheusServer`` (started).

    Fails the test (not a skip) when the ``prometheus`` package is missing. Every server started is
    stopped at the end of the session and its directory removed.
    """
    require_binary("prometheus")
    started: list[PrometheusServer] = []
    root = Path(tempfile.mkdtemp(prefix="prom-test."))

    def start(targets: Sequence[str], rule_files: Sequence[str | Path] = (), **kw: Any) -> PrometheusServer:
        server = PrometheusServer(root / f"p{len(started)}", targets, rule_files, **kw)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
    shutil.rmtree(root, ignore_errors=True)
