"""The CI gate (SCORING.md §6.7): per (case, scorer) verdicts, case status, suite pass rate, exit code.

Pure functions of the score results and the :class:`~monitor.rules.datasets.model.Gate`.

* **Pair** (case, scorer) over every result of that scorer for the case (turns × runs):
  ``error`` results make it ``errored`` (``allow_errors`` drops them instead); no ``scored`` result →
  ``not_applicable``, which passes unless ``require``; else ``aggregate: mean`` passes iff the mean
  score ≥ threshold (the gate's, else the scorer's own; none → passes), ``aggregate: all`` iff every
  scored result passed by the scorer's own rule (``passed``).
* **Case**: ``failed`` if a gated pair failed; else ``errored`` if a gated pair errored; else ``passed``.
* **Suite** (one dataset): ``pass_rate = passed / (passed + failed)`` as an exact
  :class:`~fractions.Fraction`, compared with ``min_pass_rate`` read as the decimal it is written as
  (``Fraction(repr(x))``); with ``pass_rate_rounding: r`` the seed-000 article's float rule
  ``round(100·rate, r) / 100 >= min_pass_rate`` is used instead. Every gated scorer with ``min_mean``
  needs the mean of its per-case scores ≥ ``min_mean``.
* **Baseline**: a scorer whose mean dropped by more than ``tolerance`` against the baseline report
  fails the suite.
* **Criteria that cannot run**: a gated scorer whose results are ``not_applicable/judges_disabled``
  on every case (a judge while judges are not configured) is listed in ``cannot_run`` and makes the
  run an error (exit ``3``) instead of a silent pass, unless judges were turned off on purpose
  (``judges_off``, ``--no-judges``: such criteria are skipped and reported).
* **Exit code** (over all datasets): ``1`` a suite failed (precedence); ``3`` no quality failure but
  a gated criterion could not run, some case errored, or no case produced a verdict; ``0``
  otherwise. (``2``, dataset and usage errors, is decided before scoring.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal, TypeAlias

from monitor.rules.datasets.model import Gate, GateSpec
from monitor.scoring.result import Issue, ScoreResult

__all__ = [
    "CaseVerdict",
    "DatasetVerdict",
    "PairStatus",
    "PairVerdict",
    "Regression",
    "ScorerSummary",
    "SuiteVerdict",
    "case_verdict",
    "dataset_verdict",
    "exit_code",
    "pair_verdict",
    "passes_rate",
    "suite_verdict",
]

PairStatus: TypeAlias = Literal["passed", "failed", "errored", "not_applicable"]
CaseStatus: TypeAlias = Literal["passed", "failed", "errored"]


@dataclass(frozen=True, slots=True)
class PairVerdict:
    """The verdict of one scorer on one case. ``score`` = mean of the scored results (None if none)."""

    scorer: str
    status: PairStatus
    gated: bool
    score: float | None
    threshold: float | None
    aggregate: str
    scored: int
    errors: int
    issues: tuple[Issue, ...] = ()
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "not_applicable")


@dataclass(frozen=True, slots=True)
class CaseVerdict:
    dataset: str
    case_id: str
    status: CaseStatus
    pairs: Mapping[str, PairVerdict]
    results: tuple[ScoreResult, ...]
    info: Mapping[str, object] = field(default_factory=dict)

    @property
    def failing(self) -> list[PairVerdict]:
        """Gated pairs that failed, then gated pairs that errored."""
        gated = [p for p in self.pairs.values() if p.gated]
        return [p for p in gated if p.status == "failed"] + [p for p in gated if p.status == "errored"]


@dataclass(frozen=True, slots=True)
class ScorerSummary:
    """Per-scorer numbers of one dataset: mean of per-case scores, pair pass rate, ``min_mean`` check."""

    dataset: str
    scorer: str
    kind: str
    gated: bool
    mean: float | None
    passed: int
    failed: int
    errored: int
    not_applicable: int
    min_mean: float | None = None
    min_mean_ok: bool = True

    @property
    def pass_rate(self) -> Fraction | None:
        total = self.passed + self.failed
        return Fraction(self.passed, total) if total else None


@dataclass(frozen=True, slots=True)
class Regression:
    dataset: str
    scorer: str
    baseline: float
    current: float
    tolerance: float


@dataclass(frozen=True, slots=True)
class DatasetVerdict:
    name: str
    source: str
    file: str
    gate: Gate
    cases: tuple[CaseVerdict, ...]
    scorers: tuple[ScorerSummary, ...]
    pass_rate: Fraction | None
    rate_ok: bool
    min_mean_ok: bool
    cannot_run: tuple[str, ...] = ()
    """Gated scorer ids that could not run on any case (every result ``not_applicable/judges_disabled``)."""

    @property
    def passed(self) -> int:
        return sum(c.status == "passed" for c in self.cases)

    @property
    def failed(self) -> int:
        return sum(c.status == "failed" for c in self.cases)

    @property
    def errored(self) -> int:
        return sum(c.status == "errored" for c in self.cases)

    @property
    def suite_passed(self) -> bool:
        return self.rate_ok and self.min_mean_ok


@dataclass(frozen=True, slots=True)
class SuiteVerdict:
    """Every dataset's verdict; ``judges_off`` = judges were turned off on purpose (``--no-judges``),
    so gated judge criteria that could not run are skipped rather than an error."""

    datasets: tuple[DatasetVerdict, ...]
    regressions: tuple[Regression, ...] = ()
    judges_off: bool = False

    @property
    def cannot_run(self) -> list[tuple[str, str]]:
        """``(dataset, scorer)`` of gated criteria that could not run and make the run an error (exit 3)."""
        if self.judges_off:
            return []
        return [(d.name, sid) for d in self.datasets for sid in d.cannot_run]

    @property
    def passed(self) -> int:
        return sum(d.passed for d in self.datasets)

    @property
    def failed(self) -> int:
        return sum(d.failed for d in self.datasets)

    @property
    def errored(self) -> int:
        return sum(d.errored for d in self.datasets)

    @property
    def pass_rate(self) -> Fraction | None:
        total = self.passed + self.failed
        return Fraction(self.passed, total) if total else None

    @property
    def suite_passed(self) -> bool:
        return all(d.suite_passed for d in self.datasets) and not self.regressions

    @property
    def exit_code(self) -> int:
        return exit_code(self)


# ----------------------------------------------------------------------------- pairs and cases


def _unique(issues: Sequence[Issue]) -> tuple[Issue, ...]:
    """Issues without repeats (the same finding in several runs is listed once)."""
    seen: set[str] = set()
    out: list[Issue] = []
    for issue in issues:
        key = repr(issue.to_json())
        if key not in seen:
            seen.add(key)
            out.append(issue)
    return tuple(out)


def pair_verdict(
    scorer: str, results: Sequence[ScoreResult], spec: GateSpec | None, *, allow_errors: bool
) -> PairVerdict:
    """The §6.7 verdict of one scorer's results on one case. ``spec`` None = reported, not gated."""
    gated = spec is not None
    spec = spec or GateSpec()
    errors = [r for r in results if r.status == "error"]
    scored = [r for r in results if r.status == "scored" and r.score is not None]
    scores = [r.score for r in scored if r.score is not None]
    threshold = spec.threshold
    if threshold is None:
        threshold = next((r.threshold for r in results if r.threshold is not None), None)
    mean = sum(scores) / len(scores) if scores else None
    issues = _unique([i for r in results for i in r.failure_issues])

    def verdict(status: PairStatus, reason: str | None = None) -> PairVerdict:
        return PairVerdict(
            scorer=scorer,
            status=status,
            gated=gated,
            score=mean,
            threshold=threshold,
            aggregate=spec.aggregate,
            scored=len(scored),
            errors=len(errors),
            issues=issues if status != "not_applicable" else (),
            reason=reason,
        )

    if errors and not allow_errors:
        return verdict("errored", errors[0].reason)
    if not scored:
        na = next((r.reason for r in results if r.status == "not_applicable"), None)
        return verdict("failed" if spec.require else "not_applicable", na or ("no_result" if not results else None))
    if spec.aggregate == "all":
        ok = all(r.passed is not False for r in scored)
    else:
        ok = threshold is None or (mean is not None and mean >= threshold)
    return verdict("passed" if ok else "failed")


