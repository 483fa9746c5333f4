"""Fixtures of the deployment tests: a real Prometheus server started with a given configuration and rule files,
and the rules generator of ``deploy/prometheus/``.

``prometheus_server`` is a factory (function scope: every server it started is stopped when the test ends)::

    def test_x(prometheus_server):
        prom = prometheus_server(targets=["127.0.0.1:9464"], rule_files=[rules])   # job "agent-tool-monitor"
        prom = prometheus_server({"global": {...}, "scrape_configs": [...]}, rule_files=[rules])  # your config
        prom.url                                # http://127.0.0.1:PORT
        prom.wait_for("sum(monitor_runs_scored_total)", lambda r: bool(r))
        prom.alerts()                           # /api/v1/alerts: pending and firing alerts

It is the Debian ``prometheus`` package (``make system-deps``): a missing binary fails the test, it never skips.
Scrape and evaluation intervals default to 1 s. The first sample of a target lands about 6 s after the server is
ready (Prometheus 2.42 applies target updates on a fixed 5 s tick): poll, don't sleep.
"""

from __future__ import annotations

import copy
import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import pytest

from tests.support.prometheus import PrometheusServer, require_binary

ROOT: Final = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR: Final = ROOT / "deploy" / "prometheus"
JOB: Final = "agent-tool-monitor"
"""The scrape job of the daemons, as the Helm chart's ServiceMonitor and the compose file name it."""


class ConfiguredPrometheus(PrometheusServer):
    """A :class:`~tests.support.prometheus.PrometheusServer` with a whole configuration document (the rule files
    are appended to its ``rule_files``; ``global`` intervals default to 1 s)."""

    def __init__(
        self,
        workdir: Path,
        config: Mapping[str, Any],
        rule_files: Sequence[str | Path] = (),
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(workdir, targets=[], rule_files=rule_files, extra_args=extra_args)
        self.document = copy.deepcopy(dict(config))

    def config(self) -> dict[str, Any]:
        doc = copy.deepcopy(self.document)
        glob = doc.setdefault("global", {})
        glob.setdefault("scrape_interval", "1s")
        glob.setdefault("evaluation_interval", glob["scrape_interval"])
        doc["rule_files"] = [*doc.get("rule_files", []), *self.rule_files]
        doc.setdefault("scrape_configs", [])
        return doc

    def alerts(self) -> list[dict[str, Any]]:
        """``/api/v1/alerts``: every pending or firing alert (labels, annotations, state, activeAt, value)."""
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts

    def rule_groups(self) -> list[dict[str, Any]]:
        """``/api/v1/rules``: the loaded groups with each rule's health and last error."""
        groups: list[dict[str, Any]] = self.api("rules")["groups"]
        return groups


def scrape_config(targets: Sequence[str], job: str = JOB, interval: str = "1s") -> dict[str, Any]:
    """One static scrape job."""
    return {
        "job_name": job,
        "scrape_interval": interval,
        "static_configs": [{"targets": list(targets)}],
    }


@pytest.fixture
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ConfiguredPrometheus]]:
    """Factory: ``prometheus_server(config=None, rule_files=(), *, targets=(), job=JOB, interval="1s",
    extra_args=()) -> ConfiguredPrometheus`` (started, ready; its URL is ``.url``).

    Without ``config``, one scrape job ``job`` of ``targets`` every ``interval`` (rules evaluated as often). Every
    server started is stopped (SIGTERM) when the test ends.
    """
    require_binary("prometheus")
    started: list[ConfiguredPrometheus] = []

    def start(
        config: Mapping[str, Any] | None = None,
        rule_files: Sequence[str | Path] = (),
        *,
        targets: Sequence[str] = (),
        job: str = JOB,
        interval: str = "1s",
        extra_args: Sequence[str] = (),
    ) -> ConfiguredPrometheus:
        if config is None:
            config = {
                "global": {"scrape_interval": interval, "evaluation_interval": interval},
                "scrape_configs": [scrape_config(targets, job, interval)] if targets else [],
            }
        server = ConfiguredPrometheus(tmp_path_factory.mktemp("prometheus"), config, rule_files, extra_args)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


def load_rules_generator() -> ModuleType:
    """``deploy/prometheus/generate.py`` as a module (it is a script, not a package)."""
    name = "agent_tool_monitor_rules_generator"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, PROMETHEUS_DIR / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve the module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def rules_generator() -> ModuleType:
    """The rules generator: ``render(Options(...))``, ``Options``, ``alerts(text)``, ``anchor(name)``."""
    return load_rules_generator()
