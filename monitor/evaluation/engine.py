"""Scoring golden datasets: actual trajectories in, score results and gate verdicts out.

Where a case's actual runs come from (SCORING.md §6.6), in this order:

1. the case's recorded ``actual`` (native ``actual``; Ragas ``user_input``): one repetition;
2. the ``--traces`` index (:mod:`monitor.evaluation.traces`), by ``monitor.eval.case_id``: every
   repetition found there;
3. a :class:`~monitor.evaluation.runners.Runner`: ``runs`` repetitions (``--runs``, else the
   dataset's ``gate.runs``: 2 for ADK); a :class:`~monitor.evaluation.runners.RunnerFailed` makes
   that repetition's results ``error/runner_failed`` (the reason in ``details``).

A case with none of these gets ``error/runner_failed`` results (``details.message`` says why);
:func:`missing_sources` lets the command refuse such a run up front (exit 2).

Scoring: a ``mean`` scorer (§1.5) gives one result per (repetition, turn) (``Scorer.score``), so the
gate's mean over them is ADK's pooled mean over runs × turns; a ``concatenate`` scorer gives one
result per repetition (``Scorer.score_case``). A repetition whose turn count differs from the case's
gives ``error/invocation_count_mismatch``. Results carry ``case_id``, ``turn``, ``run_no`` and
``scored_at`` (from the injected clock).

Judges: a judge kind of the registry (:mod:`monitor.scoring.catalogue`) is
``not_applicable/judges_disabled`` when judges are off or the judge is not implemented yet; otherwise
it is built and run like any scorer. A kind the registry does not know is a dataset error (exit 2).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from monitor.evaluation.gate import CaseVerdict, DatasetVerdict, case_verdict, dataset_verdict
from monitor.evaluation.traces import TraceIndex
from monitor.rules.datasets.model import Case, Dataset, DatasetError, ScorerSpec
from monitor.scoring import catalogue
from monitor.scoring.base import Scorer, ScorerConfigError, params_hash
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import ScoreResult
from monitor.trajectory.model import Run
from monitor.trajectory.view import view

if TYPE_CHECKING:
    from monitor.evaluation.runners import Runner

__all__ = [
    "DisabledJudge",
    "EvalOptions",
    "PreparedDataset",
    "build_scorer",
    "evaluate_dataset",
    "is_judge",
    "missing_sources",
    "prepare",
    "score_case",
    "utc_now",
]


def utc_now() -> str:
    """RFC 3339 UTC timestamp (the default clock)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def is_judge(kind: str) -> bool:
    """LLM-judge kinds (SCORING.md §4) are named ``judge_*``."""
    return catalogue.is_judge_kind(kind)


@dataclass(frozen=True, slots=True)
class DisabledJudge:
    """Stands in for a judge scorer when judges are off: every result is ``not_applicable/judges_disabled``."""

    id: str
    kind: str
    params: Mapping[str, Any]

    def result(self, run: Run | None) -> ScoreResult:
        params = dict(self.params)
        try:
            digest = params_hash(params)
        except (TypeError, ValueError):
            digest = ""
        return ScoreResult(
            scorer=self.id,
            scorer_kind=self.kind,
            scorer_version=0,
            status="not_applicable",
            reason="judges_disabled",
            params=params,
            params_hash=digest,
            threshold=params.get("threshold") if isinstance(params.get("threshold"), float | int) else None,
            trace_id=run.trace_id if run else None,
            run_id=run.run_id if run else None,
            agent=run.agent if run else None,
            conversation_id=run.conversation_id if run else None,
        )


AnyScorer = Scorer[Any] | DisabledJudge


@dataclass(frozen=True, slots=True)
class PreparedDataset:
    """A dataset with its scorer instances built (configuration errors surface here, before scoring)."""

    dataset: Dataset
    scorers: tuple[AnyScorer, ...]

    @property
    def kinds(self) -> dict[str, str]:
        return {s.id: s.kind for s in self.scorers}


@dataclass
class EvalOptions:
    """How to evaluate: ``runs`` overrides the gate's repetitions for runners; ``clock`` stamps results."""

    runs: int | None = None
    judges: bool = True
    traces: TraceIndex | None = None
    runner: Runner | None = None
    clock: Callable[[], str] = utc_now
    progress: Callable[[CaseVerdict], None] | None = field(default=None, repr=False)


