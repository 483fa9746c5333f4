"""Deterministic sampling of runs and of scorers (DESIGN.md §3 "Sampling").

Every decision is a pure function of the configuration and of the run's identity, so every replica
takes the same decision, and so does a replay of the same spans after a restart or a rebalance:

* a run's draw is its trace's draw, ``u = unit_hash(salt, trace_id)`` in ``[0, 1)``; the run is sampled
  when ``u < rate`` (its agent's ``per_agent`` rate, else the global ``rate``). Raising a rate only adds
  runs (the runs selected at rate ``r`` are a subset of those selected at ``r' > r``); changing
  ``salt`` selects a different, equally sized set everywhere at once. Runs of one trace share the draw
  (a trace is kept or left out whole, as OpenTelemetry's trace-id ratio sampler does), which is what lets
  the daemon decide before rebuilding a trace (:meth:`Sampler.trace_needed`): when the draw is at or above
  every configured rate and no always-rule can fire, no run of the trace can be sampled, and the trace is
  neither decoded in full nor rebuilt;
* a scorer's draw on a run is ``unit_hash(salt, trace_id, run_id, scorer_id)``: independent of the
  run's draw, so a ``per_scorer`` rate applies *on top* of the run rate (effective fraction
  ``rate × per_scorer``) and two scorers with equal rates select different runs.

The hash is BLAKE2b (64-bit digest) over length-prefixed UTF-8 parts, from the standard library:
no dependence on Python's randomised ``hash()``, the platform, or the process.

Always-sample rules bypass the rates:

* ``always_if_errored``: the root span of the run or of a nested run has status error, or any tool
  call of the tree errored (SCORING.md §3.3: ``ToolCall.error`` or an MCP ``isError`` result);
* ``always_attributes``: any ``key: value`` pair equals ``run.attribute(key)``. Only attributes the
  trajectory builder keeps (short scalar root-span and resource attributes, see
  ``monitor.trajectory.build``) are visible on a run;
* ``always_if_flagged`` (per scorer, :meth:`Sampler.scorer_enabled`): a scorer sampled out by its
  ``per_scorer`` rate still runs when a code check flagged the run.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from monitor.settings import SamplingSettings
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import Run

__all__ = ["SAMPLED_REASONS", "Sampler", "SamplingDecision", "SamplingReason", "unit_hash"]

log = logging.getLogger(__name__)

SamplingReason: TypeAlias = Literal["rate", "agent_rate", "errored", "attribute", "skipped"]
"""Why a run was (not) sampled; a bounded set, safe as a metric label."""

SAMPLED_REASONS: Final[frozenset[str]] = frozenset({"rate", "agent_rate", "errored", "attribute"})

_TWO_64: Final = float(2**64)


def unit_hash(*parts: str) -> float:
    """A stable draw in ``[0, 1)`` from ``parts`` (same value in every process, on every host).

    BLAKE2b with an 8-byte digest over each part's UTF-8 bytes, each prefixed with its length
    (so ``("ab", "c")`` and ``("a", "bc")`` differ), read as a big-endian integer / 2**64.
    """
    h = hashlib.blake2b(digest_size=8, person=b"monitor-sample")
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(4, "big"))
        h.update(data)
    return int.from_bytes(h.digest(), "big") / _TWO_64


@dataclass(frozen=True, slots=True)
class SamplingDecision:
    """Whether a run is scored, and why (``reason`` is a :data:`SamplingReason`).

    ``reason`` is ``errored`` / ``attribute`` when an always-rule forced the run in (checked first,
    so a forced run reports the rule even if its draw would have selected it too), ``agent_rate``
    or ``rate`` when the draw selected it, ``skipped`` otherwise.
    """

    sampled: bool
    reason: str


_SKIPPED: Final = SamplingDecision(False, "skipped")
_ERRORED: Final = SamplingDecision(True, "errored")
_ATTRIBUTE: Final = SamplingDecision(True, "attribute")
_RATE: Final = SamplingDecision(True, "rate")
_AGENT_RATE: Final = SamplingDecision(True, "agent_rate")


def _check_rates(name: str, rates: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in rates.items():
        rate = float(value)
        if math.isnan(rate) or not 0.0 <= rate <= 1.0:
            raise ValueError(f"sampling.{name}.{key}: rate {value!r} is not in [0, 1]; use a fraction such as 0.1")
        out[key] = rate
    return out


class Sampler:
    """Deterministic run and scorer sampling; immutable after construction, thread-safe.

    Raises ``ValueError`` at construction for a ``per_agent`` / ``per_scorer`` rate outside [0, 1].
    """

    def __init__(self, settings: SamplingSettings) -> None:
        self.settings = settings
        self.rate = float(settings.rate)
        self.salt = settings.salt
        self.per_agent = _check_rates("per_agent", settings.per_agent)
        self.per_scorer = _check_rates("per_scorer", settings.per_scorer)
        self.always_attributes = dict(settings.always_attributes)
        self.max_rate = max((self.rate, *self.per_agent.values()))

    # ----------------------------------------------------------------- draws

    def trace_draw(self, trace_id: str) -> float:
        """A trace's draw ``unit_hash(salt, trace_id)`` (the id lower-cased), shared by its runs."""
        return unit_hash(self.salt, trace_id.lower())

    def run_draw(self, run: Run) -> float:
        """The run's draw: its trace's (:meth:`trace_draw`)."""
        return self.trace_draw(run.trace_id)

    def scorer_draw(self, scorer_id: str, run: Run) -> float:
        """The draw of ``scorer_id`` on ``run``: ``unit_hash(salt, trace_id, run_id, scorer_id)``."""
        return unit_hash(self.salt, run.trace_id.lower(), run.run_id.lower(), scorer_id)

    def agent_rate(self, agent: str | None) -> float:
        """The rate for runs of ``agent``: its ``per_agent`` entry (exact name), else ``rate``."""
        if agent is not None:
            rate = self.per_agent.get(agent)
            if rate is not None:
                return rate
        return self.rate

    def scorer_rate(self, scorer_id: str) -> float | None:
        """The ``per_scorer`` rate of ``scorer_id``: exact id, else the id without a per-tool suffix
        (``repetition_check[roll_die]`` → ``repetition_check``); None = not rate-limited."""
        rate = self.per_scorer.get(scorer_id)
        if rate is None and scorer_id.endswith("]") and "[" in scorer_id:
            rate = self.per_scorer.get(scorer_id.split("[", 1)[0])
        return rate

    # ----------------------------------------------------------------- rules

    @staticmethod
    def errored(run: Run) -> bool:
        """True when the root span of ``run`` or of a nested run has status error, or any tool call
        of the tree errored (§3.3)."""
        for r in run.walk():
            if r.status == "error":
                return True
            if any(call_error(c) is not None for c in r.calls):
                return True
        return False

    def attribute_match(self, run: Run) -> bool:
        """True when any ``always_attributes`` pair equals the run's kept attribute."""
        return any(run.attribute(k) == v for k, v in self.always_attributes.items())

    # ----------------------------------------------------------------- the contract

    def should_score(self, run: Run) -> SamplingDecision:
        """Whether ``run`` is scored: always-rules first (errored, then attributes), then the draw
        against the agent's rate. Deterministic; never raises for a well-formed :class:`Run`."""
        if self.settings.always_if_errored and self.errored(run):
            return _ERRORED
        if self.always_attributes and self.attribute_match(run):
            return _ATTRIBUTE
        if run.agent is not None and run.agent in self.per_agent:
            return _AGENT_RATE if self.run_draw(run) < self.per_agent[run.agent] else _SKIPPED
        if self.rate >= 1.0:
            return _RATE
        return _RATE if self.run_draw(run) < self.rate else _SKIPPED

    @property
    def every_trace(self) -> bool:
        """True when :meth:`trace_needed` is True for every trace (a rate of 1, or attribute rules, which the
        decision before the rebuild cannot see)."""
        return self.max_rate >= 1.0 or bool(self.always_attributes)

    @property
    def needs_error_flags(self) -> bool:
        """Whether :meth:`trace_needed` reads ``flagged``: not when every trace is needed, nor without
        ``always_if_errored`` (the decode step then skips its scan for tool-error markers)."""
        return not self.every_trace and self.settings.always_if_errored

    def trace_needed(self, trace_id: str, flagged: bool) -> bool:
        """Whether any run of the trace ``trace_id`` could be sampled, decided before its rebuild.

        True when :attr:`every_trace`, when ``flagged`` (a span had status ERROR or a record held a tool-error
        marker) and ``always_if_errored``, or when the trace's draw is below the largest configured rate. False
        means :meth:`should_score` skips every run of the trace: their draw is the trace's, at or above every
        rate, and ``errored`` needs a span with status ERROR or a marker (``tool_error_markers``)."""
        if self.every_trace or (flagged and self.settings.always_if_errored):
            return True
        return self.trace_draw(trace_id) < self.max_rate

    def scorer_enabled(self, scorer_id: str, run: Run, flagged: bool) -> bool:
        """Whether scorer ``scorer_id`` runs on a sampled ``run``.

        True without a ``per_scorer`` rate; else True when ``flagged`` (a code check flagged the
        run) and ``always_if_flagged``; else the scorer's draw on the run ``< rate``.
        """
        rate = self.scorer_rate(scorer_id)
        if rate is None or rate >= 1.0:
            return True
        if flagged and self.settings.always_if_flagged:
            return True
        return self.scorer_draw(scorer_id, run) < rate