def case_verdict(
    dataset: str,
    case_id: str,
    results: Sequence[ScoreResult],
    scorer_ids: Sequence[str],
    gate: Gate,
    info: Mapping[str, object] | None = None,
) -> CaseVerdict:
    """Pairs for every scorer id (gated per ``gate.scorers``) and the case status."""
    by_scorer: dict[str, list[ScoreResult]] = {sid: [] for sid in scorer_ids}
    for r in results:
        by_scorer.setdefault(r.scorer, []).append(r)
    pairs = {
        sid: pair_verdict(sid, rs, gate.scorers.get(sid), allow_errors=gate.allow_errors)
        for sid, rs in by_scorer.items()
    }
    gated = [p for p in pairs.values() if p.gated]
    status: CaseStatus
    if any(p.status == "failed" for p in gated):
        status = "failed"
    elif any(p.status == "errored" for p in gated):
        status = "errored"
    else:
        status = "passed"
    return CaseVerdict(dataset, case_id, status, pairs, tuple(results), dict(info or {}))


# ----------------------------------------------------------------------------- suite


def passes_rate(passed: int, failed: int, min_pass_rate: float, rounding: int | None) -> tuple[Fraction | None, bool]:
    """``(pass_rate, ok)``. No verdict (``passed + failed == 0``) → ``(None, True)`` (exit 3 decides)."""
    total = passed + failed
    if total == 0:
        return None, True
    rate = Fraction(passed, total)
    if rounding is not None:
        # the seed-000 article: round(passed / total * 100, 1) / 100 < min_pass_rate fails (floats)
        return rate, round(passed / total * 100, rounding) / 100 >= min_pass_rate
    return rate, rate >= Fraction(repr(float(min_pass_rate)))


