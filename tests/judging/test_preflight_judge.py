"""The ``judge`` checks of the preflight (monitor/preflight.py): judge kinds named in ``judge.models`` and
``judge.budgets.per_judge``, prices for the models a dollar budget covers, the API key when judges are
enabled, and the key never quoted in a problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monitor.preflight import check_configuration, with_configuration_checks
from monitor.settings import SettingsError, load_settings

KEY = "sk-ant-api03-Zq9Preflight-Secret-0042"


def judge_problems(**judge: Any) -> list[str]:
    settings = load_settings(judge=judge, http={"host": "127.0.0.1", "port": 0})
    return [p for p in check_configuration(settings) if p.startswith(("judge.", "MONITOR_JUDGE"))]


@pytest.fixture(autouse=True)
def no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def test_the_defaults_pass() -> None:
    assert judge_problems() == []


def test_per_kind_keys_must_be_judge_kinds_with_a_did_you_mean() -> None:
    problems = judge_problems(
        models={"judge_goal_acuracy": "claude-haiku-4-5", "judge_tool_selection": "claude-haiku-4-5"},
        budgets={"per_judge": {"schema_check": {"usd_per_day": 1}, "judge_topic_adherence": {"usd_per_day": 1}}},
    )
    assert len(problems) == 2, problems
    assert problems[0].startswith(
        "judge.models.judge_goal_acuracy = 'claude-haiku-4-5': 'judge_goal_acuracy' is not a judge kind, so this "
        "would never apply. Fix: did you mean `judge_goal_accuracy`? use a judge kind that `monitor scorers` lists"
    )
    assert problems[1].startswith("judge.budgets.per_judge.schema_check = {…}: 'schema_check' is not a judge kind")


def test_a_dollar_budget_needs_a_price_for_every_model_it_covers() -> None:
    per_kind = judge_problems(
        models={"judge_goal_accuracy": "claude-private-1"},
        budgets={"per_judge": {"judge_goal_accuracy": {"usd_per_day": 2}}},
    )
    assert per_kind == [
        "judge.models.judge_goal_accuracy = 'claude-private-1': this model has no price in judge.prices, so a "
        "usd_per_day budget would refuse every call to it. Fix: add judge.prices.claude-private-1: "
        "{input_per_mtok: …, output_per_mtok: …} (and set judge.prices_version), or choose a model judge.prices lists"
    ]
    assert judge_problems(model="claude-private-1") == []  # no dollar budget: unpriced costs are null, counted
    total = judge_problems(model="claude-private-1", budgets={"total": {"usd_per_day": 2}})
    assert len(total) == 1 and total[0].startswith("judge.model = 'claude-private-1': this model has no price")
    priced = judge_problems(
        model="claude-private-1",
        budgets={"total": {"usd_per_day": 2}},
        prices={"claude-private-1": {"input_per_mtok": 1, "output_per_mtok": 2}},
        prices_version="ours-1",
    )
    assert priced == []
    dated = judge_problems(model="claude-haiku-4-5-20251001", budgets={"total": {"usd_per_day": 2}})
    assert dated == []  # priced as its alias


def test_enabled_judges_need_a_readable_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert judge_problems(enabled=False) == []
    missing = judge_problems(enabled=True)
    assert missing == [
        "judge.api_key_env = 'ANTHROPIC_API_KEY': judge.enabled is true but the environment variable "
        "ANTHROPIC_API_KEY is unset or empty. Fix: give the daemon ANTHROPIC_API_KEY from a secret store, or set "
        "judge.api_key_file to a file holding the key (a mounted Kubernetes Secret), or set judge.enabled: false"
    ]
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert judge_problems(enabled=True) == []
    monkeypatch.setenv("JUDGE_KEY", "  ")
    assert "JUDGE_KEY is unset or empty" in judge_problems(enabled=True, api_key_env="JUDGE_KEY")[0]

    key_file = tmp_path / "anthropic" / "api-key"
    gone = judge_problems(enabled=True, api_key_file=str(key_file))  # the file wins over the variable
    assert gone == [
        f"judge.api_key_file = '{key_file}': the file does not exist. Fix: mount the API key Secret at "
        "that path, or correct judge.api_key_file"
    ]
    key_file.parent.mkdir()
    key_file.write_text("\n")
    assert "the file is empty" in judge_problems(enabled=True, api_key_file=str(key_file))[0]
    assert "is a directory" in judge_problems(enabled=True, api_key_file=str(key_file.parent))[0]
    key_file.write_text(KEY + "\n")
    assert judge_problems(enabled=True, api_key_file=str(key_file)) == []
    key_file.chmod(0)
    try:
        unreadable = judge_problems(enabled=True, api_key_file=str(key_file))
        if not key_file.stat().st_mode & 0o444 and unreadable:  # root reads anything
            assert "cannot be read by this user" in unreadable[0]
    finally:
        key_file.chmod(0o600)
    for problem in missing + gone:
        assert KEY not in problem


def test_api_key_reads_the_file_before_the_variable_and_hides_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-1")
    judge = load_settings().judge
    key = judge.api_key()
    assert key is not None and key.get_secret_value() == "sk-ant-from-env-1"
    assert "sk-ant" not in repr(key) + str(key) + repr(judge) + str(judge)
    key_file = tmp_path / "key"
    key_file.write_text(" sk-ant-from-file-2 \n")
    from_file = load_settings(judge={"api_key_file": str(key_file)}).judge.api_key()
    assert from_file is not None and from_file.get_secret_value() == "sk-ant-from-file-2"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert load_settings().judge.api_key() is None


def test_judge_checks_still_run_when_other_keys_were_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_SAMPLING__RATE", "2")
    monkeypatch.setenv("MONITOR_JUDGE__MODELS", '{"judge_goal_acuracy": "claude-haiku-4-5"}')
    with pytest.raises(SettingsError) as info:
        load_settings()
    problems = with_configuration_checks(info.value).problems
    assert [p.split(" = ", 1)[0] for p in problems] == [
        "MONITOR_SAMPLING__RATE",
        "MONITOR_JUDGE__MODELS (judge.models.judge_goal_acuracy)",
    ]
