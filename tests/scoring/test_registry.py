"""The one scorer registry (monitor/scoring/catalogue.py): every kind SCORING.md names is registered,
every registered kind can be built (or, for a judge not implemented yet, validated) with its default
parameters, unknown kinds and parameters are errors with a did-you-mean, and every consumer reads the
same registry (checks, reference scorers, settings defaults, the stage, ScorerSpec)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor import rules as rules_pkg
from monitor.rules import datasets as datasets_pkg
from monitor.sampling import Sampler
from monitor.scoring import catalogue
from monitor.scoring.base import Scorer, ScorerConfigError
from monitor.scoring.checks import CHECKS
from monitor.scoring.checks import call_error as checks_call_error
from monitor.scoring.expectation import Expectation
from monitor.scoring.reference import REFERENCE_SCORERS
from monitor.scoring.spec import ScorerSpec
from monitor.scoring.stage import ScoringStage
from monitor.settings import Settings
from monitor.trajectory.errors import MCP_TOOL_ERROR, call_error
from monitor.trajectory.model import Run
from tests.scoring.checks.builders import c, make_run

# The kinds SCORING.md defines: §2 (reference-based), §3 (checks), §4 (judges); the §7 table.
SCORING_MD_KINDS = {
    "code": [
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
        "schema_check",
        "unknown_tool_check",
        "tool_error_check",
        "repetition_check",
        "call_budget_check",
        "latency_check",
        "no_tool_needed_check",
        "forbidden_tool_check",
    ],
    "judge": [
        "judge_tool_selection",
        "judge_argument_correctness",
        "judge_goal_accuracy",
        "judge_topic_adherence",
        "judge_trajectory_quality",
    ],
}

NEEDS_PARAMETERS: dict[str, dict[str, Any]] = {
    # Mastra's code scorer has no default: it needs the tool (or order) it checks (SCORING.md §2.7)
    "mastra_tool_call_accuracy": {"expected_tool": "get_weather"},
}

_REPO = Path(__file__).resolve().parents[2]
_SPEC_CANDIDATES = (_REPO / "SCORING.md", _REPO / "docs" / "SCORING.md", _REPO.parent / "shared" / "SCORING.md")


def _kinds_in_scoring_md(text: str) -> set[str]:
    """Backticked scorer names in the section titles of §2–§4 and in the first column of §7."""
    found: set[str] = set()
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line.split()[1]
        if re.match(r"###\s+[234]\.\d+\s", line):
            found.update(re.findall(r"`([a-z][a-z0-9_]*)`", line.split("—")[0]))
        elif section == "7." and line.startswith("| `"):
            cell = re.sub(r"\(.*?\)", "", line.split("|")[1])  # `tool_eval` (`literal` / `clipped`)
            found.update(re.findall(r"`([a-z][a-z0-9_]*)`", cell))
    return found


def test_every_kind_scoring_md_names_is_registered_with_its_class() -> None:
    registry = catalogue.catalogue()
    for kind_class, names in SCORING_MD_KINDS.items():
        for kind in names:
            assert kind in registry, kind
            assert registry[kind].kind_class == kind_class, kind
    spec = next((p for p in _SPEC_CANDIDATES if p.is_file()), None)
    if spec is not None:  # the spec itself, when it is checked out beside the repository
        named = _kinds_in_scoring_md(spec.read_text(encoding="utf-8"))
        assert named >= {"tool_eval", "schema_check", "judge_tool_selection"}, named
        assert named <= set(registry), sorted(named - set(registry))


def test_the_registry_holds_nothing_but_scoring_md_kinds() -> None:
    assert set(catalogue.kinds()) == {k for names in SCORING_MD_KINDS.values() for k in names}
    assert catalogue.judge_kinds() == sorted(SCORING_MD_KINDS["judge"])
    assert set(catalogue.code_kinds()) == set(SCORING_MD_KINDS["code"])


@pytest.mark.parametrize("kind", catalogue.kinds())
def test_every_registered_scorer_builds_with_its_default_parameters(kind: str) -> None:
    info = catalogue.lookup(kind)
    assert info.kind == kind and info.summary and info.section.startswith("§")
    assert info.kind_class == ("judge" if kind.startswith(catalogue.JUDGE_KIND_PREFIX) else "code")
    assert info.to_json()["kind"] == kind and isinstance(info.params_schema, dict)
    if info.implemented and kind in NEEDS_PARAMETERS:
        assert not info.builds_with_defaults and info.defaults_problem
        with pytest.raises(ScorerConfigError):
            catalogue.build(kind)
        assert catalogue.build(kind, NEEDS_PARAMETERS[kind]).kind == kind
    elif info.implemented:
        assert info.builds_with_defaults
        scorer = catalogue.build(kind)
        assert isinstance(scorer, Scorer) and scorer.kind == kind and scorer.id == kind
        assert scorer.params_json == info.defaults
        assert set(info.parameters) == set(info.defaults)
        assert not info.params_open
    else:  # a §4 judge registered before its implementation
        assert info.kind_class == "judge" and info.version == 0 and info.params_open
        assert catalogue.validate_params(kind, {}).threshold is None
        with pytest.raises(ScorerConfigError, match="not implemented"):
            catalogue.build(kind)


def test_peers_follow_scoring_md_section_7() -> None:
    registry = catalogue.catalogue()
    assert registry["adk_tool_trajectory"].peer.startswith("google-adk")
    assert registry["ragas_tool_call_f1"].peer.startswith("ragas")
    assert registry["judge_argument_correctness"].peer.startswith("deepeval")
    for kind, info in registry.items():
        ours = info.section.startswith("§3")
        assert (info.peer == "ours") is ours, (kind, info.peer)


def test_an_unknown_kind_is_a_config_error_with_the_close_matches() -> None:
    with pytest.raises(catalogue.UnknownScorerKind) as err:
        catalogue.lookup("shema_check")
    assert isinstance(err.value, ScorerConfigError)
    assert err.value.suggestions[0] == "schema_check"
    assert "did you mean 'schema_check'?" in str(err.value)
    assert catalogue.suggest("judge_goal_acuracy") == ["judge_goal_accuracy"]
    with pytest.raises(catalogue.UnknownScorerKind, match="use a kind that `monitor scorers` lists"):
        catalogue.lookup("completely_different")
    # a judge-like name is not registered just because of its prefix
    with pytest.raises(catalogue.UnknownScorerKind, match="did you mean 'judge_tool_selection'"):
        catalogue.lookup("judge_tool_selectoin")


def test_parameters_are_checked_against_the_kind() -> None:
    with pytest.raises(ScorerConfigError, match=r"unknown parameter 'thresold'.*did you mean 'threshold'"):
        catalogue.validate_params("schema_check", {"thresold": 0.5})
    with pytest.raises(ScorerConfigError, match="parameter 'variant'"):
        catalogue.validate_params("tool_eval", {"variant": "nope"})
    # a judge not implemented yet: threshold is a fraction, other parameters pass until it declares them
    assert catalogue.validate_params("judge_goal_accuracy", {"threshold": 1.0, "model": "m"}).threshold == 1.0
    with pytest.raises(ScorerConfigError, match="parameter 'threshold'"):
        catalogue.validate_params("judge_goal_accuracy", {"threshold": 2})


def test_kind_of_a_configured_id() -> None:
    assert catalogue.kind_of("tool_eval:literal") == "tool_eval"
    assert catalogue.kind_of("mine", "schema_check") == "schema_check"


# --------------------------------------------------------------------------- one registry, every reader


def test_checks_reference_scorers_and_settings_defaults_are_registered() -> None:
    classes = catalogue.scorer_classes()
    assert all(classes[kind] is cls for kind, cls in CHECKS.items())
    assert all(classes[cls.kind] is cls for cls in REFERENCE_SCORERS)
    assert set(classes) == set(catalogue.code_kinds())  # judges are not implemented yet
    for kind in Settings().scoring.checks:
        assert catalogue.lookup(kind).kind_class == "code"


def test_the_stage_builds_from_the_registry() -> None:
    settings = Settings()
    stage = ScoringStage(settings, None, Sampler(settings.sampling), lambda: datetime(2026, 1, 1, tzinfo=UTC))
    assert stage.registry == catalogue.scorer_classes()


def test_one_scorer_spec_for_rules_datasets_and_the_stage() -> None:
    assert rules_pkg.ScorerSpec is ScorerSpec and datasets_pkg.ScorerSpec is ScorerSpec
    assert ScorerSpec("strict", "schema_check", {"undeclared_parameters": "error"}).build().id == "strict"
    assert ScorerSpec("j", "judge_goal_accuracy").is_judge


def test_call_error_is_a_fact_of_the_trajectory() -> None:
    assert checks_call_error is call_error
    run = make_run([c("t", {}, result={"isError": True, "content": [{"type": "text", "text": "boom"}]})])
    error = call_error(run.calls[0])
    assert error is not None and (error.type, error.message) == (MCP_TOOL_ERROR, "boom")


# --------------------------------------------------------------------------- the stage's protocols


class _Decision:
    sampled = True


class _EverySampler:
    """A sampling policy that is not monitor.sampling.Sampler: the stage needs only the protocol."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def should_score(self, run: Run, /) -> _Decision:
        return _Decision()

    def scorer_enabled(self, scorer_id: str, run: Run, flagged: bool, /) -> bool:
        self.asked.append(scorer_id)
        return True


class _OneRule:
    """A rule source that is not monitor.rules.RuleSet."""

    def expectation_for(self, run: Run, /) -> Expectation:
        return Expectation(forbidden_tools=("delete_*",))

    def scorers_for(self, run: Run, /) -> tuple[ScorerSpec, ...]:
        return (ScorerSpec("forbidden_tool_check", "forbidden_tool_check", {}),)

    def matching_rules(self, run: Run, /) -> tuple[Any, ...]:
        return ()


def test_the_stage_takes_any_rule_source_and_sampling_policy() -> None:
    settings = Settings.model_validate({"scoring": {"checks": ["tool_error_check"]}})
    sampler = _EverySampler()
    stage = ScoringStage(settings, _OneRule(), sampler, lambda: datetime(2026, 1, 1, tzinfo=UTC))
    results = stage.score(make_run([c("delete_user", {"id": 1})]))
    assert [(r.scorer, r.passed) for r in results] == [("tool_error_check", True), ("forbidden_tool_check", False)]
    assert sampler.asked == ["tool_error_check", "forbidden_tool_check"]
