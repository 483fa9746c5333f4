"""The scoring stage of the daemon: a closed run in, its :class:`ScoreResult` records out.

:class:`ScoringStage` is pure (no I/O; the clock is injected) and, apart from
:class:`Backpressure`, never raises. For one run handed to :meth:`ScoringStage.score`:

1. **Sampling.** Whether a run is scored is decided once, before the stage, by the pipeline's sample
   step (``sampler.should_score`` on the top-level run; nested runs inherit it). Every run handed to
   :meth:`ScoringStage.score` is scored.
2. **Runs scored.** The run, and when ``settings.scoring.score_children`` every nested run (depth
   first), each as a run of its own: its own expectation, scorers and draws.
3. **Scorers of a run**, in this order:

   * the checks of ``settings.scoring.checks`` (default parameters, id = kind). A rule scorer whose
     id equals a check's id, or is a per-tool instance of it (``<id>[<pattern>]``), replaces that
     check at its position; a rule that sets ``enabled: false`` for the id (last matching rule
     wins) removes it for the run;
   * then the other scorers the :class:`~monitor.rules.RuleSet` configures for the run
     (``RuleSet.scorers_for(run)``), in rule order;
   * every scorer receives ``RuleSet.expectation_for(run)`` (merged rules, the golden reference
     matched by attribute, the tool catalogue); with no rule set an empty :class:`Expectation`.
     A reference-based scorer (``Need.REFERENCE`` in its ``needs``) receives it only when
     :func:`has_reference` holds, else ``None``, and so returns its own
     ``not_applicable/no_reference``.

4. **Per-scorer sampling.** Code scorers run in two passes: first those that
   ``sampler.scorer_enabled(id, run, flagged=False)`` admits; ``flagged`` is then true when any of
   those results is ``scored`` with ``passed is False``; the code scorers sampled out are asked
   again with that flag (``always_if_flagged``). Judge scorers (kinds starting with ``judge_``)
   are asked last, with the final flag. A scorer sampled out produces no result.
5. **Judges.** Admitted judge specs of each run go to the optional :class:`JudgeSubmitter`
   (``submit(run, specs, flagged=…, expectation=…)``, after all code scoring of the tree); the
   results it returns (judges decided without the API, e.g. ``not_applicable``) are stamped and
   returned with the code results; verdicts are stored later by the judge pool. Without a submitter
   each yields ``not_applicable/judges_disabled``. ``Backpressure`` from the submitter propagates
   out of :meth:`score` (the run loop pauses and re-offers the run later: code results are
   recomputed identically, and the submitter must be idempotent on (trace id, run id, scorer,
   version) because runs whose judges were accepted before the rejection are submitted again).
6. **Identity.** Every result carries the run's ``trace_id``, ``run_id``, ``agent``,
   ``conversation_id`` and ``scored_at`` (ISO 8601 of the injected clock, read once per call; a
   naive datetime is taken as UTC). Results are built once with these fields
   (``Scorer.score(run, reference, scored_at=…)``, :func:`placeholder` with ``run`` and
   ``scored_at``); only a result that arrives without them (a scorer subclass with its own
   ``score``, the judge submitter) is completed by :func:`stamp`.
7. **Errors.** An exception in a scorer (or in building one, or in the rule set's matching) becomes
   ``status=error, reason=internal`` with the exception type and message in ``details``, and is
   logged with the trace and run ids. A scorer that cannot be built is logged once and reported
   as ``error/internal`` (``scorer_version`` 0) on every run it applies to.

Scorer instances are built once per (id, kind, parameters) and cached for the life of the stage
(the number of distinct configured instances is bounded by the configuration).

:class:`Backpressure` and :class:`JudgeSubmitter` live here; import them from
``monitor.scoring.stage``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from monitor.scoring.base import Need, Scorer, ScorerConfigError, params_hash
from monitor.scoring.catalogue import JUDGE_KIND_PREFIX, is_judge_kind, scorer_classes
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import ScoreResult
from monitor.scoring.spec import ScorerRegistry, ScorerSpec
from monitor.settings import Settings
from monitor.trajectory.model import Run

__all__ = [
    "JUDGE_KIND_PREFIX",
    "Backpressure",
    "JudgeSubmitter",
    "RuleSource",
    "SamplingPolicy",
    "ScoringStage",
    "has_reference",
    "is_judge_kind",
    "placeholder",
    "stamp",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- what the stage needs
# The stage depends on these small protocols, not on monitor.rules / monitor.sampling (which sit
# beside or above scoring): monitor.rules.RuleSet and monitor.sampling.Sampler satisfy them.


class _ScorerToggle(Protocol):
    """A rule's setting for one scorer id (``monitor.rules.ScorerConfig``): ``enabled`` counts only
    when it was set explicitly (it is in ``model_fields_set``)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def model_fields_set(self) -> Set[str]: ...


