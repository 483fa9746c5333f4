"""The active failure patterns as a bounded metric: ``monitor_failure_pattern_runs`` (Grafana lists them).

:class:`PatternExporter` runs on a thread of its own in the daemon: every ``report.patterns_refresh_s`` it reads the
runs first scored in the last ``report.patterns_window_s`` from the store (:func:`monitor.store.failures.
load_window`), finds the failure patterns (:func:`monitor.analysis.find_patterns`, grounded in the tool definitions
agents offered) and exports the ``report.max_active_patterns`` with the most impact that hurt at least
``report.min_runs`` runs (:func:`monitor.analysis.active_patterns`): one series per pattern, valued with the runs it
hurt; patterns no longer active lose their series. The store being unavailable skips a refresh (logged); the
gauge keeps its last values meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from monitor.analysis import DefinitionIndex, active_patterns, find_patterns
from monitor.settings import ReportSettings
from monitor.store import StoreUnavailable
from monitor.store.failures import Source, load_window, tool_definitions_of

__all__ = ["PatternExporter", "PatternGauge"]

log = logging.getLogger(__name__)


class PatternGauge(Protocol):
    def set_active_patterns(self, patterns: list[tuple[dict[str, str], float]]) -> None: ...


class PatternExporter:
    """See the module docstring. :meth:`refresh` does one refresh now (tests; the thread calls it)."""

    def __init__(
        self,
        store: Source,
        settings: ReportSettings,
        metrics: PatternGauge,
        *,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.wall = wall
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> int:
        """Recompute and export the active patterns; returns how many are exported (-1: the store was unavailable)."""
        until = self.wall()
        since = until - timedelta(seconds=self.settings.patterns_window_s)
        try:
            data = load_window(self.store, since, until, examples=0)
            index = DefinitionIndex(tool_definitions_of(self.store))
        except StoreUnavailable as exc:
            log.warning("active failure patterns not refreshed (the store is unavailable: %s)", exc)
            return -1
        found = active_patterns(
            find_patterns(data, index, examples=0),
            self.settings.max_active_patterns,
            min_runs=self.settings.min_runs,
        )
        self.metrics.set_active_patterns([(p.labels(), float(p.runs)) for p in found])
        return len(found)

    def start(self) -> PatternExporter:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="failure-patterns", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.settings.patterns_refresh_s):
            try:
                self.refresh()
            except Exception:  # a bug must not kill the thread: say it, try again next time
                log.exception("active failure patterns: refresh failed")
