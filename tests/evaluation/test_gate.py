"""The CI gate of SCORING.md §6.7: pairs, cases, pass rate, min_mean, baseline, exit codes."""

from __future__ import annotations

from fractions import Fraction

from monitor.evaluation.gate import (
    case_verdict,
    dataset_verdict,
    pair_verdict,
    passes_rate,
    suite_verdict,
)
from monitor.rules.datasets.model import Gate, GateSpec
from monitor.scoring.result import FailureKind, Issue, ScoreResult


def res(
    score: float | None,
    *,
    status: str = "scored",
    passed: bool | None = None,
    threshold: float = 1.0,
    scorer: str = "s",
    reason: str | None = None,
) -> ScoreResult:
    if status == "scored":
        assert score is not None
        passed = score >= threshold if passed is None else passed
    return ScoreResult(
        scorer=scorer,
        scorer_kind="k",
        scorer_version=1,
        status=status,  # type: ignore[arg-type]
        score=score,
        threshold=threshold,
        passed=passed,
        reason=reason,
    )


def test_mean_aggregation_uses_gate_threshold_else_scorer_threshold() -> None:
    results = [res(1.0), res(0.0), res(1.0), res(1.0)]
    assert pair_verdict("s", results, GateSpec(), allow_errors=False).status == "failed"  # 0.75 < 1.0
    passed = pair_verdict("s", results, GateSpec(threshold=0.75), allow_errors=False)
    assert passed.status == "passed" and passed.score == 0.75 and passed.scored == 4


def test_all_aggregation_uses_each_results_own_rule() -> None:
    # tool_eval: score 0.8 but not passed (missing-tool rule); mean would pass, all fails
    results = [res(0.8, threshold=0.8, passed=False), res(1.0, threshold=0.8)]
    assert pair_verdict("s", results, GateSpec(aggregate="mean"), allow_errors=False).status == "passed"
    assert pair_verdict("s", results, GateSpec(aggregate="all"), allow_errors=False).status == "failed"


def test_errors_not_applicable_and_require() -> None:
    err = res(None, status="error", reason="runner_failed")
    na = res(None, status="not_applicable", reason="no_reference")
    assert pair_verdict("s", [res(1.0), err], GateSpec(), allow_errors=False).status == "errored"
    assert pair_verdict("s", [res(1.0), err], GateSpec(), allow_errors=True).status == "passed"
    assert pair_verdict("s", [err], GateSpec(), allow_errors=True).status == "not_applicable"
    v = pair_verdict("s", [na], GateSpec(), allow_errors=False)
    assert v.status == "not_applicable" and v.reason == "no_reference" and v.ok
    assert pair_verdict("s", [na], GateSpec(require=True), allow_errors=False).status == "failed"


def test_case_status_failed_beats_errored_and_ungated_scorers_never_decide() -> None:
    gate = Gate(scorers={"a": GateSpec(), "b": GateSpec()})
    failing = [res(0.0, scorer="a"), res(None, status="error", scorer="b", reason="internal")]
    assert case_verdict("d", "c", failing, ["a", "b"], gate).status == "failed"
    erroring = [res(1.0, scorer="a"), res(None, status="error", scorer="b", reason="internal")]
    assert case_verdict("d", "c", erroring, ["a", "b"], gate).status == "errored"
    ungated = [res(1.0, scorer="a"), res(1.0, scorer="b"), res(0.0, scorer="x")]
    verdict = case_verdict("d", "c", ungated, ["a", "b", "x"], gate)
    assert verdict.status == "passed" and verdict.pairs["x"].status == "failed" and not verdict.pairs["x"].gated


def test_issues_are_listed_once() -> None:
    issue = Issue(FailureKind.MISSING_TOOL, tool="t")
    r = ScoreResult("s", "k", 1, "scored", score=0.0, threshold=1.0, passed=False, issues=(issue,))
    assert pair_verdict("s", [r, r], GateSpec(), allow_errors=False).issues == (issue,)


def test_pass_rate_is_an_exact_fraction_and_rounding_reproduces_the_article() -> None:
    # 84.96 %: the seed-000 article rounds to 85.0 % and passes its 0.85 gate; the exact rule fails it
    rate, ok = passes_rate(2124, 376, 0.85, None)
    assert rate == Fraction(2124, 2500) and not ok
    assert passes_rate(2124, 376, 0.85, 1) == (Fraction(2124, 2500), True)
    # 0.95 means 19/20 exactly (not the binary float just below it)
    assert passes_rate(19, 1, 0.95, None)[1] is True
    assert passes_rate(0, 0, 1.0, None) == (None, True)


def _dataset(cases: list[list[ScoreResult]], gate: Gate, name: str = "d") -> object:
    verdicts = [case_verdict(name, str(i), rs, ["s"], gate) for i, rs in enumerate(cases)]
    return dataset_verdict(name, "native", "f", gate, verdicts, {"s": "k"})


def test_suite_min_pass_rate_min_mean_and_exit_codes() -> None:
    gate = Gate(min_pass_rate=0.5, scorers={"s": GateSpec(threshold=0.5)})
    d = _dataset([[res(1.0)], [res(0.0)]], gate)
    suite = suite_verdict([d])  # type: ignore[list-item]
    assert suite.pass_rate == Fraction(1, 2) and suite.suite_passed and suite.exit_code == 0
    strict = Gate(min_pass_rate=1.0, scorers={"s": GateSpec(threshold=0.5)})
    assert suite_verdict([_dataset([[res(1.0)], [res(0.0)]], strict)]).exit_code == 1  # type: ignore[list-item]
    mean_gate = Gate(min_pass_rate=0.0, scorers={"s": GateSpec(threshold=0.0, min_mean=0.9)})
    low = _dataset([[res(1.0)], [res(0.6)]], mean_gate)
    assert not low.min_mean_ok and suite_verdict([low]).exit_code == 1  # type: ignore[attr-defined, list-item]
    errored = _dataset([[res(1.0)], [res(None, status="error", reason="runner_failed")]], gate)
    assert suite_verdict([errored]).exit_code == 3  # type: ignore[list-item]
    failed_and_errored = _dataset([[res(0.0)], [res(None, status="error", reason="runner_failed")]], strict)
    assert suite_verdict([failed_and_errored]).exit_code == 1  # type: ignore[list-item]  # 1 takes precedence
    nothing = _dataset([[res(None, status="error", reason="runner_failed")]], gate)
    assert suite_verdict([nothing]).exit_code == 3  # type: ignore[list-item]
    allowed = Gate(allow_errors=True, scorers={"s": GateSpec()})
    only_errors = _dataset([[res(1.0)], [res(None, status="error", reason="runner_failed")]], allowed)
    assert suite_verdict([only_errors]).exit_code == 0  # type: ignore[list-item]


def test_baseline_regressions_beyond_tolerance_fail_the_suite() -> None:
    gate = Gate(min_pass_rate=0.0, scorers={"s": GateSpec(threshold=0.0)})
    d = _dataset([[res(0.8)]], gate)
    assert suite_verdict([d], {("d", "s"): 0.8}).exit_code == 0  # type: ignore[list-item]
    regressed = suite_verdict([d], {("d", "s"): 0.9}, tolerance=0.05)  # type: ignore[list-item]
    assert regressed.exit_code == 1 and regressed.regressions[0].current == 0.8
    assert suite_verdict([d], {("d", "s"): 0.9}, tolerance=0.15).exit_code == 0  # type: ignore[list-item]
    assert suite_verdict([d], {("other", "s"): 1.0}).exit_code == 0  # type: ignore[list-item]