def dataset_verdict(
    name: str, source: str, file: str, gate: Gate, cases: Sequence[CaseVerdict], kinds: Mapping[str, str]
) -> DatasetVerdict:
    """Pass rate, per-scorer summaries and ``min_mean`` checks of one dataset's cases."""
    summaries: list[ScorerSummary] = []
    min_mean_ok = True
    for sid, kind in kinds.items():
        pairs = [c.pairs[sid] for c in cases if sid in c.pairs]
        scores = [p.score for p in pairs if p.score is not None and p.status != "errored"]
        mean = sum(scores) / len(scores) if scores else None
        spec = gate.scorers.get(sid)
        ok = True
        if spec is not None and spec.min_mean is not None and mean is not None:
            ok = mean >= spec.min_mean
        min_mean_ok = min_mean_ok and ok
        summaries.append(
            ScorerSummary(
                dataset=name,
                scorer=sid,
                kind=kind,
                gated=spec is not None,
                mean=mean,
                passed=sum(p.status == "passed" for p in pairs),
                failed=sum(p.status == "failed" for p in pairs),
                errored=sum(p.status == "errored" for p in pairs),
                not_applicable=sum(p.status == "not_applicable" for p in pairs),
                min_mean=spec.min_mean if spec is not None else None,
                min_mean_ok=ok,
            )
        )
    passed = sum(c.status == "passed" for c in cases)
    failed = sum(c.status == "failed" for c in cases)
    rate, rate_ok = passes_rate(passed, failed, gate.min_pass_rate, gate.pass_rate_rounding)
    return DatasetVerdict(
        name, source, file, gate, tuple(cases), tuple(summaries), rate, rate_ok, min_mean_ok, _cannot_run(gate, cases)
    )


def _cannot_run(gate: Gate, cases: Sequence[CaseVerdict]) -> tuple[str, ...]:
    """Gated scorer ids whose pairs are all ``not_applicable/judges_disabled`` (at least one case)."""
    out: list[str] = []
    for sid in gate.scorers:
        pairs = [c.pairs[sid] for c in cases if sid in c.pairs]
        if pairs and all(p.status == "not_applicable" and p.reason == "judges_disabled" for p in pairs):
            out.append(sid)
    return tuple(out)


def suite_verdict(
    datasets: Sequence[DatasetVerdict],
    baseline: Mapping[tuple[str, str], float] | None = None,
    tolerance: float = 0.0,
    *,
    judges_off: bool = False,
) -> SuiteVerdict:
    """The suite over every dataset, with baseline regressions (``(dataset, scorer) → mean``).
    ``judges_off``: judges were disabled on purpose, so criteria that cannot run are skipped, not errors."""
    regressions: list[Regression] = []
    for d in datasets:
        for s in d.scorers:
            if baseline is None or s.mean is None:
                continue
            before = baseline.get((d.name, s.scorer))
            if before is not None and before - s.mean > tolerance:
                regressions.append(Regression(d.name, s.scorer, before, s.mean, tolerance))
    return SuiteVerdict(tuple(datasets), tuple(regressions), judges_off)


def exit_code(suite: SuiteVerdict) -> int:
    """``1`` suite failed; ``3`` a gated criterion could not run (:attr:`SuiteVerdict.cannot_run`),
    errored cases or no verdict at all; ``0`` passed."""
    if not suite.suite_passed:
        return 1
    if suite.cannot_run:
        return 3
    if suite.passed + suite.failed == 0:
        return 3
    if suite.errored:
        return 3
    return 0
