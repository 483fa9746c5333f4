"""The scoring fast paths give exactly what the plain algorithms give.

* :func:`~monitor.scoring.explain.explain` (same-name adjacency, Hopcroft–Karp only when an augmenting path may
  exist) against the reference procedure of SCORING.md §2.0 (full adjacency, Hopcroft–Karp always): same
  issues, same matching;
* ROUGE-1 of ``adk_response_match`` (cached stems, cached reference counts, a ``str.translate`` table) against
  ``rouge_score``'s own ``RougeScorer`` with ADK 2.13.0's character loop as its tokenizer: same three floats;
* ``repetition_check``'s keys (JCS only for names that recur) against :func:`call_key`: same equalities;
* :func:`~monitor.scoring.result.frozen_init`: the dataclass contract kept (signature, defaults, frozen);
* results built once: every field set at construction, the stage stamps nothing it built itself;
* the compiled-validator cache: keyed by content (equal schemas decoded per run hit it), bounded.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer, tokenizers

from monitor.rules import RuleSet
from monitor.sampling import Sampler
from monitor.scoring import stage as stage_module
from monitor.scoring.base import NotScored, Outcome
from monitor.scoring.checks.repetition_check import _keys, call_key
from monitor.scoring.checks.schema_check import (
    VALIDATOR_CACHE_SIZE,
    SchemaCheck,
    compile_schema,
    validator_cache_clear,
    validator_cache_info,
)
from monitor.scoring.checks.tool_error_check import ToolErrorCheck
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import Explanation, explain, hopcroft_karp, json_safe, pointer
from monitor.scoring.reference import AdkToolTrajectory
from monitor.scoring.reference.adk_response_match import rouge1, tokens
from monitor.scoring.result import FailureKind, Issue, ScoreResult, Severity, call_issue, frozen_init
from monitor.scoring.stage import ScoringStage
from monitor.settings import Settings
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall, ToolDef
from tests.scoring.builders import run_with_calls, run_with_steps
from tests.scoring.test_stage import NOW, all_fixture_runs, make_stage

# --------------------------------------------------------------------------- explain


def _reference_explain(
    actual: Sequence[ToolCall],
    expected: Sequence[ExpectedCall],
    args_matcher: Callable[[ToolCall, ExpectedCall], bool] | None = None,
    *,
    exact_args: bool = False,
    order_failed: bool = False,
) -> Explanation:
    """SCORING.md §2.0 as written, step by step (the implementation before the fast paths)."""

    def matches(a: ToolCall, e: ExpectedCall) -> bool:
        if a.name != e.name:
            return False
        if args_matcher is None or e.args is ABSENT:
            return True
        return args_matcher(a, e)

    def expected_json(call: ExpectedCall) -> dict[str, Any]:
        out: dict[str, Any] = {"name": call.name}
        if call.args is not ABSENT:
            out["args"] = json_safe(call.args)
        return out

    def diff(call: ToolCall, e: ExpectedCall) -> list[Issue]:
        exp_args, act_args = e.args, call.args
        if exp_args is ABSENT or act_args is ABSENT:
            return []
        if not isinstance(exp_args, dict) or not isinstance(act_args, dict):
            if exp_args == act_args:
                return []
            kind = FailureKind.MALFORMED_ARGUMENTS if isinstance(act_args, Malformed) else FailureKind.WRONG_VALUE
            return [call_issue(kind, call, expected=json_safe(exp_args), actual=json_safe(act_args))]
        issues: list[Issue] = []
        for key, value in exp_args.items():
            if key not in act_args:
                issues.append(call_issue(FailureKind.MISSING_PARAMETER, call, parameter=pointer(key), expected=value))
            elif act_args[key] != value:
                issues.append(
                    call_issue(
                        FailureKind.WRONG_VALUE, call, parameter=pointer(key), expected=value, actual=act_args[key]
                    )
                )
        if exact_args:
            for key, value in act_args.items():
                if key not in exp_args:
                    issues.append(call_issue(FailureKind.UNKNOWN_PARAMETER, call, parameter=pointer(key), actual=value))
        if not issues:
            issues.append(
                call_issue(FailureKind.WRONG_VALUE, call, expected=json_safe(exp_args), actual=json_safe(act_args))
            )
        return issues

    def wrong_order(matching: dict[int, int]) -> Issue:
        pairs = sorted(matching.items())
        target: tuple[int, int] | None = None
        prev = -1
        for i, j in pairs:
            if j < prev:
                target = (i, j)
                break
            prev = j
        if target is None:
            target = next(((i, j) for i, j in pairs if i != j), pairs[0] if pairs else None)
        if target is None:
            return Issue(FailureKind.WRONG_ORDER, severity=Severity.ERROR)
        i, j = target
        return call_issue(
            FailureKind.WRONG_ORDER,
            actual[j],
            tool=expected[i].name,
            expected=i,
            actual=j,
            detail={"expected_position": i, "actual_position": j},
        )

    adjacency = [[j for j in range(len(actual)) if matches(actual[j], e)] for e in expected]
    greedy: dict[int, int] = {}
    used: set[int] = set()
    for i, cands in enumerate(adjacency):
        for j in cands:
            if j not in used:
                greedy[i] = j
                used.add(j)
                break
    matching = hopcroft_karp(adjacency, len(actual), greedy)
    issues: list[Issue] = []
    free_exp = [i for i in range(len(expected)) if i not in matching]
    matched_act = set(matching.values())
    free_act = [j for j in range(len(actual)) if j not in matched_act]
    for i in list(free_exp):
        for j in free_act:
            if actual[j].name == expected[i].name:
                issues.extend(diff(actual[j], expected[i]))
                free_exp.remove(i)
                free_act.remove(j)
                break
    for i, j in zip(list(free_exp), list(free_act), strict=False):
        call = actual[j]
        issues.append(
            call_issue(
                FailureKind.WRONG_TOOL,
                call,
                expected=expected_json(expected[i]),
                actual=json_safe(call.args),
                detail={"expected_tool": expected[i].name},
            )
        )
    k = min(len(free_exp), len(free_act))
    for i in free_exp[k:]:
        issues.append(Issue(FailureKind.MISSING_TOOL, tool=expected[i].name, expected=expected_json(expected[i])))
    for j in free_act[k:]:
        call = actual[j]
        issues.append(call_issue(FailureKind.UNNECESSARY_TOOL, call, actual=json_safe(call.args)))
    if order_failed and not issues:
        issues.append(wrong_order(matching))
    return Explanation(tuple(issues), matching)


NAMES = st.sampled_from(["a", "b", "c"])
SMALL = st.one_of(st.none(), st.booleans(), st.integers(0, 2), st.sampled_from([1.0, "1", "x"]))
ARGS = st.one_of(
    st.dictionaries(st.sampled_from(["x", "y", "z"]), SMALL, max_size=3),
    st.just(ABSENT),
    st.builds(Malformed, st.sampled_from(["{", "x"])),
    st.lists(SMALL, max_size=2),
)
REF_ARGS = st.one_of(st.dictionaries(st.sampled_from(["x", "y", "z"]), SMALL, max_size=3), st.just(ABSENT), SMALL)


def _exact(a: ToolCall, e: ExpectedCall) -> bool:
    return bool(a.args == e.args)


def _subset(a: ToolCall, e: ExpectedCall) -> bool:
    if not isinstance(a.args, dict) or not isinstance(e.args, dict):
        return bool(a.args == e.args)
    return all(k in a.args and a.args[k] == v for k, v in e.args.items())


MATCHERS: list[Callable[[ToolCall, ExpectedCall], bool] | None] = [None, _exact, _subset]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.tuples(NAMES, ARGS), max_size=6),
    st.lists(st.tuples(NAMES, REF_ARGS), max_size=6),
    st.sampled_from(range(len(MATCHERS))),
    st.booleans(),
    st.booleans(),
)
def test_explain_equals_the_reference_procedure(
    actual: list[tuple[str, Any]], ref: list[tuple[str, Any]], m: int, exact_args: bool, order_failed: bool
) -> None:
    calls = run_with_calls(actual).calls
    exp = tuple(ExpectedCall(n, args=a) for n, a in ref)
    got = explain(calls, exp, MATCHERS[m], exact_args=exact_args, order_failed=order_failed)
    want = _reference_explain(calls, exp, MATCHERS[m], exact_args=exact_args, order_failed=order_failed)
    assert got.issues == want.issues
    assert got.matching == want.matching


def test_explain_runs_hopcroft_karp_when_greedy_is_not_maximum() -> None:
    # expected 0 (no args) takes actual 0 greedily; expected 1 only matches actual 0: an augmenting path
    calls = run_with_calls([("a", {"x": 1}), ("a", {"x": 2})]).calls
    exp = (ExpectedCall("a"), ExpectedCall("a", args={"x": 1}))
    got = explain(calls, exp, _exact)
    assert got.matching == {0: 1, 1: 0} and got.issues == ()


# --------------------------------------------------------------------------- ROUGE


def _is_cjk(c: str) -> bool:
    o = ord(c)
    return 0x4E00 <= o <= 0x9FFF or 0x3040 <= o <= 0x30FF or 0xAC00 <= o <= 0xD7AF


def _is_non_spaced(c: str) -> bool:
    o = ord(c)
    return 0x0E00 <= o <= 0x0E7F or 0x0E80 <= o <= 0x0EFF or 0x1780 <= o <= 0x17FF or 0x1000 <= o <= 0x109F


class _AdkCharLoop(tokenizers.Tokenizer):  # type: ignore[misc]
    """ADK 2.13.0 ``_UnicodeAwareTokenizer(use_stemmer=True)``, transcribed (the character loop)."""

    def __init__(self) -> None:
        self._default = tokenizers.DefaultTokenizer(use_stemmer=True)

    def tokenize(self, text: str) -> list[str]:
        out: list[str] = []
        for char in unicodedata.normalize("NFKC", text).lower():
            if _is_cjk(char):
                out.extend([" ", char, " "])
            elif _is_non_spaced(char):
                if unicodedata.category(char).startswith("M"):
                    out.append(char)
                else:
                    out.extend([" ", char])
            elif char.isalnum() or unicodedata.category(char).startswith("M"):
                out.append(char)
            else:
                out.append(" ")
        words = "".join(out).split()
        toks: list[str] = []
        for word in words:
            if word.isascii():
                toks.extend(self._default.tokenize(word))
            else:
                toks.append(word)
        return toks


PEER_SCORERS = {
    "adk": rouge_scorer.RougeScorer(["rouge1"], tokenizer=_AdkCharLoop()),
    "rouge_score": rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True),
}
WORDS = st.sampled_from(
    [
        "running",
        "Runs",
        "RUNNER",
        "the",
        "generously",
        "device_2",
        "Zürich",
        "Straße",
        "ＡＢＣ",
        "ﬁne",
        "x²",
        "½",
        "東京",
        "สวัสดีครับ",
        "ราคา100บาท",
        "ทำ",
        "ລາວ",
        "ខ្មែរ",
        "မြန်မာ",
        "e\u0301",
        "İstanbul",
        "ΣΟΦΟΣ",
        "21°C",
        "e.g.",
        "\u00a0",
    ]
)
TEXT = st.one_of(
    st.lists(WORDS, max_size=8).map(" ".join),
    st.text(max_size=16),
    st.text(alphabet=st.characters(codec="ascii"), max_size=24),
)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXT, TEXT, st.sampled_from(["adk", "rouge_score"]))
def test_rouge1_equals_rouge_score(reference: str, candidate: str, tokenizer: Any) -> None:
    peer = PEER_SCORERS[tokenizer].score(reference, candidate)["rouge1"]
    assert rouge1(reference, candidate, tokenizer) == (peer.precision, peer.recall, peer.fmeasure)
    assert tokens(candidate, tokenizer) == PEER_SCORERS[tokenizer]._tokenizer.tokenize(candidate)


# --------------------------------------------------------------------------- repetition keys


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(NAMES, ARGS), max_size=8))
def test_repetition_keys_have_the_equalities_of_call_key(specs: list[tuple[str, Any]]) -> None:
    calls = run_with_calls(specs).calls
    fast, full = _keys(calls), [call_key(c) for c in calls]
    assert [k[1] is None for k in fast] == [k[1] is None for k in full]
    assert [k[0] for k in fast] == [k[0] for k in full]
    for i in range(len(calls)):
        for j in range(len(calls)):
            assert (fast[i] == fast[j]) == (full[i] == full[j])


# --------------------------------------------------------------------------- frozen_init


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    a: int
    b: str = "x"
    c: list[int] = dataclasses.field(default_factory=list)


@frozen_init
@dataclasses.dataclass(frozen=True, slots=True)
class _Fast:
    a: int
    b: str = "x"
    c: list[int] = dataclasses.field(default_factory=list)


def test_frozen_init_keeps_the_dataclass_contract() -> None:
    plain, fast = inspect.signature(_Plain.__init__), inspect.signature(_Fast.__init__)
    assert list(plain.parameters) == list(fast.parameters)
    assert [p.default for p in plain.parameters.values()][:3] == [p.default for p in fast.parameters.values()][:3]
    one, two = _Fast(1), _Fast(1, "y")
    assert (one.a, one.b, one.c, two.b) == (1, "x", [], "y")
    assert one.c is not _Fast(1).c  # a fresh default per instance
    assert _Fast(a=2, c=[3]) == _Fast(2, "x", [3]) and repr(_Fast(2)) == "_Fast(a=2, b='x', c=[])"
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 3  # type: ignore[misc]
    assert dataclasses.replace(one, b="z") == _Fast(1, "z")
    with pytest.raises(TypeError):
        _Fast()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="not one of"):
        NotScored("error", "no_such_reason")  # __post_init__ still runs
    with pytest.raises(TypeError, match="slotted dataclass"):
        frozen_init(int)


def test_results_and_issues_keep_their_constructor_signature() -> None:
    names = [f.name for f in dataclasses.fields(ScoreResult)]
    assert list(inspect.signature(ScoreResult.__init__).parameters)[1:] == names
    assert list(inspect.signature(Issue.__init__).parameters)[1:] == [f.name for f in dataclasses.fields(Issue)]
    assert ScoreResult("s", "k", 1, "scored").details == {}


# --------------------------------------------------------------------------- results built once


def _by_keywords(result: ScoreResult) -> ScoreResult:
    return ScoreResult(**{f.name: getattr(result, f.name) for f in dataclasses.fields(ScoreResult)})


def test_a_result_is_built_with_every_field_at_once() -> None:
    run = run_with_steps([[("a", {"x": 1})]], trace_id="f" * 32, run_id="e" * 16)
    scorer = AdkToolTrajectory()
    ok = scorer.score(run, Expectation(expected_calls=(ExpectedCall("a", args={"x": 1}),)), scored_at="T")
    bad = scorer.score(run, Expectation(expected_calls=(ExpectedCall("b"),)), scored_at="T")
    na = scorer.score(run, None, scored_at="T")
    for r in (ok, bad, na):
        assert r == _by_keywords(r)
        assert (r.trace_id, r.run_id, r.agent, r.conversation_id, r.scored_at) == (
            "f" * 32,
            "e" * 16,
            "agent",
            None,
            "T",
        )
        assert (r.scorer, r.scorer_kind, r.scorer_version) == ("adk_tool_trajectory", "adk_tool_trajectory", 1)
        assert r.params is scorer.params_json and r.params_hash == scorer.params_hash
    assert (ok.status, ok.score, ok.passed, ok.issues) == ("scored", 1.0, True, ())
    assert (bad.score, bad.passed, [i.kind for i in bad.issues]) == (0.0, False, [FailureKind.WRONG_TOOL])
    assert (na.status, na.reason, na.score, na.threshold) == ("not_applicable", "no_reference", None, 1.0)
    assert scorer.scored(None, 0.5, scored_at="U").scored_at == "U"
    with pytest.raises(ValueError, match="not one of"):
        scorer.error(run, "no_such_reason")


def test_turn_issues_are_rebuilt_with_their_turn() -> None:
    scorer = AdkToolTrajectory()
    run = run_with_calls(["a"])
    out = scorer.mean_over_turns(
        [
            Outcome(1.0),
            Outcome(0.0, issues=(Issue(FailureKind.MISSING_TOOL, tool="b", detail={"k": 1}),)),
            NotScored.na("no_reference"),
        ]
    )
    assert isinstance(out, Outcome) and out.score == 0.5
    assert out.issues == (Issue(FailureKind.MISSING_TOOL, tool="b", detail={"k": 1}, turn=1),)
    assert out.details == {"turn_scores": [1.0, 0.0, None], "turn_details": [{}, {}, {}]}
    assert scorer.mean_over_turns([Outcome(1.0), NotScored.err("internal")]) == NotScored.err("internal")
    assert scorer.score_turns([(run, None), (run, None)]).reason == "no_reference"


class _OwnEntryPoint(ToolErrorCheck):
    """A scorer subclass with its own ``score`` (the signature before ``scored_at``)."""

    def score(self, run: Run, reference: Expectation | None) -> ScoreResult:  # type: ignore[override]
        return super().score(run, reference)


def test_the_stage_stamps_only_results_it_did_not_build(monkeypatch: pytest.MonkeyPatch) -> None:
    stamped: list[str] = []
    real = stage_module.stamp

    def spy(run: Run, result: ScoreResult, scored_at: str) -> ScoreResult:
        stamped.append(result.scorer)
        return real(run, result, scored_at)

    monkeypatch.setattr(stage_module, "stamp", spy)
    rules = "rules: [{scorers: {tool_eval: {}, judge_tool_selection: {}}}]"
    runs = all_fixture_runs()[:6]
    for run in runs:
        for r in make_stage(rules).score(run):
            assert r.scored_at == NOW.isoformat()
            assert any(r.run_id == x.run_id and r.trace_id == x.trace_id and r.agent == x.agent for x in run.walk())
    assert stamped == []  # checks, rule scorers and judges_disabled placeholders: built final
    settings = Settings.model_validate({})
    registry = {**ScoringStage(settings, None, Sampler(settings.sampling), lambda: NOW).registry}
    registry["tool_error_check"] = _OwnEntryPoint
    stage = make_stage(registry=registry)
    results = stage.score(runs[0])
    assert stamped == ["tool_error_check"] * len(list(runs[0].walk()))
    (own,) = [r for r in results if r.scorer == "tool_error_check" and r.run_id == runs[0].run_id]
    assert own.scored_at == NOW.isoformat() and own.trace_id == runs[0].trace_id


def test_stage_results_equal_stamped_copies() -> None:
    """Building results final changes no field: each equals its stamp() (the former second construction)."""
    ruleset = RuleSet.from_mapping({"rules": [{"scorers": {"tool_eval": {}}, "expect": {"expected_calls": []}}]})
    s = Settings.model_validate({"sampling": {"rate": 1.0}})
    stage = ScoringStage(s, ruleset, Sampler(s.sampling), lambda: datetime(2026, 1, 1, tzinfo=UTC))
    for run in all_fixture_runs():
        by_run = {x.run_id: x for x in run.walk()}
        for r in stage.score(run):
            assert r.run_id is not None and r.scored_at is not None
            assert r == stage_module.stamp(by_run[r.run_id], r, r.scored_at)


# --------------------------------------------------------------------------- compiled validators


def _schema_run(schema: dict[str, Any]) -> Run:
    base = run_with_calls([("get_weather", {"city": "Paris"})])
    return dataclasses.replace(base, tools_offered=(ToolDef("get_weather", None, schema),))


def test_validators_are_compiled_once_per_schema_content() -> None:
    """The daemon decodes each run's definitions anew: equal schemas are different objects, one compilation."""
    validator_cache_clear()

    def schema() -> dict[str, Any]:  # a fresh object each time, as decoded from each run's spans
        return {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    check = SchemaCheck()
    for _ in range(20):
        assert check.score(_schema_run(schema()), None).score == 1.0
    info = validator_cache_info()
    assert (info.misses, info.hits, info.currsize) == (1, 19, 1)
    assert info.maxsize == VALIDATOR_CACHE_SIZE  # bounded LRU
    assert compile_schema(dict(reversed(list(schema().items())))) is compile_schema(schema())


def test_an_invalid_schema_is_reported_the_same_in_every_process() -> None:
    """The meta-schema's errors come in an order that varies with string hashing; the note does not."""
    code = (
        "from monitor.scoring.checks.schema_check import compile_schema\n"
        "s = {'type': 'object', 'properties': {k: {'type': 'STRING'} for k in 'zyxwvutsrq'}}\n"
        "print(compile_schema(s).problem)"
    )
    root = Path(__file__).resolve().parents[2]
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(4)
    }
    assert len(seen) == 1 and "'/properties/q/type'" in seen.pop()
