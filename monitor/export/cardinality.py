"""Bounded label values for names that come from traffic (agent and tool names).

Prometheus keeps one time series per label-value combination, so a label whose values come from
the outside world (an agent name, a tool name, a tool the model *hallucinated*) must be bounded.
:class:`CardinalityGuard` maps a raw name to a label value:

* a **known** name (``MetricsSettings.known_agents`` / ``known_tools``) is always kept;
* besides those, at most ``top_n`` **admitted** names keep their own label: the most frequent names
  seen, by an **exponentially decayed count** (every ``half_life`` observations, all counts are
  halved: a name's weight halves every ``half_life`` observations of this guard, so the ranking
  follows the recent traffic, not the whole uptime);
* everything else folds into :data:`OTHER`; a missing name (``None`` / empty) becomes :data:`UNKNOWN`.

Admission: while fewer than ``top_n`` names are admitted, a new name is admitted at once. Once the
set is full, a name replaces the least frequent admitted name only when its decayed count exceeds
``hysteresis`` times that name's count (default 2): names near the boundary do not flap. The evicted
name's series are removed through the ``on_evict`` callback (the :class:`~monitor.export.metrics.Metrics`
catalogue removes every series carrying it), so the number of exported values per label stays at most
``len(known) + top_n + 2`` (``other``, ``unknown``) for the life of the process. Its new observations
fold into ``other``; ``sum()`` over the label stays correct for ``rate()``/``increase()`` because
Prometheus marks the removed series stale.

Counting memory is bounded too: the frequency table holds at most ``capacity`` names; a new name
arriving at a full table replaces the least counted non-admitted name (oldest first among equals).

Thread-safe: every method takes one internal lock. ``on_evict`` runs after the lock is released,
on the calling thread; the caller serialises label resolution and metric updates if it needs an
evicted series never to be recreated by a racing update (``Metrics`` does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Final

OTHER: Final = "other"
"""Label value for every name that is neither known nor admitted."""
UNKNOWN: Final = "unknown"
"""Label value for a missing name (``None`` or empty)."""
MAX_NAME_CHARS: Final = 200
"""Names longer than this never get their own label (they fold into ``other``) unless known."""


class CardinalityGuard:
    """Maps raw names to bounded label values (see the module docstring for the policy)."""

    def __init__(
        self,
        known: Iterable[str] = (),
        top_n: int = 50,
        *,
        half_life: int = 10_000,
        capacity: int | None = None,
        hysteresis: float = 2.0,
        on_evict: Callable[[str], None] | None = None,
    ) -> None:
        if top_n < 0:
            raise ValueError("top_n must be >= 0")
        if half_life < 1:
            raise ValueError("half_life must be >= 1")
        if hysteresis < 1.0:
            raise ValueError("hysteresis must be >= 1")
        self._known: frozenset[str] = frozenset(k for k in known if k)
        self._top_n = top_n
        self._half_life = half_life
        self._capacity = max(capacity if capacity is not None else 8 * top_n, top_n, 64)
        self._hysteresis = hysteresis
        self._on_evict = on_evict
        self._lock = threading.Lock()
        self._counts: dict[str, float] = {}
        self._admitted: set[str] = set()
        self._since_decay = 0
        self._folded = 0

    # ------------------------------------------------------------------ queries

    @property
    def known(self) -> frozenset[str]:
        return self._known

    @property
    def admitted(self) -> frozenset[str]:
        """The names currently admitted besides the known ones (at most ``top_n``)."""
        with self._lock:
            return frozenset(self._admitted)

    @property
    def folded(self) -> int:
        """How many observations were folded into ``other`` so far."""
        with self._lock:
            return self._folded

    @property
    def table_size(self) -> int:
        """Names in the frequency table now (at most ``capacity``)."""
        with self._lock:
            return len(self._counts)

    def count(self, name: str) -> float:
        """The decayed count of ``name`` (0 when not in the table; known names are not counted)."""
        with self._lock:
            return self._counts.get(name, 0.0)

    def peek(self, name: str | None) -> str:
        """The label ``name`` maps to now, without counting an observation."""
        if not name:
            return UNKNOWN
        if name in self._known:
            return name
        with self._lock:
            return name if name in self._admitted else OTHER

    # ------------------------------------------------------------------ the one mutator

    def label(self, name: str | None) -> str:
        """Count one observation of ``name`` and return its label value.

        Returns ``name`` when it is known or admitted (possibly admitted by this very observation),
        :data:`UNKNOWN` for a missing name, else :data:`OTHER`.
        """
        if not name:
            return UNKNOWN
        if name in self._known:
            return name
        evicted: str | None = None
        with self._lock:
            if len(name) > MAX_NAME_CHARS or not _exposable(name):
                self._folded += 1
                return OTHER
            self._tick()
            count = self._bump(name)
            if name in self._admitted:
                return name
            if len(self._admitted) < self._top_n:
                self._admitted.add(name)
                return name
            if self._top_n > 0:
                weakest = min(self._admitted, key=lambda n: self._counts.get(n, 0.0))
                if count > self._hysteresis * self._counts.get(weakest, 0.0):
                    self._admitted.discard(weakest)
                    self._admitted.add(name)
                    evicted = weakest
            if evicted is None:
                self._folded += 1
                return OTHER
        if self._on_evict is not None:
            self._on_evict(evicted)
        return name

    # ------------------------------------------------------------------ internals (lock held)

    def _tick(self) -> None:
        self._since_decay += 1
        if self._since_decay < self._half_life:
            return
        self._since_decay = 0
        for key in list(self._counts):
            value = self._counts[key] / 2.0
            if value < 0.25 and key not in self._admitted:
                del self._counts[key]
            else:
                self._counts[key] = value

    def _bump(self, name: str) -> float:
        current = self._counts.get(name)
        if current is None and len(self._counts) >= self._capacity:
            victim: str | None = None
            lowest = 0.0
            for key, value in self._counts.items():  # insertion order: oldest first among equals
                if key in self._admitted:
                    continue
                if victim is None or value < lowest:
                    victim, lowest = key, value
            if victim is None:  # cannot happen: capacity >= top_n and admitted <= top_n
                return 0.0
            del self._counts[victim]
        value = (current or 0.0) + 1.0
        self._counts[name] = value
        return value


def _exposable(value: str) -> bool:
    """True when ``value`` can be written in the text exposition (UTF-8): no lone surrogate. Decoding already
    replaces them; this is the backstop that keeps ``/metrics`` answering whatever reaches a label."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class CappedLabel:
    """A label whose values are codes from the program (reasons, outcomes, decisions).

    Codes are meant to come from a closed set; this is the safety net if a caller passes something
    open-ended: the ``preset`` values and the first ``max_values`` other distinct values are kept,
    every later new value becomes :data:`OTHER`; an empty value is :data:`UNKNOWN`. Thread-safe.
    """

    def __init__(self, preset: Iterable[str] = (), max_values: int = 32) -> None:
        self._preset = frozenset(preset)
        self._max = max_values
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if not value:
            return UNKNOWN
        if value in self._preset:
            return value
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) < self._max and len(value) <= MAX_NAME_CHARS and _exposable(value):
                self._seen.add(value)
                return value
        return OTHER