class _RuleScorers(Protocol):
    """A matching rule, as far as the stage reads it: its scorer settings by id."""

    @property
    def scorers(self) -> Mapping[str, _ScorerToggle]: ...


class RuleSource(Protocol):
    """Per-run rules (``monitor.rules.RuleSet``): the expectation, the scorer specs and the matching
    rules (for ``enabled: false``) of a run."""

    def expectation_for(self, run: Run, /) -> Expectation: ...

    def scorers_for(self, run: Run, /) -> Sequence[ScorerSpec]: ...

    def matching_rules(self, run: Run, /) -> Sequence[_RuleScorers]: ...


class SamplingPolicy(Protocol):
    """Scorer sampling (``monitor.sampling.Sampler``): whether a scorer runs on a run handed to the stage
    (``flagged``: a code check flagged it). Whether the run is scored at all is decided before, once, by the
    pipeline's sample step (:mod:`monitor.steps.sample`)."""

    def scorer_enabled(self, scorer_id: str, run: Run, flagged: bool, /) -> bool: ...


class Backpressure(Exception):
    """A downstream stage is saturated (judge queue full): the run loop holds the run, pauses the
    partitions and keeps polling; the run is offered again later."""


@runtime_checkable
class JudgeSubmitter(Protocol):
    """The seam to the judge pool (a later issue).

    ``submit(run, specs, flagged=…, expectation=…)`` takes the judge ``specs`` for ``run`` and
    returns at once: the results decided without a model (``not_applicable``, an ``error``), while
    verdicts are produced and stored by the judge pool. ``flagged``: a code check flagged the run;
    ``expectation``: the run's merged expectation. It either takes every spec or raises
    :class:`Backpressure` having taken none. Submissions are at least once: the same (trace id,
    run id, scorer id) may be submitted again after a rejection or a replay, so the submitter
    dedupes on the idempotency key.
    """

    def submit(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool, expectation: Expectation
    ) -> Sequence[ScoreResult]: ...


def has_reference(expectation: Expectation) -> bool:
    """True when ``expectation`` holds reference data for the §2 reference-based scorers.

    Reference data: ``expected_calls``, ``expected_messages``, ``expected_tools``,
    ``expected_response``, ``expected_keywords``, ``reference_outcome``, ``topic_labels`` or
    ``category`` set, or ``no_tools`` true ("no call expected"). Production-rule data alone
    (budgets, ``forbidden_tools``, ``allowed_tools``, ``reference_topics``, rubrics, the catalogue)
    is not a reference: the §3 checks and judges read it, and a reference-based scorer given only
    that would score against an empty reference.
    """
    e = expectation
    return (
        e.no_tools
        or e.category is not None
        or any(
            v is not None
            for v in (
                e.expected_calls,
                e.expected_messages,
                e.expected_tools,
                e.expected_response,
                e.expected_keywords,
                e.reference_outcome,
                e.topic_labels,
            )
        )
    )


def _default_registry() -> dict[str, type[Scorer[Any]]]:
    return scorer_classes()


def _params_key(params: Mapping[str, Any]) -> str:
    if not params:  # most rule scorers: no parameters of their own
        return "{}"
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=repr)


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


@dataclass(frozen=True, slots=True)
class _Failed:
    """A scorer spec that could not be built (cached so it is reported, not rebuilt, per run)."""

    exception: str
    message: str


