"""A clock that moves only when the test says so."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

__all__ = ["ManualClock"]

DEFAULT_START: float = 1_800_000_000.0
"""2027-01-15T08:00:00Z: a plausible epoch second, so that one clock can be both monotonic and wall time."""


class ManualClock:
    """Seconds as a float, advanced by hand: ``clock()`` reads it, ``clock.advance(s)`` moves it forward.

    Contract:

    * Calling the clock returns the current time in seconds; it changes only through :meth:`advance`,
      :meth:`advance_to` and :meth:`sleep` (never by itself), so a test steps through timeouts instead of sleeping.
    * Time never goes back (:meth:`advance` with a negative amount and :meth:`advance_to` an earlier time raise
      ``ValueError``): the clock is valid as a monotonic clock.
    * The default start is a plausible epoch second (:data:`DEFAULT_START`), so the same instance is valid as
      the wall clock too: ``RunLoop(..., clock=clock, wall=clock)``; :meth:`datetime` is the same instant as an
      aware UTC ``datetime`` (what :class:`~monitor.scoring.stage.ScoringStage` takes as its clock:
      ``ScoringStage(settings, rules, sampler, clock.datetime)``).
    * Thread-safe: reads and advances from several threads see one consistent time.
    """

    def __init__(self, start: float = DEFAULT_START) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    @property
    def now(self) -> float:
        """The current time in seconds (same as calling the clock)."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (≥ 0); returns the new time."""
        if seconds < 0:
            raise ValueError(f"a ManualClock never goes back (advance({seconds}))")
        with self._lock:
            self._now += seconds
            return self._now

    def advance_to(self, when: float) -> float:
        """Move forward to ``when`` (not earlier than now); returns it."""
        with self._lock:
            if when < self._now:
                raise ValueError(f"a ManualClock never goes back ({when} < {self._now})")
            self._now = float(when)
            return self._now

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` replacement: advances instead of waiting."""
        self.advance(seconds)

    def datetime(self) -> datetime:
        """The current time as an aware UTC ``datetime``."""
        return datetime.fromtimestamp(self._now, UTC)

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"
