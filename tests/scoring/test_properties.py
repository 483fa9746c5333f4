"""Property tests over every reference scorer (SCORING.md §0, §2).

* every scored value is in [0, 1] and no exception escapes (``error/internal`` never appears) on
  unicode, numeric-string, duplicate, empty, Malformed or ABSENT arguments;
* order-insensitive modes ignore the order of the actual calls;
* scorers whose peer is symmetric give the same score with actual and reference swapped.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.scoring.base import Scorer
from monitor.scoring.expectation import Expectation, ExpectedCall, TopicLabel
from monitor.scoring.reference import (
    AdkResponseMatch,
    AdkToolTrajectory,
    DeepEvalToolCorrectness,
    MastraToolCallAccuracy,
    RagasToolCallAccuracy,
    RagasToolCallF1,
    RagasTopicAdherence,
    ToolEval,
    ToolsAvoided,
    ToolSelectionF1,
    ToolsSelected,
    TrajectoryMatch,
)
from monitor.trajectory.model import ABSENT, Malformed
from tests.scoring.builders import run_with_calls

NAMES = st.sampled_from(["a", "b", "c", "ä", "ａ", "工具"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from(["5", "5.0", "True", "None", "é", "é", "Ｐaris", ""]),
    st.text(max_size=4),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3)
    ),
    max_leaves=6,
)
ARGS = st.one_of(
    st.dictionaries(st.sampled_from(["x", "y", "z", "q"]), VALUES, max_size=3),
    st.just(ABSENT),
    st.builds(Malformed, st.text(max_size=5)),
    st.lists(SCALARS, max_size=2),
    SCALARS,
)
CALLS = st.lists(st.tuples(NAMES, ARGS), max_size=5)
REF_ARGS = st.one_of(st.dictionaries(st.sampled_from(["x", "y", "z", "q"]), VALUES, max_size=3), st.just(ABSENT))
REF_CALLS = st.lists(st.tuples(NAMES, REF_ARGS), max_size=5)


def _scorers() -> list[Scorer[Any]]:
    out: list[Scorer[Any]] = []
    for names_only in ("not_applicable", "names_only"):
        out += [
            ToolEval({"on_missing_arguments": names_only}),
            ToolEval({"variant": "literal", "on_missing_arguments": names_only}),
            AdkToolTrajectory({"on_missing_arguments": names_only, "match_type": "ANY_ORDER"}),
            AdkToolTrajectory({"on_missing_arguments": names_only, "match_type": "IN_ORDER"}),
            AdkToolTrajectory({"on_missing_arguments": names_only}),
            RagasToolCallAccuracy({"on_missing_arguments": names_only}),
            RagasToolCallAccuracy({"on_missing_arguments": names_only, "strict_order": False}),
            RagasToolCallF1({"on_missing_arguments": names_only}),
            DeepEvalToolCorrectness({"on_missing_arguments": names_only, "evaluation_params": ["input_parameters"]}),
            DeepEvalToolCorrectness(
                {
                    "on_missing_arguments": names_only,
                    "evaluation_params": ["input_parameters"],
                    "should_consider_ordering": True,
                }
            ),
            DeepEvalToolCorrectness({"on_missing_arguments": names_only, "should_exact_match": True}),
        ]
        for mode in ("strict", "unordered", "subset", "superset"):
            for args_mode in ("exact", "ignore", "subset", "superset"):
                for matching in ("greedy", "optimal"):
                    out.append(
                        TrajectoryMatch(
                            {
                                "trajectory_match_mode": mode,
                                "tool_args_match_mode": args_mode,
                                "matching": matching,
                                "on_missing_arguments": names_only,
                                "tool_args_match_overrides": {"b": ["x.y"], "c": "superset"},
                            }
                        )
                    )
    out += [
        MastraToolCallAccuracy({"expected_tool": "a"}),
        MastraToolCallAccuracy({"expected_tool_order": ["a", "b"]}),
        ToolsSelected({"gate_by_category": False}),
        ToolsAvoided({"gate_by_category": False}),
        ToolSelectionF1({"gate_by_category": False, "variant": "literal"}),
        AdkResponseMatch(),
        RagasTopicAdherence(),
    ]
    return out


SCORERS = _scorers()


def _expectation(ref: list[tuple[str, Any]], response: str) -> Expectation:
    return Expectation(
        expected_calls=tuple(ExpectedCall(n, args=a) for n, a in ref),
        expected_keywords=("a", "é"),
        forbidden_tools=("c",),
        expected_response=response,
        topic_labels=(TopicLabel("t", True, False),),
    )


@settings(max_examples=60, deadline=None)
@given(CALLS, REF_CALLS, st.text(max_size=20), st.text(max_size=20))
def test_scores_in_unit_interval_and_no_internal_errors(
    actual: list[tuple[str, Any]], ref: list[tuple[str, Any]], response: str, expected_response: str
) -> None:
    run = run_with_calls(actual, final_response=response)
    exp = _expectation(ref, expected_response)
    for scorer in SCORERS:
        r = scorer.score(run, exp)
        assert r.reason != "internal", (scorer.id, r.details)
        if r.status == "scored":
            assert r.score is not None and 0.0 <= r.score <= 1.0, (scorer.id, r.score)
            assert r.passed is not None


ORDER_FREE = [
    *[
        TrajectoryMatch({"trajectory_match_mode": m, "matching": "optimal"})
        for m in ("unordered", "subset", "superset")
    ],
    AdkToolTrajectory({"match_type": "ANY_ORDER"}),
    RagasToolCallF1(),
    DeepEvalToolCorrectness(),
    ToolSelectionF1({"gate_by_category": False}),
    TrajectoryMatch({"trajectory_match_mode": "unordered", "tool_args_match_mode": "exact"}),
]
DICT_ARGS = st.dictionaries(
    st.sampled_from(["x", "y"]), st.one_of(st.integers(0, 2), st.sampled_from(["1", "a"])), max_size=2
)
SIMPLE_CALLS = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), DICT_ARGS), max_size=5)


@settings(max_examples=80, deadline=None)
@given(SIMPLE_CALLS, SIMPLE_CALLS, st.randoms(use_true_random=False))
def test_order_insensitive_modes_ignore_order(actual: list, ref: list, rnd: Any) -> None:
    shuffled = list(actual)
    rnd.shuffle(shuffled)
    exp = _expectation(ref, "")
    for scorer in ORDER_FREE:
        a = scorer.score(run_with_calls(actual), exp)
        b = scorer.score(run_with_calls(shuffled), exp)
        assert a.score == b.score, scorer.id


@settings(max_examples=60, deadline=None)
@given(SIMPLE_CALLS, SIMPLE_CALLS, st.randoms(use_true_random=False))
def test_ragas_non_strict_ignores_order_of_exact_args(actual: list, ref: list, rnd: Any) -> None:
    shuffled = list(actual)
    rnd.shuffle(shuffled)
    scorer = RagasToolCallAccuracy({"strict_order": False})
    exp = _expectation(ref, "")
    assert scorer.score(run_with_calls(actual), exp).score == scorer.score(run_with_calls(shuffled), exp).score


SYMMETRIC = [
    RagasToolCallF1(),
    TrajectoryMatch({"trajectory_match_mode": "unordered"}),
    TrajectoryMatch({"trajectory_match_mode": "strict"}),
    AdkToolTrajectory(),
    DeepEvalToolCorrectness({"should_exact_match": True, "evaluation_params": ["input_parameters"]}),
]


@settings(max_examples=80, deadline=None)
@given(SIMPLE_CALLS, SIMPLE_CALLS)
def test_symmetric_scorers(x: list, y: list) -> None:
    for scorer in SYMMETRIC:
        a = scorer.score(run_with_calls(x), _expectation(y, "")).score
        b = scorer.score(run_with_calls(y), _expectation(x, "")).score
        assert a == b, scorer.id


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_rouge_symmetric(x: str, y: str) -> None:
    s = AdkResponseMatch()
    assert (
        s.score(run_with_calls([], final_response=x), Expectation(expected_response=y)).score
        == s.score(run_with_calls([], final_response=y), Expectation(expected_response=x)).score
    )