@dataclass(slots=True)
class _Entry:
    spec: ScorerSpec
    result: ScoreResult | None = None


class ScoringStage:
    """Scores sampled runs; see the module docstring for the full contract.

    Not thread-safe (the scorer cache is filled lazily): use one stage per scoring thread.
    """

    def __init__(
        self,
        settings: Settings,
        ruleset: RuleSource | None,
        sampler: SamplingPolicy,
        clock: Callable[[], datetime],
        *,
        submitter: JudgeSubmitter | None = None,
        registry: ScorerRegistry | None = None,
    ) -> None:
        """``registry`` maps scorer kinds to classes (default: every kind of the catalogue).

        Raises :class:`ScorerConfigError` when ``settings.scoring.checks`` names a kind that is
        neither in the registry nor a judge kind.
        """
        self.settings = settings
        self.ruleset = ruleset
        self.sampler = sampler
        self.clock = clock
        self.submitter = submitter
        self.registry: dict[str, type[Scorer[Any]]] = dict(_default_registry() if registry is None else registry)
        self._instances: dict[tuple[str, str, str], Scorer[Any] | _Failed] = {}
        self._empty = Expectation()
        unknown = [k for k in settings.scoring.checks if k not in self.registry and not is_judge_kind(k)]
        if unknown:
            raise ScorerConfigError(
                unknown[0],
                [f"scoring.checks names unknown scorer kind(s) {unknown}; known: {', '.join(sorted(self.registry))}"],
            )
        self._checks = tuple(ScorerSpec(kind, kind, {}) for kind in dict.fromkeys(settings.scoring.checks))
        # the default checks' specs are fixed objects: their instances are found by identity (hot path)
        self._fixed: dict[int, Scorer[Any] | _Failed] = {}
        for spec in self._checks:
            if not is_judge_kind(spec.kind):
                self._fixed[id(spec)] = self._instance(spec)

    # ----------------------------------------------------------------- public

    @property
    def instances_built(self) -> int:
        """How many scorer instances (and failed builds) are cached."""
        return len(self._instances)

    def score(self, run: Run) -> list[ScoreResult]:
        """The results of every scorer on ``run`` and, with ``score_children``, its nested runs.

        The run is scored: whether it is sampled was decided before (the sample step). Raises only
        :class:`Backpressure` (from the judge submitter); any other failure becomes an ``error/internal``
        result or a log line.
        """
        scored_at = self._now()
        runs = list(run.walk()) if self.settings.scoring.score_children else [run]
        results: list[ScoreResult] = []
        pending: list[tuple[Run, list[_Entry], bool, Expectation]] = []
        for r in runs:
            code, judges, flagged, expectation = self._score_one(r, scored_at)
            results.extend(code)
            if judges:
                pending.append((r, judges, flagged, expectation))
        for r, judges, flagged, expectation in pending:
            decided = self._judge(r, judges, flagged, expectation, scored_at)
            results.extend(res if _stamped(r, res, scored_at) else stamp(r, res, scored_at) for res in decided)
        return results

    # ----------------------------------------------------------------- one run

    def _score_one(self, run: Run, scored_at: str) -> tuple[list[ScoreResult], list[_Entry], bool, Expectation]:
        expectation, specs = self._plan(run)
        code: list[_Entry] = []
        judges: list[_Entry] = []
        for spec in specs:
            (judges if is_judge_kind(spec.kind) else code).append(_Entry(spec))
        deferred: list[_Entry] = []
        for entry in code:
            if self._enabled(entry.spec, run, False):
                entry.result = self._run_scorer(entry.spec, run, expectation, scored_at)
            else:
                deferred.append(entry)
        flagged = any(e.result is not None and self._flags(e.result) for e in code)
        if flagged:
            for entry in deferred:
                if self._enabled(entry.spec, run, True):
                    entry.result = self._run_scorer(entry.spec, run, expectation, scored_at)
        flagged = any(e.result is not None and self._flags(e.result) for e in code)
        admitted = [e for e in judges if self._enabled(e.spec, run, flagged)]
        return [e.result for e in code if e.result is not None], admitted, flagged, expectation

    def _plan(self, run: Run) -> tuple[Expectation, list[ScorerSpec]]:
        """The run's expectation and its ordered scorer specs (checks with rule overrides, then rules)."""
        if self.ruleset is None:
            return self._empty, list(self._checks)
        try:
            expectation = self.ruleset.expectation_for(run)
        except Exception:
            log.exception("rules: expectation failed for trace %s run %s; using none", run.trace_id, run.run_id)
            expectation = self._empty
        try:
            rule_specs = list(self.ruleset.scorers_for(run))
            disabled = self._disabled_ids(run)
        except Exception:
            log.exception("rules: scorer selection failed for trace %s run %s; checks only", run.trace_id, run.run_id)
            rule_specs, disabled = [], set()
        used: set[int] = set()
        specs: list[ScorerSpec] = []
        for check in self._checks:
            overrides = [
                i
                for i, s in enumerate(rule_specs)
                if i not in used and (s.id == check.id or s.id.startswith(check.id + "["))
            ]
            if overrides:
                used.update(overrides)
                specs.extend(rule_specs[i] for i in overrides)
            elif check.id not in disabled:
                specs.append(check)
        specs.extend(s for i, s in enumerate(rule_specs) if i not in used)
        return expectation, specs

    def _disabled_ids(self, run: Run) -> set[str]:
        assert self.ruleset is not None
        state: dict[str, bool] = {}
        for rule in self.ruleset.matching_rules(run):
            for sid, sc in rule.scorers.items():
                if "enabled" in sc.model_fields_set:
                    state[sid] = sc.enabled
        return {sid for sid, on in state.items() if not on}

    def _enabled(self, spec: ScorerSpec, run: Run, flagged: bool) -> bool:
        try:
            return self.sampler.scorer_enabled(spec.id, run, flagged)
        except Exception:
            log.exception("sampling failed for scorer %s on trace %s; running it", spec.id, run.trace_id)
            return True

    @staticmethod
    def _flags(result: ScoreResult) -> bool:
        return result.status == "scored" and result.passed is False

    # ----------------------------------------------------------------- scorers

    def _instance(self, spec: ScorerSpec) -> Scorer[Any] | _Failed:
        fixed = self._fixed.get(id(spec))
        if fixed is not None:
            return fixed
        key = (spec.id, spec.kind, _params_key(spec.params))
        found = self._instances.get(key)
        if found is None:
            try:
                found = spec.build(self.registry)
            except Exception as exc:
                found = _Failed(type(exc).__name__, str(exc)[:500])
                log.error("scorer %s (kind %s) cannot be built: %s", spec.id, spec.kind, exc)
            self._instances[key] = found
        return found

    def _run_scorer(self, spec: ScorerSpec, run: Run, expectation: Expectation, scored_at: str) -> ScoreResult:
        """The scorer's result on ``run``, built once with its final identity and ``scored_at``."""
        scorer = self._instance(spec)
        if isinstance(scorer, _Failed):
            details = {"exception": scorer.exception, "message": scorer.message}
            return self._placeholder(spec, run, "error", "internal", details, scored_at)
        reference: Expectation | None = expectation
        if Need.REFERENCE in scorer.needs and not has_reference(expectation):
            reference = None
        try:
            if type(scorer).score is Scorer.score:
                result = scorer.score(run, reference, scored_at=scored_at)
            else:  # a subclass with its own entry point (the signature without scored_at)
                result = scorer.score(run, reference)
            if not _stamped(run, result, scored_at):
                result = stamp(run, result, scored_at)
        except Exception as exc:  # Scorer.score never raises; a misbehaving subclass might
            result = self._placeholder(
                spec, run, "error", "internal", {"exception": type(exc).__name__, "message": str(exc)[:500]}, scored_at
            )
        if result.status == "error" and result.reason == "internal":
            log.warning(
                "scorer %s failed on trace %s run %s: %s: %s",
                spec.id,
                run.trace_id,
                run.run_id,
                result.details.get("exception"),
                result.details.get("message"),
            )
        return result

    def judge(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool, expectation: Expectation
    ) -> list[ScoreResult]:
        """The judges ``specs`` of ``run`` submitted now, their results stamped with the run's identity: what
        :meth:`score` does after the code checks, for judges a worker process recorded
        (:mod:`monitor.steps.workers`). Raises only :class:`Backpressure`."""
        scored_at = self._now()
        decided = self._judge(run, [_Entry(s) for s in specs], flagged, expectation, scored_at)
        return [res if _stamped(run, res, scored_at) else stamp(run, res, scored_at) for res in decided]

    def _judge(
        self, run: Run, entries: list[_Entry], flagged: bool, expectation: Expectation, scored_at: str
    ) -> list[ScoreResult]:
        specs = [e.spec for e in entries]
        if self.submitter is None:
            return [self._placeholder(s, run, "not_applicable", "judges_disabled", None, scored_at) for s in specs]
        try:
            return list(self.submitter.submit(run, specs, flagged=flagged, expectation=expectation))
        except Backpressure:
            raise
        except Exception as exc:
            log.exception("judge submission failed for trace %s run %s", run.trace_id, run.run_id)
            details = {"exception": type(exc).__name__, "message": str(exc)[:500]}
            return [self._placeholder(s, run, "error", "internal", details, scored_at) for s in specs]

    def _placeholder(
        self,
        spec: ScorerSpec,
        run: Run,
        status: str,
        reason: str,
        details: Mapping[str, Any] | None,
        scored_at: str,
    ) -> ScoreResult:
        cls = self.registry.get(spec.kind)
        version = cls.version if cls is not None else 0
        return placeholder(spec, version, status, reason, details, run=run, scored_at=scored_at)

    # ----------------------------------------------------------------- identity

    def _now(self) -> str:
        try:
            return _iso(self.clock())
        except Exception:
            log.exception("the injected clock failed; using the system clock")
            return _iso(datetime.now(UTC))


