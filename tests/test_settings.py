"""Settings: one catalogue, YAML file + MONITOR_* env, errors that name key, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from monitor.settings import SettingsError, load_settings, mask_secrets, mask_url


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
