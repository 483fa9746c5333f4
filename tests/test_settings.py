"""Settings: one catalogue, YAML file + MONITOR_* env, errors that name key, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from monitor.settings import SettingsError, load_settings


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
