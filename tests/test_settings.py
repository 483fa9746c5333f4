"""Settings: one catalogue, YAML file + MONITOR_* env, errors that name key, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from monitor.settings import (
    DEFAULT_JUDGE_PRICES,
    JUDGE_PRICES_VERSION,
    JudgeBudgetLimits,
    JudgeBudgets,
    JudgeSettings,
    ModelPrice,
    SettingsError,
    is_secret_name,
    load_settings,
    mask_secrets,
    mask_url,
)


def test_defaults_load_without_a_file() -> None:
    settings = load_settings()
    assert settings.kafka.spans_topic == "otlp_spans" and settings.assembler.root_idle_s == 5.0


def test_yaml_file_and_env_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text("kafka:\n  spans_topic: spans-a\n  group_id: g1\nassembler:\n  idle_s: 12\n")
    monkeypatch.setenv("MONITOR_KAFKA__GROUP_ID", "from-env")
    settings = load_settings(cfg)
    assert settings.kafka.spans_topic == "spans-a"
    assert settings.kafka.group_id == "from-env"
    assert settings.assembler.idle_s == 12


def test_bad_values_name_the_key_the_value_and_the_fix(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("assembler:\n  root_idle_s: -1\nkafka:\n  spans_topc: x\n  encoding: avro\n")
    with pytest.raises(SettingsError) as info:
        load_settings(cfg)
    text = str(info.value)
    assert "assembler.root_idle_s = -1" in text and "MONITOR_ASSEMBLER__ROOT_IDLE_S" in text
    assert "kafka.spans_topc" in text and "did you mean `spans_topic`" in text
    assert "kafka.encoding = 'avro'" in text and "otlp_proto" in text
    assert len(info.value.problems) == 3


def test_cross_field_rule_heartbeat_below_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_KAFKA__HEARTBEAT_INTERVAL_MS", "20000")
    with pytest.raises(SettingsError, match="heartbeat_interval_ms must be lower"):
        load_settings()


def test_missing_or_non_mapping_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.yaml")
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(SettingsError, match="mapping"):
        load_settings(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("kafka: [unclosed\n")
    with pytest.raises(SettingsError, match="not valid YAML"):
        load_settings(broken)


def test_config_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--defaults"]) == 0
    assert "spans_topic: otlp_spans" in capsys.readouterr().out
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("log_level: LOUD\n")
    assert main(["config", "--config", str(cfg)]) == 2
    assert "log_level = 'LOUD'" in capsys.readouterr().err


def test_a_value_from_an_environment_variable_is_named_by_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text("sampling:\n  rate: 0.5\n  per_agent:\n    planner: 2\n")
    monkeypatch.setenv("MONITOR_SAMPLING__RATE", "2")
    monkeypatch.setenv("MONITOR_STORE", '{"url": "sqlite:///x.db", "retention_days": -1}')
    with pytest.raises(SettingsError) as info:
        load_settings(cfg)
    problems = info.value.problems
    assert len(problems) == 3, problems
    by_name = {p.split(" = ", 1)[0]: p for p in problems}
    assert set(by_name) == {
        "MONITOR_SAMPLING__RATE",  # the environment wins over the file's 0.5: the variable is named
        "MONITOR_STORE (store.retention_days)",  # a section given as JSON: the variable and the key
        "sampling.per_agent.planner",  # from the file: the file key
    }
    assert "Fix: set MONITOR_SAMPLING__RATE to" in by_name["MONITOR_SAMPLING__RATE"]
    assert "file key" not in by_name["MONITOR_SAMPLING__RATE"]
    assert "less than or equal to 1" in by_name["sampling.per_agent.planner"]
    assert "+ MONITOR_* environment" in str(info.value).splitlines()[0]


def test_per_agent_and_per_scorer_rates_are_fractions() -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(sampling={"per_agent": {"planner": 2}, "per_scorer": {"schema_check": -0.1, "ok": 0.3}})
    assert sorted(p.split(" = ")[0] for p in info.value.problems) == [
        "sampling.per_agent.planner",
        "sampling.per_scorer.schema_check",
    ]


def test_bootstrap_servers_must_be_host_port_pairs() -> None:
    with pytest.raises(SettingsError, match="not a number from 1 to 65535"):
        load_settings(kafka={"bootstrap_servers": "broker-1:9092,broker-2:90920"})
    assert load_settings(kafka={"bootstrap_servers": "a:9092, b,[::1]:9093"}).kafka.bootstrap_servers


def test_a_secret_in_a_bad_value_is_masked_in_the_error() -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(kafka={"encoding": "postgresql://bob:hunter2@db:5432/x?sslpassword=s3cr3t&sslmode=require"})
    text = str(info.value)
    assert "hunter2" not in text and "s3cr3t" not in text
    assert "postgresql://bob:***@db:5432/x" in text and "sslmode=require" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql+psycopg://bob:p%40ss@db/x", "postgresql+psycopg://bob:***@db/x"),
        ("store postgresql://u:pw@h/db?sslmode=require&sslpassword=z9 opened", "sslpassword=***"),
        ("https://api.example.com/v1?api_key=abc123&page=2", "https://api.example.com/v1?api_key=***&page=2"),
        ("host=db user=bob password=hunter2 dbname=x", "host=db user=bob password=*** dbname=x"),
        (
            "token=t0k secret=s3 client_secret=c5 key=k1 monkey=ok",
            "token=*** secret=*** client_secret=*** key=*** monkey=ok",
        ),
        ("sqlite:///monitor.db", "sqlite:///monitor.db"),
    ],
)
def test_mask_secrets(text: str, expected: str) -> None:
    masked = mask_secrets(text)
    assert expected in masked
    for secret in ("p%40ss", "pw@", "z9", "abc123", "hunter2", "t0k", "s3 ", "c5", "k1"):
        assert secret not in masked


def test_mask_url_hides_a_password_holding_raw_at_signs_and_secret_parameters() -> None:
    assert mask_url("postgresql://bob:p@ss@db/x?password=q&application_name=m") == (
        "postgresql://bob:***@db/x?application_name=m&password=***"
    )
    assert mask_url("127.0.0.1:9092") == "127.0.0.1:9092"


def test_masked_dump_hides_the_store_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", "postgresql://bob:hunter2@db/x?sslpassword=s3cr3t")
    dumped = load_settings().masked_dump()
    assert dumped["store"]["url"] == "postgresql://bob:***@db/x?sslpassword=***"
    assert dumped["kafka"]["spans_topic"] == "otlp_spans"


# --------------------------------------------------------------------------- the judge section

REPO = Path(__file__).resolve().parent.parent


def test_judge_defaults() -> None:
    judge = load_settings().judge
    assert (judge.enabled, judge.model, judge.models, judge.max_tokens, judge.cache_ttl) == (
        False,
        "claude-sonnet-4-6",
        {},
        1024,
        "5m",
    )
    assert (judge.max_field_chars, judge.max_input_tokens, judge.batch) == (2000, 30_000, False)
    assert (judge.api_key_env, judge.api_key_file, judge.base_url) == ("ANTHROPIC_API_KEY", None, None)
    assert (judge.timeout_s, judge.max_retries, judge.concurrency, judge.max_backlog) == (60.0, 4, 4, 1000)
    assert (judge.only_flagged, judge.rejudge_borderline) == (False, None)
    assert judge.prices == DEFAULT_JUDGE_PRICES and judge.prices_version == JUDGE_PRICES_VERSION
    assert judge.budgets.total == JudgeBudgetLimits() and judge.budgets.per_judge == {}
    assert judge.model_for("judge_goal_accuracy") == "claude-sonnet-4-6"


def test_judge_values_from_a_file_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(
        "judge:\n  enabled: true\n  models: {judge_goal_accuracy: claude-haiku-4-5}\n  cache_ttl: 1h\n"
        "  budgets:\n    total: {usd_per_day: 20}\n    per_judge: {judge_tool_selection: {requests_per_minute: 5}}\n"
    )
    monkeypatch.setenv("MONITOR_JUDGE__BUDGETS__TOTAL__OUTPUT_TOKENS_PER_DAY", "500000")
    monkeypatch.setenv("MONITOR_JUDGE__CONCURRENCY", "8")
    judge = load_settings(cfg).judge
    assert judge.enabled and judge.cache_ttl == "1h" and judge.concurrency == 8
    assert judge.model_for("judge_goal_accuracy") == "claude-haiku-4-5"
    assert judge.budgets.total == JudgeBudgetLimits(usd_per_day=20, output_tokens_per_day=500_000)
    assert judge.budgets.per_judge["judge_tool_selection"].requests_per_minute == 5


def test_bad_judge_values_name_the_key_the_value_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_JUDGE__CONCURRENCY", "0")
    with pytest.raises(SettingsError) as info:
        load_settings(
            judge={
                "cache_ttl": "2h",
                "max_tokens": 0,
                "base_url": "llm-proxy:8080",
                "rejudge_borderline": 0.7,
                "budgets": {"per_judge": {"judge_goal_accuracy": {"usd_per_day": -1, "usd_per_dy": 1}}},
            }
        )
    by_name = {p.split(" = ", 1)[0]: p for p in info.value.problems}
    assert set(by_name) == {
        "MONITOR_JUDGE__CONCURRENCY",
        "judge.cache_ttl",
        "judge.max_tokens",
        "judge.base_url",
        "judge.rejudge_borderline",
        "judge.budgets.per_judge.judge_goal_accuracy.usd_per_day",
        "judge.budgets.per_judge.judge_goal_accuracy.usd_per_dy",
    }
    assert by_name["MONITOR_JUDGE__CONCURRENCY"].startswith(
        "MONITOR_JUDGE__CONCURRENCY = '0': Input should be greater than or equal to 1. Fix: set "
        "MONITOR_JUDGE__CONCURRENCY to judge requests in flight at once"
    )
    assert by_name["judge.cache_ttl"] == (
        "judge.cache_ttl = '2h': Input should be '5m' or '1h'. Fix: set judge.cache_ttl to prompt-cache TTL of the "
        "static blocks (1h for low-traffic agents) (one of '5m' or '1h'); file key `judge.cache_ttl` or env "
        "MONITOR_JUDGE__CACHE_TTL"
    )
    assert "'llm-proxy:8080' is not an http:// or https:// URL" in by_name["judge.base_url"]
    assert by_name["judge.budgets.per_judge.judge_goal_accuracy.usd_per_day"].startswith(
        "judge.budgets.per_judge.judge_goal_accuracy.usd_per_day = -1: Input should be greater than or equal to 0. "
        "Fix: set judge.budgets.per_judge.judge_goal_accuracy.usd_per_day to USD per UTC day"
    )
    assert "did you mean `usd_per_day`?" in by_name["judge.budgets.per_judge.judge_goal_accuracy.usd_per_dy"]


def test_prices_are_merged_over_the_built_in_table_and_then_need_a_version_of_their_own() -> None:
    mine = {"claude-private-1": {"input_per_mtok": 1.5, "output_per_mtok": 7.5}}
    with pytest.raises(SettingsError) as info:
        load_settings(judge={"prices": mine})
    assert info.value.problems == [
        f"judge.prices_version = '{JUDGE_PRICES_VERSION}': judge.prices differs from the built-in table "
        f"'{JUDGE_PRICES_VERSION}', so costs computed with it would pass for list prices. Fix: set "
        "judge.prices_version to a name of your own for the prices table once it differs from the built-in one "
        "(recorded with each cost); file key `judge.prices_version` or env MONITOR_JUDGE__PRICES_VERSION"
    ]
    judge = load_settings(judge={"prices": mine, "prices_version": "acme-2026-11"}).judge
    assert judge.prices["claude-private-1"] == ModelPrice(input_per_mtok=1.5, output_per_mtok=7.5)
    assert set(judge.prices) == {*DEFAULT_JUDGE_PRICES, "claude-private-1"}
    # the built-in table given back whole (what `monitor config` prints) is not a change
    dumped = load_settings().masked_dump()["judge"]
    assert load_settings(judge={"prices": dumped["prices"]}).judge.prices == DEFAULT_JUDGE_PRICES
    with pytest.raises(SettingsError, match="long_prompt_multiplier needs long_prompt_tokens"):
        load_settings(
            judge={
                "prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "long_prompt_multiplier": 2}},
                "prices_version": "x",
            }
        )


def test_the_built_in_prices_follow_the_published_cache_multipliers() -> None:
    for model, row in DEFAULT_JUDGE_PRICES.items():
        assert model.startswith("claude-") and row.input_per_mtok > 0 and row.output_per_mtok >= row.input_per_mtok
        read = row.cache_read_per_mtok
        assert read is None or 0 < read <= 0.1 * row.input_per_mtok + 1e-12, model
    assert DEFAULT_JUDGE_PRICES["claude-sonnet-4-6"] == ModelPrice(
        input_per_mtok=3, output_per_mtok=15, min_cacheable_tokens=1024
    )


def test_a_pasted_api_key_is_rejected_without_being_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-ant-api03-Hq7-Settings-Secret"
    proxy_token = "opaque-proxy-token-Zx81"
    monkeypatch.setenv("MONITOR_JUDGE__API_KEY", key)
    with pytest.raises(SettingsError) as info:
        load_settings(judge={"api_key_env": proxy_token, "anthropic_api_key": proxy_token})
    text = str(info.value)
    assert key not in text and proxy_token not in text
    assert "MONITOR_JUDGE__API_KEY = '***': Extra inputs are not permitted" in text
    assert "judge.api_key_env = '***': not an environment variable name" in text
    assert "judge.anthropic_api_key = '***'" in text


def test_token_counts_are_shown_and_keys_masked_in_the_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_JUDGE__BASE_URL", "https://tok-3141@proxy.internal/v1")
    dumped = load_settings(judge={"budgets": {"total": {"input_tokens_per_day": 10**6}}}).masked_dump()["judge"]
    assert dumped["max_tokens"] == 1024 and dumped["max_input_tokens"] == 30_000
    assert dumped["budgets"]["total"]["input_tokens_per_day"] == 10**6
    assert dumped["prices"]["claude-haiku-5-5"]["long_prompt_tokens"] == 100_000
    assert dumped["base_url"] == "https://***@proxy.internal/v1"
    assert mask_secrets("token=abc max_tokens=12") == "token=*** max_tokens=***"  # log lines still err on masking


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auth failed for sk-ant-api03-AbC_d-9 (401)", "auth failed for sk-ant-*** (401)"),
        ("ANTHROPIC_API_KEY=plain-value-7 set", "ANTHROPIC_API_KEY=*** set"),
        ("x-api-key=k-1 anthropic_apikey=k-2", "x-api-key=*** anthropic_apikey=***"),
        ("api_key_env=ANTHROPIC_API_KEY", "api_key_env=ANTHROPIC_API_KEY"),
    ],
)
def test_anthropic_keys_are_masked_in_text(text: str, expected: str) -> None:
    assert mask_secrets(text) == expected
    assert is_secret_name("ANTHROPIC_API_KEY") and not is_secret_name("api_key_file")


def test_every_judge_key_is_documented() -> None:
    doc = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [f"judge.{name}" for name in JudgeSettings.model_fields if f"`judge.{name}`" not in doc]
    missing += [name for name in (*ModelPrice.model_fields, *JudgeBudgetLimits.model_fields) if f"`{name}`" not in doc]
    missing += [f"judge.budgets.{name}" for name in JudgeBudgets.model_fields if f"`judge.budgets.{name}" not in doc]
    missing += [model for model in DEFAULT_JUDGE_PRICES if f"`{model}`" not in doc]
    assert missing == [], f"missing from docs/configuration.md: {missing}"
