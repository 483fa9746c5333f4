"""The real ``monitor`` CLI in a subprocess with the judge section: ``monitor config`` prints the judge
settings (token counts in clear) and never the Anthropic API key, whether the key sits in the environment,
in the key file, or was pasted into the configuration by mistake."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ENV_KEY = "sk-ant-api03-EnvSecret-7c1f-Qwzx"
FILE_KEY = "sk-ant-api03-FileSecret-91ab-Plmn"
PASTED = "not-an-anthropic-shape-Secret-5521"  # a proxy token: no key pattern can spot it


def monitor(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith(("MONITOR_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        cwd=cwd,
        env={**base, "PYTHONWARNINGS": "ignore::DeprecationWarning", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_config(path: Path, judge: dict[str, Any]) -> Path:
    doc = {
        "store": {"url": f"sqlite:///{path.parent / 'results.db'}"},
        "http": {"host": "127.0.0.1", "port": 0},
        "judge": judge,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def assert_no_key(done: subprocess.CompletedProcess[str], *secrets: str) -> None:
    for secret in secrets:
        assert secret not in done.stdout and secret not in done.stderr
        assert secret[12:] not in done.stdout + done.stderr  # not even a tail of it


def test_config_prints_the_judge_section_without_the_key(tmp_path: Path) -> None:
    key_file = tmp_path / "secrets" / "anthropic-api-key"
    key_file.parent.mkdir()
    key_file.write_text(FILE_KEY + "\n")
    cfg = write_config(
        tmp_path / "monitor.yaml",
        {
            "enabled": True,
            "api_key_file": str(key_file),
            "models": {"judge_goal_accuracy": "claude-haiku-4-5"},
            "budgets": {"total": {"usd_per_day": 25, "input_tokens_per_day": 5_000_000}},
        },
    )
    proxy = f"https://{PASTED}@llm-proxy.internal:8443/anthropic"  # a token as the proxy URL's user
    done = monitor(
        "config",
        "--config",
        str(cfg),
        "--no-broker-check",
        cwd=tmp_path,
        ANTHROPIC_API_KEY=ENV_KEY,
        MONITOR_JUDGE__BASE_URL=proxy,
    )
    assert done.returncode == 0, done.stderr
    assert "configuration valid" in done.stderr
    assert_no_key(done, ENV_KEY, FILE_KEY, PASTED)
    judge = yaml.safe_load(done.stdout)["judge"]
    assert judge["api_key_file"] == str(key_file) and judge["api_key_env"] == "ANTHROPIC_API_KEY"
    assert judge["max_tokens"] == 1024 and judge["max_input_tokens"] == 30000  # counts, not secrets: in clear
    assert judge["budgets"]["total"]["input_tokens_per_day"] == 5_000_000
    assert judge["prices"]["claude-haiku-4-5"]["min_cacheable_tokens"] == 4096
    assert "api_key" not in judge  # the key is not a setting
    assert judge["base_url"] == "https://***@llm-proxy.internal:8443/anthropic"

    defaults = monitor("config", "--defaults", cwd=tmp_path, ANTHROPIC_API_KEY=ENV_KEY)
    assert defaults.returncode == 0, defaults.stderr
    assert_no_key(defaults, ENV_KEY)
    assert yaml.safe_load(defaults.stdout)["judge"]["enabled"] is False


def test_enabled_judges_without_a_key_are_a_configuration_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "monitor.yaml", {"enabled": True})
    done = monitor("config", "--config", str(cfg), "--no-broker-check", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "  - judge.api_key_env = 'ANTHROPIC_API_KEY': judge.enabled is true but the environment variable" in (
        done.stderr
    )
    assert done.stdout == ""


def test_a_key_pasted_into_the_configuration_is_rejected_and_never_echoed(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "monitor.yaml",
        {"api_key": FILE_KEY, "api_key_env": PASTED, "anthropic_api_key": ENV_KEY},
    )
    for command in ("config", "run"):
        done = monitor(command, "--config", str(cfg), cwd=tmp_path, MONITOR_JUDGE__BASE_URL=f"https://{PASTED}@proxy")
        assert done.returncode == 2, done.stderr
        problems = sorted(
            line.removeprefix("  - ").split(" = ", 1)[0] for line in done.stderr.splitlines() if line.startswith("  - ")
        )
        assert problems == ["judge.anthropic_api_key", "judge.api_key", "judge.api_key_env"], done.stderr
        assert "judge.api_key = '***': Extra inputs are not permitted" in done.stderr
        assert "judge.api_key_env = '***': not an environment variable name" in done.stderr
        assert_no_key(done, FILE_KEY, ENV_KEY, PASTED)
    assert not (tmp_path / "results.db").exists()
