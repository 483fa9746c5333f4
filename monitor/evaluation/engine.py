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
``not_applicable/judges_disabled`` when judges are off or the judge is not implemented yet, and when no
:class:`JudgeDriver` is given (no API key: a judge never calls a model from the pure core). A kind the
registry does not know is a dataset error (exit 2).

With a driver (``EvalOptions.judge``; ``monitor eval`` builds one from :mod:`monitor.judging`, which this
package may not import), every judge result is a :class:`~monitor.scoring.judges.task.JudgeTask` the driver
runs to its end:

* a ``mean`` judge gets one task per (repetition, turn): the turn's run with every earlier turn of the
  conversation before it (``runs = [turn 0, …, turn t]``: the judges render the history, and
  ``scope: conversation`` judges the whole of it) and the turn's expectation; its results carry ``turn``;
* a ``concatenate`` judge, and every judge of a Ragas case (whose expectation is the conversation's:
  SCORING.md §6.4), gets one task per repetition with all the turns (``runs = [turn 0, …, turn N]``) and the
  turns' expectations merged (:func:`~monitor.scoring.base.merge_expectations`);
* a repetition whose turn count differs from the case's is ``error/invocation_count_mismatch``, as for code
  scorers.

A task's key (hence its requests' ``custom_id`` s, which a Batches driver looks up in its ledger to resume an
interrupted run) is ``eval|<dataset>|<case>|<run_no>|<turn>|<scorer id>|<version>|<sha256 of the request
body>``: the same run of the same dataset names the same requests; a changed trajectory or prompt does not. A
driver with ``collect_all`` (Message Batches) gets every task of the whole evaluation at once, after every
case was run and code-scored; the others get each case's tasks when the case is scored.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from monitor.evaluation.gate import CaseVerdict, DatasetVerdict, case_verdict, dataset_verdict
from monitor.evaluation.traces import TraceIndex
from monitor.rules.datasets.model import Case, Dataset, DatasetError, ScorerSpec
from monitor.scoring import catalogue
from monitor.scoring.base import Scorer, ScorerConfigError, merge_expectations, params_hash
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.base import Judge
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.judges.task import JudgeTask
from monitor.scoring.result import ScoreResult
from monitor.trajectory.model import Run
from monitor.trajectory.view import view

if TYPE_CHECKING:
    from monitor.evaluation.runners import Runner

