"""``monitor score``: score one run against one expectation and print the results as JSON.

Input (a file, or stdin with ``-`` / no file): ``{"run": <Run JSON as serialize.run_to_json
writes>, "expect": <native expect block, SCORING.md §6.5>, "scorers": [{kind, params?, id?}]}``
(``expect`` and ``scorers`` optional; ``run`` may also be a list of runs, one per turn, scored as
one case with the same expectation on the first turn). Runs are read as ``monitor eval`` reads a
native case's recorded ``actual`` (:func:`~monitor.rules.datasets.native.recorded_run`: calls
without ``step`` or timings are model-selected calls), so both commands score them alike. Without
``scorers`` the native format's default scorers run. Output: a JSON array of ScoreResults
(:func:`~monitor.evaluation.report.result_to_json`).
Exit ``0`` when printed, ``2`` for invalid input (a scorer kind the registry does not know, with a
did-you-mean, or a bad parameter). Judge kinds are ``not_applicable/judges_disabled`` unless the judge
is implemented and ``--no-judges`` is not given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from monitor.evaluation.engine import DisabledJudge, build_scorer, utc_now
from monitor.evaluation.report import result_to_json
from monitor.rules.datasets._common import Where
from monitor.rules.datasets.model import DatasetError, ScorerSpec
from monitor.rules.datasets.native import (
    NATIVE_DEFAULT_SCORERS,
    expectation_from_native,
    recorded_run,
    scorer_specs,
    validate,
)
from monitor.scoring.base import ScorerConfigError
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import ScoreResult
from monitor.trajectory.model import Run

__all__ = ["run_score", "score_document"]


def score_document(
    doc: Any, file: str = "<stdin>", *, judges: bool = True, now: str | None = None
) -> list[ScoreResult]:
    """The results of the document's scorers on its run(s). Raises :class:`DatasetError` for bad input."""
    where = Where(file)
    top = where.fields(doc, ("run", "expect", "scorers"), required=("run",), what="an object with 'run'")
    raw_runs = top["run"] if isinstance(top["run"], list) else [top["run"]]
    runs: list[Run] = []
    for i, raw in enumerate(raw_runs):
        at = where.key("run") if not isinstance(top["run"], list) else where.key("run").item(i)
        validate(at.obj(raw), file, ref="run", base=at.path)
        runs.append(recorded_run(raw, at))
    if not runs:
        where.key("run").fail("no run given")
    expect_raw = top.get("expect")
    if expect_raw is not None:
        validate(expect_raw, file, ref="expect", base="$.expect")
    expectation = expectation_from_native(expect_raw, where.key("expect"))
    refs: list[Expectation | None] = [expectation, *([Expectation()] * (len(runs) - 1))]
    specs: tuple[ScorerSpec, ...] = NATIVE_DEFAULT_SCORERS
    if top.get("scorers") is not None:
        for i, s in enumerate(where.key("scorers").array(top["scorers"])):
            validate(s, file, ref="scorer", base=f"$.scorers[{i}]")
        specs = scorer_specs(top["scorers"], where.key("scorers"))
    stamp = now or utc_now()
    out: list[ScoreResult] = []
    for i, spec in enumerate(specs):
        try:
            scorer = build_scorer(spec, judges=judges)
        except ScorerConfigError as exc:
            raise DatasetError(file, f"$.scorers[{i}]", "; ".join(exc.problems)) from None
        if isinstance(scorer, DisabledJudge):
            out.append(_stamped(scorer.result(runs[0]), stamp))
        else:
            out.append(_stamped(scorer.score_case(runs, refs), stamp))
    return out


def _stamped(result: ScoreResult, now: str) -> ScoreResult:
    import dataclasses

    return dataclasses.replace(result, scored_at=now)


def run_score(
    source: Path | None, *, judges: bool = True, out: IO[str] | None = None, err: IO[str] | None = None
) -> int:
    """Read the input (``source`` None or ``-`` = stdin), score, print JSON; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    file = "<stdin>" if source is None or str(source) == "-" else str(source)
    try:
        text = sys.stdin.read() if file == "<stdin>" else Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"monitor score: {file}: cannot read: {exc.strerror or exc}", file=err)
        return 2
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"monitor score: {file}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=err)
        return 2
    try:
        results = score_document(doc, file, judges=judges)
    except DatasetError as exc:
        print(f"monitor score: {exc}", file=err)
        return 2
    json.dump([result_to_json(r) for r in results], out, ensure_ascii=False, indent=2, default=_default)
    out.write("\n")
    return 0


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)