def _stamped(run: Run, result: ScoreResult, scored_at: str) -> bool:
    """Whether ``result`` already carries ``run``'s identity and ``scored_at`` (then :func:`stamp` is a no-op)."""
    return (
        result.scored_at == scored_at
        and result.trace_id == run.trace_id
        and result.run_id == run.run_id
        and result.agent == run.agent
        and result.conversation_id == run.conversation_id
    )


def stamp(run: Run, result: ScoreResult, scored_at: str) -> ScoreResult:
    """``result`` with the identity of the run it judged: trace and run id, agent, conversation, ``scored_at``.

    A copy (``dataclasses.replace``): for results built elsewhere (the judge pool's verdicts). The stage builds
    its own results with these fields at once.
    """
    return dataclasses.replace(
        result,
        trace_id=run.trace_id,
        run_id=run.run_id,
        agent=run.agent,
        conversation_id=run.conversation_id,
        scored_at=scored_at,
    )


def placeholder(
    spec: ScorerSpec,
    version: int,
    status: str,
    reason: str,
    details: Mapping[str, Any] | None = None,
    *,
    run: Run | None = None,
    scored_at: str | None = None,
) -> ScoreResult:
    """A result written for a scorer rather than by it (judges disabled, a scorer that cannot be built or
    crashed): ``error`` or ``not_applicable`` with ``reason`` and ``details``; with ``run`` it carries the run's
    identity (trace and run id, agent, conversation), and ``scored_at`` as given."""
    params = dict(spec.params)
    try:
        phash = params_hash(params)
    except Exception:
        phash = ""
    return ScoreResult(
        scorer=spec.id,
        scorer_kind=spec.kind,
        scorer_version=version,
        status="error" if status == "error" else "not_applicable",
        reason=reason,
        details=dict(details or {}),
        params=params,
        params_hash=phash,
        trace_id=run.trace_id if run is not None else None,
        run_id=run.run_id if run is not None else None,
        agent=run.agent if run is not None else None,
        conversation_id=run.conversation_id if run is not None else None,
        scored_at=scored_at,
    )