__all__ = [
    "DisabledJudge",
    "EvalOptions",
    "JudgeDriver",
    "PreparedDataset",
    "build_scorer",
    "evaluate_dataset",
    "evaluate_datasets",
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


class JudgeDriver(Protocol):
    """Runs judge tasks against a model (``monitor.judging.batches``: ``DirectJudge``, ``BatchJudge``)."""

    @property
    def collect_all(self) -> bool:
        """True: hand every task of the whole evaluation at once (Message Batches); False: case by case."""
        ...

    def config_for(self, judge: Judge[Any]) -> JudgeConfig:
        """The request configuration of ``judge`` (model, ``max_tokens``, cache TTL, …)."""
        ...

    def run(self, tasks: Sequence[JudgeTask]) -> list[ScoreResult]:
        """Every task to its end; the results (§5.1 records with the ``judge`` usage), in order. Never raises for
        an API that cannot answer: those results are ``error/judge_unavailable``."""
        ...


@dataclass
class EvalOptions:
    """How to evaluate: ``runs`` overrides the gate's repetitions for runners; ``clock`` stamps results;
    ``judge`` runs the judge scorers (None: they are ``not_applicable/judges_disabled``)."""

    runs: int | None = None
    judges: bool = True
    traces: TraceIndex | None = None
    runner: Runner | None = None
    clock: Callable[[], str] = utc_now
    progress: Callable[[CaseVerdict], None] | None = field(default=None, repr=False)
    judge: JudgeDriver | None = field(default=None, repr=False)


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


@dataclass
class _Slot:
    """A judge result to come: its place in the case's results and its stamp."""

    index: int
    task: JudgeTask
    turn: int | None
    run_no: int
    now: str


@dataclass
class _CaseWork:
    prepared: PreparedDataset
    case: Case
    results: list[ScoreResult | None]
    info: dict[str, Any]
    slots: list[_Slot] = field(default_factory=list)
    verdict: CaseVerdict | None = None


def _body_digest(task: JudgeTask) -> str:
    body = task.prepared.body if task.prepared is not None else None
    raw = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def _judge_tasks(
    scorer: Judge[Any],
    work: _CaseWork,
    got: Sequence[Run],
    refs: Sequence[Expectation],
    run_no: int,
    now: str,
    driver: JudgeDriver,
    keys: set[str],
) -> None:
    """Append the judge's slots for one repetition (module docstring: which runs each task sees)."""
    case = work.case
    config = driver.config_for(scorer)
    whole = case.source == "ragas" or scorer.turn_mode == "concatenate"
    plan: list[tuple[int | None, Sequence[Run], Expectation | None]]
    if whole:
        plan = [(None, list(got), merge_expectations(refs))]
    else:
        plan = [(t, list(got[: t + 1]), refs[t]) for t in range(len(got))]
    for turn, runs, reference in plan:
        where = "all" if turn is None else str(turn)
        base = f"eval|{work.prepared.dataset.name}|{case.id}|{run_no}|{where}|{scorer.id}|{scorer.version}"
        task = JudgeTask(scorer, runs, reference, config, key=base)
        key = f"{base}|{_body_digest(task)}"
        n = 1
        while key in keys:  # the same dataset name twice with identical content: keep custom ids unique
            n += 1
            key = f"{base}|{_body_digest(task)}#{n}"
        keys.add(key)
        task.key = key  # before any request is named: custom_id = sha256(key#sample#round)
        work.slots.append(_Slot(len(work.results), task, turn, run_no, now))
        work.results.append(None)


def _collect(prepared: PreparedDataset, case: Case, options: EvalOptions, keys: set[str]) -> _CaseWork:
    """Run the case, score it with every code scorer and prepare its judge tasks (not run yet)."""
    runs = options.runs if options.runs is not None else prepared.dataset.gate.runs
    refs = _references(case)
    counts: list[list[int]] = []
    reps = _repetitions(case, runs, options)
    work = _CaseWork(prepared, case, [], {})
    out = work.results
    driver = options.judge
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
            elif isinstance(scorer, Judge) and driver is not None and got and len(got) == len(refs):
                _judge_tasks(scorer, work, got, refs, run_no, now, driver, keys)
            elif scorer.turn_mode == "mean" and got and len(got) == len(refs):
                for t, (run, ref) in enumerate(zip(got, refs, strict=True)):
                    out.append(_stamp(scorer.score(run, ref), case, t, run_no, now))
            else:
                out.append(_stamp(scorer.score_case(got, refs), case, None, run_no, now))
    work.info = {"repetitions": len(reps), "tool_call_count": counts}
    return work


def _run_judges(works: Sequence[_CaseWork], driver: JudgeDriver | None) -> None:
    """Run the judge tasks of ``works`` with one call of the driver and put their results in place."""
    slots = [(w, s) for w in works for s in w.slots]
    if not slots:
        return
    assert driver is not None
    results = driver.run([s.task for _, s in slots])
    for (work, slot), result in zip(slots, results, strict=True):
        work.results[slot.index] = _stamp(result, work.case, slot.turn, slot.run_no, slot.now)
    for work in works:
        work.slots = []


def _results(work: _CaseWork) -> list[ScoreResult]:
    missing = [i for i, r in enumerate(work.results) if r is None]
    if missing:
        raise RuntimeError(f"case {work.case.id!r}: judge results missing at {missing}")
    return [r for r in work.results if r is not None]


def score_case(prepared: PreparedDataset, case: Case, options: EvalOptions) -> tuple[list[ScoreResult], dict[str, Any]]:
    """Every result of every scorer for one case (its judges run now), and the case's information (call
    counts)."""
    work = _collect(prepared, case, options, set())
    _run_judges([work], options.judge)
    return _results(work), work.info


def _verdict(work: _CaseWork, options: EvalOptions) -> CaseVerdict:
    ds = work.prepared.dataset
    ids = [s.id for s in work.prepared.scorers]
    verdict = case_verdict(ds.name, work.case.id, _results(work), ids, ds.gate, work.info)
    work.verdict = verdict
    if options.progress is not None:
        options.progress(verdict)
    return verdict


def evaluate_datasets(prepared: Sequence[PreparedDataset], options: EvalOptions) -> list[DatasetVerdict]:
    """Score every case of every prepared dataset and apply each dataset's gate. With a ``collect_all`` judge
    driver the judge tasks of all datasets run together, after every case was run and code-scored (and the
    progress hook hears of the cases then, in order)."""
    driver = options.judge
    together = driver is not None and driver.collect_all
    keys: set[str] = set()
    per_dataset: list[list[_CaseWork]] = []
    for p in prepared:
        works: list[_CaseWork] = []
        for case in p.dataset.cases:
            work = _collect(p, case, options, keys)
            if not together:
                _run_judges([work], driver)
                _verdict(work, options)
            works.append(work)
        per_dataset.append(works)
    if together:
        everything = [w for works in per_dataset for w in works]
        _run_judges(everything, driver)
        for work in everything:
            _verdict(work, options)
    out: list[DatasetVerdict] = []
    for p, works in zip(prepared, per_dataset, strict=True):
        ds = p.dataset
        verdicts = [w.verdict for w in works if w.verdict is not None]
        out.append(dataset_verdict(ds.name, ds.source, ds.file, ds.gate, verdicts, p.kinds))
    return out


def evaluate_dataset(prepared: PreparedDataset, options: EvalOptions) -> DatasetVerdict:
    """Score every case of a prepared dataset and apply its gate."""
    return evaluate_datasets([prepared], options)[0]