def prepare(dataset: Dataset, *, judges: bool) -> PreparedDataset:
    """Build every scorer of the dataset; a bad kind or parameter is a :class:`DatasetError` (exit 2)."""
    built: list[AnyScorer] = []
    for i, spec in enumerate(dataset.scorers):
        try:
            built.append(build_scorer(spec, judges=judges))
        except ScorerConfigError as exc:
            problem = f"scorer {spec.id!r}: {'; '.join(exc.problems)}"
            raise DatasetError(dataset.file, f"$.scorers[{i}]", problem) from None
    ids = [s.id for s in built]
    for sid in dataset.gate.scorers:
        if sid not in ids:
            close = difflib.get_close_matches(sid, ids, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise DatasetError(dataset.file, f"$.gate.scorers.{sid}", f"gate names unknown scorer id {sid!r}{hint}")
    return PreparedDataset(dataset, tuple(built))


def build_scorer(spec: ScorerSpec, *, judges: bool) -> AnyScorer:
    """The scorer of ``spec`` from the registry (:mod:`monitor.scoring.catalogue`): a judge kind is a
    :class:`DisabledJudge` when judges are off or the judge is not implemented yet (its parameters are
    still checked). An unknown kind or bad parameter raises :class:`ScorerConfigError` (did-you-mean)."""
    info = catalogue.lookup(spec.kind)
    if info.kind_class == "judge" and (not judges or not info.implemented):
        catalogue.validate_params(spec.kind, spec.params)
        return DisabledJudge(spec.id, spec.kind, dict(spec.params))
    return catalogue.build(spec.kind, dict(spec.params), id=spec.id)


def missing_sources(prepared: Sequence[PreparedDataset], options: EvalOptions) -> list[str]:
    """``dataset:case`` of cases with no recorded trajectory when neither traces nor a runner are given."""
    if options.traces is not None or options.runner is not None:
        return []
    return [f"{p.dataset.name}:{c.id}" for p in prepared for c in p.dataset.cases if c.actual is None]


# ----------------------------------------------------------------------------- scoring one case


def _references(case: Case) -> list[Expectation]:
    refs: list[Expectation] = []
    for turn in case.turns:
        exp = turn.expectation
        if exp.catalogue is None and case.tools is not None:
            exp = dataclasses.replace(exp, catalogue=case.tools)
        refs.append(exp)
    return refs


def _stamp(result: ScoreResult, case: Case, turn: int | None, run_no: int, now: str) -> ScoreResult:
    return dataclasses.replace(result, case_id=case.id, turn=turn, run_no=run_no, scored_at=now)


def _repetitions(case: Case, runs: int, options: EvalOptions) -> list[tuple[int, list[Run] | str]]:
    """``(run_no, runs by turn)`` or ``(run_no, failure reason)`` per repetition."""
    if case.actual is not None:
        return [(0, list(case.actual))]
    if options.traces is not None:
        found = options.traces.repetitions(case.id)
        if found is not None:
            return [(n, list(rs)) for n, rs in found]
    if options.runner is None:
        why = "no trace carries monitor.eval.case_id" if options.traces is not None else "no trajectory source"
        return [(0, f"no recorded trajectory for case {case.id!r}: {why}")]
    from monitor.evaluation.runners import RunnerFailed

    out: list[tuple[int, list[Run] | str]] = []
    for run_no in range(runs):
        try:
            out.append((run_no, list(options.runner.run(case, run_no))))
        except RunnerFailed as exc:
            out.append((run_no, str(exc)))
    return out


def score_case(prepared: PreparedDataset, case: Case, options: EvalOptions) -> tuple[list[ScoreResult], dict[str, Any]]:
    """Every result of every scorer for one case, and the case's information (call counts)."""
    runs = options.runs if options.runs is not None else prepared.dataset.gate.runs
    refs = _references(case)
    out: list[ScoreResult] = []
    counts: list[list[int]] = []
    reps = _repetitions(case, runs, options)
    for run_no, got in reps:
        now = options.clock()
        if isinstance(got, str):
            for scorer in prepared.scorers:
                if isinstance(scorer, DisabledJudge):
                    out.append(_stamp(scorer.result(None), case, None, run_no, now))
                else:
                    err = scorer.error(None, "runner_failed", {"message": got, "run_no": run_no})
                    out.append(_stamp(err, case, None, run_no, now))
            continue
        counts.append([len(view(r, "selected")) for r in got])
        for scorer in prepared.scorers:
            if isinstance(scorer, DisabledJudge):
                out.append(_stamp(scorer.result(got[0] if got else None), case, None, run_no, now))
            elif scorer.turn_mode == "mean" and got and len(got) == len(refs):
                for t, (run, ref) in enumerate(zip(got, refs, strict=True)):
                    out.append(_stamp(scorer.score(run, ref), case, t, run_no, now))
            else:
                out.append(_stamp(scorer.score_case(got, refs), case, None, run_no, now))
    info: dict[str, Any] = {"repetitions": len(reps), "tool_call_count": counts}
    return out, info


def evaluate_dataset(prepared: PreparedDataset, options: EvalOptions) -> DatasetVerdict:
    """Score every case of a prepared dataset and apply its gate."""
    ds = prepared.dataset
    ids = [s.id for s in prepared.scorers]
    verdicts: list[CaseVerdict] = []
    for case in ds.cases:
        results, info = score_case(prepared, case, options)
        verdict = case_verdict(ds.name, case.id, results, ids, ds.gate, info)
        verdicts.append(verdict)
        if options.progress is not None:
            options.progress(verdict)
    return dataset_verdict(ds.name, ds.source, ds.file, ds.gate, verdicts, prepared.kinds)
