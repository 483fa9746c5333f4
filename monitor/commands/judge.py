"""``monitor judge calibrate``: how far each LLM judge agrees with human labels (or with a code scorer) on
recorded runs, and its failure rate corrected for its measured error rates (docs/calibration.md).

The dataset is any golden dataset the loaders read (SCORING.md §6) whose cases carry a recorded run
(``actual``, one turn); human labels sit in each case's ``config.label`` (``"pass"`` or ``"fail"``, the reason in
``config.why``). Without ``--dataset`` the labelled tool-selection cases shipped in
``monitor/data/calibration/tool_selection.jsonl`` are used. ``--against-code SCORER`` takes the reference from a
code scorer instead (a scorer id the dataset declares, else a registry kind with its defaults).

Each judge (``--judge``, repeatable: a judge kind of the registry or a judge scorer id of the dataset; default
``judge_tool_selection``) runs through :func:`monitor.judging.runner.judge_run` with a real ``anthropic.Anthropic``
client built from the ``judge`` settings (key from ``judge.api_key_file`` or ``$ANTHROPIC_API_KEY``, never
printed), one case at a time, within the judge budgets: every call is admitted by a
:class:`~monitor.judging.budget.JudgeBudget` (input estimated at ``len(json.dumps(body)) / 3.5`` tokens, output at
``max_tokens``, both times the judge's samples) and its usage and cost recorded after. A refusal stops the whole
calibration (the partial table is printed, exit 3). A judge whose API fails on
:data:`UNAVAILABLE_STREAK` cases in a row is stopped too (the API looks down; exit 3).

A run is *positive* when it failed (:mod:`monitor.judging.calibration`); the measures per judge are printed as a
table, written as JSON with ``--report`` and, with ``--textfile``, as a Prometheus text file for the node exporter's
textfile collector: ``monitor_judge_calibration_kappa{judge}``, ``monitor_judge_calibration_accuracy{judge}`` and
``monitor_judge_calibration_below_floor{judge}`` (1 when kappa is below ``--floor``, default
``judge.calibration_floor``, or undefined). The text file is written only for a complete calibration, and only
with the judges that were measured.

Exit codes: ``0`` every judge at or above the floor; ``1`` a judge below the floor (or with an undefined kappa);
``2`` usage, configuration or dataset error; ``3`` a judge could not run (no API key, the API unavailable on every
case or :data:`UNAVAILABLE_STREAK` cases in a row, no case produced a verdict) or the budget stopped the
calibration (takes precedence over 1).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from monitor.judging.calibration import Calibration, Estimate, Observed, Verdict, calibrate, z_value
from monitor.rules.datasets.loader import load_paths
from monitor.rules.datasets.model import Case, DatasetError, ScorerSpec
from monitor.scoring import catalogue
from monitor.scoring.base import Scorer, ScorerConfigError
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.base import Judge, Prepared
from monitor.scoring.judges.cost import Usage, cost_usd
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.result import ScoreResult
from monitor.settings import Settings, SettingsError, load_settings
from monitor.trajectory.model import Run

if TYPE_CHECKING:
    import anthropic

    from monitor.judging.budget import JudgeBudget

__all__ = [
    "DEFAULT_JUDGE",
    "EXIT_BELOW_FLOOR",
    "EXIT_COULD_NOT_RUN",
    "EXIT_OK",
    "EXIT_USAGE",
    "REPORT_FORMAT",
    "UNAVAILABLE_STREAK",
    "CalibrateArgs",
    "run_calibrate",
    "shipped_dataset",
    "textfile_registry",
]

EXIT_OK: Final = 0
EXIT_BELOW_FLOOR: Final = 1
EXIT_USAGE: Final = 2
EXIT_COULD_NOT_RUN: Final = 3

DEFAULT_JUDGE: Final = "judge_tool_selection"
REPORT_FORMAT: Final = "monitor.judge_calibration/v1"
SHIPPED_DATASET: Final = "data/calibration/tool_selection.jsonl"
CHARS_PER_TOKEN: Final = 3.5
UNAVAILABLE_STREAK: Final = 5
"""A judge whose API call fails (``error/judge_unavailable``) on this many cases in a row is stopped."""
DISAGREEMENTS_SHOWN: Final = 20

JudgeStatus = Literal["measured", "could_not_run", "stopped", "not_run"]


@dataclass
class CalibrateArgs:
    """The parsed ``monitor judge calibrate`` arguments (see ``monitor judge calibrate --help``)."""

    dataset: Path | None = None
    judges: Sequence[str] = (DEFAULT_JUDGE,)
    judge_params: str | None = None
    against_code: str | None = None
    observed: str | None = None
    floor: float | None = None
    confidence: float = 0.95
    report: Path | None = None
    textfile: Path | None = None
    config: Path | None = None


class UsageError(Exception):
    """Bad usage, configuration or dataset (exit 2)."""


@contextlib.contextmanager
def shipped_dataset() -> Iterator[Path]:
    """The path of the labelled tool-selection cases shipped with the package (``--dataset`` default)."""
    with resources.as_file(resources.files("monitor").joinpath(SHIPPED_DATASET)) as path:
        yield path


# ----------------------------------------------------------------------------- the cases


@dataclass(frozen=True, slots=True)
class _Item:
    """One case to judge: its run, expectation and human label (when the dataset has one)."""

    id: str
    run: Run
    expectation: Expectation
    label: Literal["pass", "fail"] | None
    why: str | None


def _items(cases: Sequence[Case], *, need_labels: bool, prefix: bool) -> list[_Item]:
    out: list[_Item] = []
    for case in cases:
        where = f"{case.file}: case {case.id!r}"
        if case.actual is None:
            raise UsageError(f"{where} has no recorded run: calibration judges recorded runs (give the case 'actual')")
        if len(case.actual) != 1 or len(case.turns) != 1:
            turns = max(len(case.actual), len(case.turns))
            raise UsageError(f"{where} has {turns} turns: calibration takes single-turn cases")
        label = case.config.get("label")
        if label is None and need_labels:
            raise UsageError(
                f"{where} has no human label (config.label 'pass' or 'fail'): label every case, "
                "or compare with a code scorer (--against-code)"
            )
        if label is not None and label not in ("pass", "fail"):
            raise UsageError(f"{where}: config.label must be 'pass' or 'fail', got {label!r}")
        why = case.config.get("why")
        expectation = case.turns[0].expectation
        if expectation.catalogue is None and case.tools is not None:
            expectation = dataclasses.replace(expectation, catalogue=case.tools)
        out.append(
            _Item(
                id=f"{Path(case.file).name}:{case.id}" if prefix else case.id,
                run=case.actual[0],
                expectation=expectation,
                label=label,
                why=None if why is None else str(why),
            )
        )
    if not out:
        raise UsageError("the dataset has no cases")
    return out


# ----------------------------------------------------------------------------- scorers


def _close(name: str, candidates: Sequence[str]) -> str:
    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {found[0]!r}?)" if found else ""


def _spec(
    name: str, declared: Sequence[ScorerSpec], want: Literal["judge", "code"], option: str, params: Mapping[str, Any]
) -> ScorerSpec:
    """The scorer ``name`` names: a scorer id the dataset declares, else a registry kind (default parameters);
    ``params`` are merged over its parameters."""
    ids = {s.id: s for s in declared if catalogue.is_judge_kind(s.kind) == (want == "judge")}
    kinds = catalogue.judge_kinds() if want == "judge" else catalogue.code_kinds()
    spec = ids.get(name)
    if spec is None:
        other_ids = {s.id: s for s in declared if s.id not in ids}
        if name in other_ids and name not in catalogue.kinds():
            other = "--against-code" if want == "judge" else "--judge"
            raise UsageError(
                f"{option}: the dataset's scorer {name!r} is a {other_ids[name].kind} scorer (use it with {other})"
            )
        if name not in catalogue.kinds():
            raise UsageError(f"{option}: unknown scorer {name!r}{_close(name, [*ids, *kinds])}")
        info = catalogue.lookup(name)
        if info.kind_class != want:
            other = "--against-code" if want == "judge" else "--judge"
            what = "a judge (judge_*)" if want == "judge" else "a code scorer"
            raise UsageError(f"{option} takes {what}; {name!r} is a {info.kind_class} scorer (use it with {other})")
        if not info.implemented:
            raise UsageError(f"{option}: the judge {name!r} is not implemented yet")
        spec = ScorerSpec(name, name, {})
    return ScorerSpec(spec.id, spec.kind, {**spec.params, **params})


def _build(spec: ScorerSpec, option: str) -> Scorer[Any]:
    try:
        return catalogue.build(spec.kind, dict(spec.params), id=spec.id)
    except ScorerConfigError as exc:
        raise UsageError(f"{option} {spec.id!r}: {'; '.join(exc.problems)}") from None


def _verdict(result: ScoreResult) -> Verdict:
    if result.status == "scored":
        if result.passed is None:
            return "not_applicable"
        return "pass" if result.passed else "fail"
    return "error" if result.status == "error" else "not_applicable"


# ----------------------------------------------------------------------------- options


def _observed(text: str | None) -> Observed | None:
    if text is None:
        return None
    failed, sep, total = text.partition("/")
    try:
        k, n = int(failed), int(total)
    except ValueError:
        k = n = -1
    if not sep or n <= 0 or not 0 <= k <= n:
        raise UsageError(
            f"--observed takes FAILED/TOTAL judged runs with 0 <= FAILED <= TOTAL, TOTAL > 0; got {text!r}"
        )
    return Observed(k, n, "given")


def _params(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--judge-params is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise UsageError("--judge-params takes a JSON object, e.g. '{\"threshold\": 1.0}'")
    return value


# ----------------------------------------------------------------------------- running the judges


@dataclass
class _JudgeRun:
    spec: ScorerSpec
    judge: Judge[Any]
    model: str
    results: list[tuple[_Item, Verdict, ScoreResult]] = field(default_factory=list)
    references: dict[str, Verdict] = field(default_factory=dict)
    status: JudgeStatus = "not_run"
    note: str | None = None
    measures: Calibration | None = None
    below_floor: bool = False

    def usage(self) -> dict[str, Any]:
        totals = {"requests": 0, "input_tokens": 0, "cache_creation_input_tokens": 0}
        totals.update({"cache_read_input_tokens": 0, "output_tokens": 0})
        cost: float | None = 0.0
        for _, _, result in self.results:
            j = result.judge
            if j is None:
                continue
            for key in totals:
                totals[key] += int(getattr(j, key))
            cost = None if cost is None or j.cost_usd is None else cost + j.cost_usd
        return {**totals, "cost_usd": cost}


def _estimate(
    judge: Judge[Any], item: _Item, config: JudgeConfig, prices: Mapping[str, Any], ttl: str
) -> tuple[int, int, float | None] | None:
    """``(input tokens, output tokens, USD or None)`` of the judge's call on ``item``; None when the judge will
    send nothing (not applicable, or its own code fails: ``run_judge`` records that without a request)."""
    try:
        prepared = judge.prepare([item.run], item.expectation, config)
    except Exception:
        return None
    if not isinstance(prepared, Prepared):
        return None
    samples = max(1, prepared.samples)
    tokens_in = math.ceil(len(json.dumps(prepared.body)) / CHARS_PER_TOKEN) * samples
    tokens_out = config.max_tokens * samples
    usd = cost_usd(Usage(input_tokens=tokens_in, output_tokens=tokens_out, requests=samples), config.model, prices, ttl)
    return tokens_in, tokens_out, usd


def _judge_all(
    runs: Sequence[_JudgeRun],
    items: Sequence[_Item],
    client: anthropic.Anthropic,
    budget: JudgeBudget,
    settings: Settings,
    tick: Callable[[], None],
) -> str | None:
    """Judge every item with every judge; returns the budget refusal that stopped it, or None."""
    from monitor.judging.runner import judge_run

    for jr in runs:
        config = JudgeConfig.from_settings(settings, jr.judge.kind, getattr(jr.judge.params, "model", None))
        streak = 0
        jr.status = "measured"
        for item in items:
            estimate = _estimate(jr.judge, item, config, settings.judge.prices, settings.judge.cache_ttl)
            admission = None
            if estimate is not None:
                tokens_in, tokens_out, usd = estimate
                admission = budget.admit(jr.judge.kind, tokens_in, usd, estimated_output_tokens=tokens_out)
                if not admission:
                    jr.status = "stopped"
                    why = " (the model has no price in judge.prices)" if admission.unpriced else ""
                    jr.note = f"stopped by the judge budget {admission.label}{why}"
                    return f"{admission.label}{why}"
            try:
                (result,) = judge_run(client, jr.judge, item.run, item.expectation, settings)
            except BaseException:
                if admission is not None:
                    budget.cancel(admission)
                raise
            if admission is not None:
                if result.judge is None:
                    budget.cancel(admission)
                else:
                    j = result.judge
                    used = Usage(
                        j.input_tokens,
                        j.cache_creation_input_tokens,
                        j.cache_read_input_tokens,
                        j.output_tokens,
                        j.requests,
                        j.batch,
                    )
                    budget.record(jr.judge.kind, used, j.cost_usd, admission=admission)
            jr.results.append((item, _verdict(result), result))
            tick()
            streak = streak + 1 if result.status == "error" and result.reason == "judge_unavailable" else 0
            if streak >= UNAVAILABLE_STREAK:
                jr.status = "stopped"
                jr.note = f"the API did not answer {streak} cases in a row: {_message(result)}"
                break
    return None


def _message(result: ScoreResult) -> str:
    message = result.details.get("message") if isinstance(result.details, Mapping) else None
    return str(message or result.reason or "unavailable")


def _measure(jr: _JudgeRun, observed: Observed | None, confidence: float, floor: float) -> None:
    pairs = [(jr.references[item.id], verdict) for item, verdict, _ in jr.results]
    jr.measures = calibrate(pairs, observed=observed, confidence=confidence)
    counts = jr.measures.confusion
    if jr.status == "measured" and counts.n == 0:
        jr.status = "could_not_run"
        if counts.judge_errors:
            reasons = sorted({_message(r) for _, v, r in jr.results if v == "error"})
            jr.note = f"no verdict: the judge failed on every case ({'; '.join(reasons)[:300]})"
        else:
            jr.note = "no case produced a verdict (the judge was not applicable, or the reference gave none)"
    kappa = jr.measures.kappa.value
    jr.below_floor = jr.status == "measured" and (kappa is None or kappa < floor)


# ----------------------------------------------------------------------------- output


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _with_ci(e: Estimate, digits: int = 3) -> str:
    if e.value is None:
        return f"- ({escape(e.reason or 'undefined')})"
    text = _num(e.value, digits)
    if e.interval is not None:
        text += f" [{_num(e.interval.low, digits)}, {_num(e.interval.high, digits)}]"
    elif e.reason:
        text += f" ({escape(e.reason)})"
    return text


def _measures(jr: _JudgeRun) -> Calibration:
    assert jr.measures is not None
    return jr.measures


def _kappa_text(jr: _JudgeRun, floor: float) -> str:
    assert jr.measures is not None
    k = jr.measures.kappa
    if jr.status != "measured":  # partial or no verdicts: not judged against the floor
        return _num(k.value) if k.value is not None else f"- ({escape(k.reason or 'undefined')})"
    if k.value is None:
        return f"- ({escape(k.reason or 'undefined')}) [red]below floor {floor:g}[/red]"
    shown = _num(k.value)
    if jr.below_floor and float(shown) >= floor:  # never print a failing kappa as equal to its floor
        shown = f"{k.value:.6f}"
    mark = f"[red]< floor {floor:g}[/red]" if jr.below_floor else f"[green]≥ floor {floor:g}[/green]"
    return f"{shown} {mark}"


def _table(runs: Sequence[_JudgeRun], floor: float, reference: str) -> Table:
    table = Table(show_header=True, header_style="bold", show_lines=False)
    table.add_column("measure", style="bold")
    for jr in runs:
        table.add_column(escape(jr.spec.id if jr.spec.id == jr.spec.kind else f"{jr.spec.id} ({jr.spec.kind})"))

    def row(name: str, cell: Callable[[_JudgeRun], str]) -> None:
        table.add_row(name, *(cell(jr) if jr.measures is not None else "-" for jr in runs))

    def counts(jr: _JudgeRun) -> str:
        c = _measures(jr).confusion
        return f"{c.n} (TP {c.tp}, FP {c.fp}, TN {c.tn}, FN {c.fn})"

    def excluded(jr: _JudgeRun) -> str:
        c = _measures(jr).confusion
        text = f"{c.judge_errors} errors, {c.judge_not_applicable} not applicable"
        return text + (f", {c.reference_missing} without reference" if c.reference_missing else "")

    def observed(jr: _JudgeRun) -> str:
        o = _measures(jr).observed
        where = "calibration runs" if o.source == "calibration" else "--observed"
        return f"{_num(o.rate)} ({o.failures}/{o.n}, {where})"

    def level(jr: _JudgeRun) -> str:
        return f"{_measures(jr).confidence:.0%}"

    table.add_row("model", *(escape(jr.model) for jr in runs))
    table.add_row("reference", *([escape(reference)] * len(runs)))
    row("compared runs", counts)
    row("excluded", excluded)
    row("accuracy", lambda jr: _with_ci(_measures(jr).accuracy))
    row("TPR (sensitivity)", lambda jr: _with_ci(_measures(jr).tpr))
    row("TNR (specificity)", lambda jr: _with_ci(_measures(jr).tnr))
    row("Cohen's kappa", lambda jr: _kappa_text(jr, floor))
    row("observed failure rate", observed)
    row("corrected failure rate", lambda jr: _with_ci(_measures(jr).corrected))
    row("confidence level", level)
    table.add_row("status", *(_status_text(jr) for jr in runs))
    return table


def _status_text(jr: _JudgeRun) -> str:
    colour = {"measured": "green", "could_not_run": "yellow", "stopped": "yellow", "not_run": "yellow"}[jr.status]
    text = f"[{colour}]{jr.status.replace('_', ' ')}[/{colour}]"
    return text + (f": {escape(jr.note)}" if jr.note else "")


def _disagreements(console: Console, jr: _JudgeRun) -> None:
    rows = [
        (item, verdict)
        for item, verdict, _ in jr.results
        if verdict in ("pass", "fail")
        and jr.references[item.id] in ("pass", "fail")
        and verdict != jr.references[item.id]
    ]
    if not rows:
        return
    console.print(f"\n{escape(jr.spec.id)} disagrees with the reference on {len(rows)} runs:")
    for item, verdict in rows[:DISAGREEMENTS_SHOWN]:
        why = f" — {escape(item.why)}" if item.why else ""
        console.print(f"  {escape(item.id)}: reference {jr.references[item.id]}, judge {verdict}{why}")
    if len(rows) > DISAGREEMENTS_SHOWN:
        console.print(f"  … and {len(rows) - DISAGREEMENTS_SHOWN} more (see --report)")


def textfile_registry(runs: Sequence[tuple[str, Calibration, bool]]) -> Any:
    """A ``prometheus_client`` registry with the calibration gauges of ``(judge, measures, below_floor)``:
    ``monitor_judge_calibration_{kappa,accuracy,below_floor}{judge}`` (an undefined measure is NaN)."""
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    kappa = Gauge(
        "monitor_judge_calibration_kappa",
        "Cohen's kappa of the judge against the reference (human labels or a code scorer); NaN when undefined",
        ["judge"],
        registry=registry,
    )
    accuracy = Gauge(
        "monitor_judge_calibration_accuracy",
        "Share of compared runs where the judge's pass/fail matches the reference",
        ["judge"],
        registry=registry,
    )
    below = Gauge(
        "monitor_judge_calibration_below_floor",
        "1 when the judge's kappa is below the calibration floor (or undefined), else 0",
        ["judge"],
        registry=registry,
    )
    for name, measures, flagged in runs:
        kappa.labels(name).set(math.nan if measures.kappa.value is None else measures.kappa.value)
        accuracy.labels(name).set(math.nan if measures.accuracy.value is None else measures.accuracy.value)
        below.labels(name).set(1 if flagged else 0)
    return registry


def _report(
    runs: Sequence[_JudgeRun],
    *,
    dataset: Path,
    cases: int,
    reference: dict[str, Any],
    floor: float,
    confidence: float,
    stopped: str | None,
    exit_code: int,
) -> dict[str, Any]:
    judges = []
    for jr in runs:
        rows = []
        for item, verdict, result in jr.results:
            ref = jr.references[item.id]
            rows.append(
                {
                    "id": item.id,
                    "reference": ref,
                    "judge": verdict,
                    "agree": verdict == ref if verdict in ("pass", "fail") and ref in ("pass", "fail") else None,
                    "score": result.score,
                    "status": result.status,
                    "reason": result.reason,
                    "label_why": item.why,
                }
            )
        judges.append(
            {
                "judge": jr.spec.id,
                "scorer_kind": jr.judge.kind,
                "scorer_version": jr.judge.version,
                "params": jr.judge.params.model_dump(mode="json"),
                "model": jr.model,
                "status": jr.status,
                "note": jr.note,
                "below_floor": jr.below_floor,
                "measures": None if jr.measures is None else jr.measures.to_json(),
                "usage": jr.usage(),
                "cases": rows,
            }
        )
    return {
        "format": REPORT_FORMAT,
        "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "dataset": {"path": str(dataset), "cases": cases},
        "reference": reference,
        "floor": floor,
        "confidence": confidence,
        "complete": stopped is None and all(jr.status != "stopped" for jr in runs),
        "stopped_by_budget": stopped,
        "exit_code": exit_code,
        "judges": judges,
    }


# ----------------------------------------------------------------------------- the command


def run_calibrate(args: CalibrateArgs, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Run ``monitor judge calibrate``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        print(exc, file=err)
        return EXIT_USAGE
    try:
        if args.dataset is not None:
            return _calibrate(args, args.dataset, settings, out, err)
        with shipped_dataset() as path:
            return _calibrate(args, path, settings, out, err)
    except UsageError as exc:
        print(f"monitor judge calibrate: {exc}", file=err)
        return EXIT_USAGE
    except DatasetError as exc:
        print(f"dataset error: {exc}", file=err)
        return EXIT_USAGE


def _calibrate(args: CalibrateArgs, path: Path, settings: Settings, out: IO[str], err: IO[str]) -> int:
    floor = settings.judge.calibration_floor if args.floor is None else args.floor
    if not -1.0 <= floor <= 1.0 or math.isnan(floor):
        raise UsageError(f"--floor is a kappa in [-1, 1], got {args.floor}")
    try:
        z_value(args.confidence)
    except ValueError:
        raise UsageError(f"--confidence must be between 0 and 1 (exclusive), got {args.confidence}") from None
    observed = _observed(args.observed)
    extra = _params(args.judge_params)
    names = list(dict.fromkeys(args.judges or (DEFAULT_JUDGE,)))
    if observed is not None and len(names) > 1:
        raise UsageError("--observed is the failure count of one judge: give a single --judge with it")

    datasets = load_paths([path])
    declared = [s for d in datasets for s in d.scorers]
    items = _items(
        [c for d in datasets for c in d.cases], need_labels=args.against_code is None, prefix=len(datasets) > 1
    )
    runs: list[_JudgeRun] = []
    for name in names:
        spec = _spec(name, declared, "judge", "--judge", extra)
        judge = _build(spec, "--judge")
        assert isinstance(judge, Judge)
        model = JudgeConfig.from_settings(settings, judge.kind, getattr(judge.params, "model", None)).model
        runs.append(_JudgeRun(spec, judge, model))

    references: dict[str, Verdict]
    if args.against_code is None:
        references = {i.id: "fail" if i.label == "fail" else "pass" for i in items}
        reference_text = "human labels"
        reference_json: dict[str, Any] = {"kind": "human_labels"}
    else:
        code_spec = _spec(args.against_code, declared, "code", "--against-code", {})
        scorer = _build(code_spec, "--against-code")
        references = {i.id: _verdict(scorer.score(i.run, i.expectation)) for i in items}
        reference_text = f"code scorer {code_spec.id}" + (
            f" ({code_spec.kind})" if code_spec.id != code_spec.kind else ""
        )
        reference_json = {
            "kind": "code_scorer",
            "scorer": code_spec.id,
            "scorer_kind": code_spec.kind,
            "params": scorer.params.model_dump(mode="json"),
        }
    for jr in runs:
        jr.references = references

    try:
        key = settings.judge.api_key()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"judge.api_key_file = {settings.judge.api_key_file}: cannot be read ({type(exc).__name__})"
        ) from None
    if key is None:
        where = (
            f"the file {settings.judge.api_key_file} is empty"
            if settings.judge.api_key_file is not None
            else f"${settings.judge.api_key_env} is unset or empty"
        )
        print(
            f"monitor judge calibrate: no Anthropic API key ({where}): the judges cannot run. Set "
            f"{settings.judge.api_key_env}, or judge.api_key_file to a file holding the key.",
            file=err,
        )
        return EXIT_COULD_NOT_RUN

    import anthropic

    from monitor.judging.budget import JudgeBudget

    client = anthropic.Anthropic(
        api_key=key.get_secret_value(),
        base_url=settings.judge.base_url,
        timeout=settings.judge.timeout_s,
        max_retries=settings.judge.max_retries,
    )
    budget = JudgeBudget.from_settings(settings.judge, clock=lambda: datetime.now(UTC))
    console = Console(
        file=out, soft_wrap=True, highlight=False, width=None if hasattr(out, "isatty") and out.isatty() else 160
    )
    judges_text = ", ".join(f"{jr.spec.id} ({jr.model})" for jr in runs)
    what = f"{len(items)} runs of {path}"
    console.print(f"Calibrating {escape(judges_text)} on {escape(what)} against {escape(reference_text)}")

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True
    )
    try:
        with progress:
            task = progress.add_task("runs", total=len(items) * len(runs))
            stopped = _judge_all(runs, items, client, budget, settings, lambda: progress.advance(task))
    finally:
        client.close()

    for jr in runs:
        if jr.status != "not_run":
            _measure(jr, observed, args.confidence, floor)
    console.print(_table(runs, floor, reference_text))
    for jr in runs:
        _disagreements(console, jr)

    code = _exit_code(runs, stopped)
    if stopped is not None:
        print(f"monitor judge calibrate: stopped by the judge budget ({stopped}); the table is partial", file=err)
    for jr in runs:
        if jr.status in ("could_not_run", "stopped") and jr.note and stopped is None:
            print(f"monitor judge calibrate: {jr.spec.id}: {jr.note}", file=err)
    try:
        if args.report is not None:
            doc = _report(
                runs,
                dataset=path,
                cases=len(items),
                reference=reference_json,
                floor=floor,
                confidence=args.confidence,
                stopped=stopped,
                exit_code=code,
            )
            args.report.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        if args.textfile is not None:
            _write_textfile(args.textfile, runs, stopped, err)
    except OSError as exc:
        print(f"monitor judge calibrate: cannot write the output: {exc}", file=err)
        return EXIT_USAGE
    return code


def _write_textfile(path: Path, runs: Sequence[_JudgeRun], stopped: str | None, err: IO[str]) -> None:
    measured = [(jr.spec.id, jr.measures, jr.below_floor) for jr in runs if jr.status == "measured" and jr.measures]
    if stopped is not None or not measured:
        why = "the calibration was stopped" if stopped is not None else "no judge was measured"
        print(f"monitor judge calibrate: {path} not written: {why}", file=err)
        return
    from prometheus_client import write_to_textfile

    write_to_textfile(str(path), textfile_registry(measured))


def _exit_code(runs: Sequence[_JudgeRun], stopped: str | None) -> int:
    if stopped is not None:
        return EXIT_COULD_NOT_RUN
    if any(jr.below_floor for jr in runs):
        return EXIT_BELOW_FLOOR
    if any(jr.status != "measured" for jr in runs):
        return EXIT_COULD_NOT_RUN
    return EXIT_OK
