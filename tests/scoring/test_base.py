"""Tests of the scorer contract (monitor/scoring/base.py), explain() and the catalogue."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import pytest
import rfc8785

from monitor.scoring import catalogue
from monitor.scoring.base import (
    ArgumentParams,
    Evaluation,
    NotScored,
    Outcome,
    Scorer,
    ScorerConfigError,
    Threshold,
    canonical_json,
    hashable,
    json_equal,
    merge_expectations,
    passes,
)
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import explain, hopcroft_karp
from monitor.scoring.result import FailureKind
from monitor.trajectory.model import ABSENT, Run
from tests.scoring.builders import expected, run_with_calls


class _Params(ArgumentParams):
    threshold: Threshold = 0.5
    boom: bool = False
    value: float = 0.7


class _Dummy(Scorer[_Params]):
    kind: ClassVar[str] = "_dummy_test_scorer"
    version: ClassVar[int] = 3
    Params = _Params

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        if self.params.boom:
            raise RuntimeError("boom")
        if reference is None:
            return NotScored.na("no_reference")
        return Outcome(self.params.value)


def test_conventions() -> None:
    assert json_equal({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1.0})
    assert not json_equal("\u00e9", "e\u0301")  # NFC vs NFD: no normalisation
    assert canonical_json({"b": 1.0, "a": "é"}) == '{"a":"é","b":1}'
    assert hashable({"a": [1, {"b": 2}]}) == hashable({"a": (1.0, {"b": True + 1})})
    assert passes(0.8, 0.8) is True and passes(0.79, 0.8) is False and passes(0.1, None) is None


def test_identity_and_hash() -> None:
    s = _Dummy({"value": 0.2})
    assert s.id == "_dummy_test_scorer"
    assert _Dummy(id="mine").id == "mine"
    assert s.params_json == {
        "threshold": 0.5,
        "calls_source": "auto",
        "scope": "flatten",
        "on_missing_arguments": "not_applicable",
        "boom": False,
        "value": 0.2,
    }
    assert s.params_hash == hashlib.sha256(rfc8785.dumps(s.params_json)).hexdigest()[:12]
    assert _Dummy({"value": 0.2}).params_hash == s.params_hash != _Dummy().params_hash


def test_config_errors_name_the_parameter() -> None:
    with pytest.raises(ScorerConfigError, match=r"unknown parameter 'valeu'.*did you mean 'value'"):
        _Dummy({"valeu": 1})
    with pytest.raises(ScorerConfigError, match="'threshold'"):
        _Dummy({"threshold": 1.5})
    with pytest.raises(ScorerConfigError, match="'on_missing_arguments'"):
        _Dummy({"on_missing_arguments": "skip"})


def test_results_and_safe_wrapper() -> None:
    run = run_with_calls([])
    r = _Dummy().score(run, Expectation())
    assert (r.status, r.score, r.passed, r.threshold, r.scorer_version) == ("scored", 0.7, True, 0.5, 3)
    assert r.trace_id == run.trace_id and r.run_id == run.run_id and r.scored_at is None
    na = _Dummy().score(run, None)
    assert (na.status, na.reason, na.score, na.passed) == ("not_applicable", "no_reference", None, None)
    err = _Dummy({"boom": True}).score(run, Expectation())
    assert (err.status, err.reason) == ("error", "internal")
    assert err.details["exception"] == "RuntimeError"
    out_of_range = _Dummy({"value": 1.5}).score(run, Expectation())
    assert out_of_range.reason == "internal"
    assert _Dummy({"boom": True}).score_turns([(run, None), (run, None)]).reason == "internal"


def test_mean_over_turns_skips_not_applicable() -> None:
    run = run_with_calls([])
    r = _Dummy().score_turns([(run, Expectation()), (run, None)])
    assert r.score == 0.7 and r.details["turn_scores"] == [0.7, None]
    assert _Dummy().score_turns([(run, None), (run, None)]).reason == "no_reference"


def test_arguments_gate() -> None:
    calls = run_with_calls([("a", ABSENT), ("b", {})]).calls
    gate = _Dummy().arguments_gate(calls)
    assert isinstance(gate, NotScored) and gate.reason == "arguments_not_captured"
    assert _Dummy({"on_missing_arguments": "names_only"}).arguments_gate(calls) == "names_only"
    assert _Dummy().arguments_gate(calls[1:]) is None


def test_merge_expectations() -> None:
    merged = merge_expectations(
        [Expectation(expected_calls=expected(["a"])), None, Expectation(expected_calls=expected(["b"]), no_tools=True)]
    )
    assert merged is not None
    assert [c.name for c in merged.expected_calls or ()] == ["a", "b"] and merged.no_tools
    assert merge_expectations([None, None]) is None


def test_hopcroft_karp_beats_greedy() -> None:
    # left 0 can take 0 or 1, left 1 only 0: greedy 0→0 blocks left 1.
    assert len(hopcroft_karp([[0, 1], [0]], 2, {0: 0})) == 2


def test_explain_steps() -> None:
    actual = run_with_calls([("search", {"q": "a", "extra": 1}), ("book", {}), ("pay", {}), ("noise", {})]).calls
    exp = (
        ExpectedCall("search", args={"q": "b", "n": 1}),
        ExpectedCall("refund", args={}),
        ExpectedCall("pay"),
        ExpectedCall("cancel"),
    )
    issues = explain(actual, exp, lambda a, e: a.args == e.args, exact_args=True).issues
    kinds = [(str(i.kind), i.tool, i.parameter) for i in issues]
    assert kinds == [
        ("wrong_value", "search", "/q"),
        ("missing_parameter", "search", "/n"),
        ("unknown_parameter", "search", "/extra"),
        ("wrong_tool", "book", None),
        ("wrong_tool", "noise", None),
    ]
    assert issues[3].detail == {"expected_tool": "refund"}
    only_missing = explain(actual[:0], exp[:1]).issues
    assert [i.kind for i in only_missing] == [FailureKind.MISSING_TOOL]


def test_explain_wrong_order() -> None:
    actual = run_with_calls(["a", "b", "c"]).calls
    issues = explain(actual, expected(["a", "c", "b"]), order_failed=True).issues
    assert [i.kind for i in issues] == [FailureKind.WRONG_ORDER]
    assert issues[0].tool == "b"


def test_catalogue() -> None:
    kinds = catalogue.kinds()
    for kind in (
        "tool_eval",
        "tools_selected",
        "tools_avoided",
        "tool_selection_f1",
        "trajectory_match",
        "adk_tool_trajectory",
        "ragas_tool_call_accuracy",
        "ragas_tool_call_f1",
        "mastra_tool_call_accuracy",
        "deepeval_tool_correctness",
        "adk_response_match",
        "ragas_topic_adherence",
    ):
        assert kind in kinds
        info = catalogue.describe(kind)
        assert info.summary and info.doc and isinstance(info.defaults, dict) and info.params_schema
        assert info.to_json()["kind"] == kind
    assert catalogue.build("tool_eval", {"variant": "literal"}, id="te").id == "te"
    with pytest.raises(ScorerConfigError, match="did you mean 'tool_eval'"):
        catalogue.build("tool_evl")


def test_every_reference_scorer_handles_an_empty_run() -> None:
    from monitor.scoring.reference import REFERENCE_SCORERS

    params: dict[str, dict[str, Any]] = {"mastra_tool_call_accuracy": {"expected_tool": "a"}}
    for cls in REFERENCE_SCORERS:
        scorer = cls(params.get(cls.kind))
        r = scorer.score(Run(trace_id="t", run_id="r"), Expectation(expected_calls=()))
        assert r.status in ("scored", "not_applicable"), (cls.kind, r)
