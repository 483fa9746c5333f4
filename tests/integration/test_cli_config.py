"""The real ``monitor`` CLI in a subprocess: ``monitor config`` says "valid" only for configurations
``monitor run`` can start with; both report every problem at once (exit 2), unreachable brokers in one
line (exit 4); ``run`` checks before it creates the store or binds the port; secrets never reach the
output or the logs, and client libraries' record dumps stay out of the logs even at DEBUG."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from monitor.ingest.encode import encode, split_by_trace
from tests.spanutil import Recorder, agent_run
from tests.support.daemon import REPO, TOOLS, daemon_settings, names, store_counts, wait_for, write_config
from tests.support.kafka import create_topics, free_port, produce
from tests.support.postgres import PostgresCluster

SECRET_ARGUMENT = "Qwzx-Private-City-8841"
"""A tool argument no log line may contain (it stands for user data carried in spans)."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("MONITOR_")}
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    env.update(extra)
    return env


def monitor(*args: str, cwd: Path, timeout: float = 90, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m monitor ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def test_config_and_run_report_every_problem_at_once_and_run_starts_nothing(
    tmp_path: Path, busy_port: int, kafka_bootstrap: str
) -> None:
    db = tmp_path / "results.db"
    cfg = _write(
        tmp_path / "monitor.yaml",
        {
            "kafka": {"bootstrap_servers": kafka_bootstrap},
            "rules_file": str(tmp_path / "rules.yaml"),  # missing
            "scoring": {"checks": ["schema_check", "tool_eror_check"]},  # unknown check
            "sampling": {"per_agent": {"planner": 2}},  # not a rate
            "store": {"url": f"sqlite:///{db}"},
            "http": {"host": "127.0.0.1", "port": busy_port},  # taken
        },
    )
    expected = {
        "sampling.per_agent.planner = 2",
        f"rules_file = '{tmp_path / 'rules.yaml'}'",
        "scoring.checks.1 = 'tool_eror_check'",
        f"http.port = {busy_port}",
    }
    for command in ("config", "run"):
        done = monitor(command, "--config", str(cfg), cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr and "valid:" not in done.stderr
        lines = [line.removeprefix("  - ") for line in done.stderr.splitlines() if line.startswith("  - ")]
        assert {line.split(":", 1)[0] for line in lines} == expected, done.stderr
        assert all(". Fix: " in line for line in lines)
        assert done.stdout == ""
    assert not db.exists()  # run neither created nor migrated the store


def test_bad_store_url_missing_driver_and_bad_host_are_caught_by_config_and_run(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "monitor.yaml",
        {
            "store": {"url": "postgresql+psycopg2://bob:hunter2@db.internal/results"},
            "http": {"host": "no-such-host.invalid", "port": 0},
        },
    )
    for command in ("config", "run"):
        done = monitor(command, "--config", str(cfg), cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "store.url = 'postgresql+psycopg2://bob:***@db.internal/results': its database driver" in done.stderr
        assert "http.host = 'no-such-host.invalid': does not resolve" in done.stderr
        assert "hunter2" not in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_a_value_from_the_environment_is_named_by_its_variable(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "monitor.yaml", {"sampling": {"rate": 0.5}})
    for command in ("config", "run"):
        done = monitor(
            command, "--config", str(cfg), cwd=tmp_path, MONITOR_SAMPLING__RATE="2", MONITOR_RULES_FILE="gone.yaml"
        )
        assert done.returncode == 2, done.stderr
        assert "  - MONITOR_SAMPLING__RATE = '2': " in done.stderr
        assert "  - MONITOR_RULES_FILE = 'gone.yaml': the file does not exist" in done.stderr
        assert "sampling.rate" not in done.stderr and "rules_file =" not in done.stderr


def test_unreachable_brokers_one_line_and_exit_4_in_bounded_time(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "results.db"
    cfg = _write(
        tmp_path / "monitor.yaml",
        {
            "kafka": {"bootstrap_servers": f"127.0.0.1:{port}", "startup_timeout_s": 3},
            "store": {"url": f"sqlite:///{db}"},
            "http": {"host": "127.0.0.1", "port": 0},
        },
    )
    line = f"cannot reach the Kafka brokers at 127.0.0.1:{port} within 3s: 127.0.0.1:{port}: connection refused"
    started = time.monotonic()
    done = monitor("run", "--config", str(cfg), cwd=tmp_path)
    assert time.monotonic() - started < 20
    assert done.returncode == 4, done.stderr
    errors = [x for x in done.stderr.splitlines() if " ERROR " in x]
    assert len(errors) == 1 and line in errors[0], done.stderr
    assert "Traceback" not in done.stderr and " WARNING kafka" not in done.stderr
    assert not db.exists()

    done = monitor("config", "--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 4 and done.stderr.strip().startswith(line) and done.stdout == ""
    skipped = monitor("config", "--config", str(cfg), "--no-broker-check", cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    assert "configuration valid" in skipped.stderr and "brokers were not checked" in skipped.stderr


def test_config_masks_the_store_password_and_says_valid(tmp_path: Path, kafka_bootstrap: str) -> None:
    url = "postgresql://bob:hunter2@db.internal:5432/results?sslmode=require&sslpassword=s3cr3t-key"
    cfg = _write(
        tmp_path / "monitor.yaml",
        {"kafka": {"bootstrap_servers": kafka_bootstrap}, "store": {"url": url}, "http": {"port": 0}},
    )
    done = monitor("config", "--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hunter2" not in done.stdout + done.stderr and "s3cr3t-key" not in done.stdout + done.stderr
    shown = yaml.safe_load(done.stdout)["store"]["url"]
    assert shown == "postgresql://bob:***@db.internal:5432/results?sslmode=require&sslpassword=***"
    assert done.stderr.strip() == f"configuration valid: {cfg} (every check passed)"


def _traffic_with_a_secret_argument(runs: int) -> list[tuple[bytes, bytes]]:
    rec = Recorder(service="secret-agent")
    tracer = rec.tracer()
    for _ in range(runs):
        agent_run(tracer, TOOLS, [("get_weather", {"city": SECRET_ARGUMENT})])
    records: list[tuple[bytes, bytes]] = []
    for index, (trace_hex, request) in enumerate(split_by_trace(rec.request())):
        records.append((trace_hex.encode(), encode(request, "otlp_json" if index % 2 else "otlp_proto")))
    return records


def _runs_stored(store_url: str) -> int:
    """Runs in the store; 0 while the daemon has not created it yet."""
    try:
        return store_counts(store_url)[0]
    except sa.exc.DBAPIError:  # before the migration: no such table
        return 0


def _run_daemon_until_stored(cfg: Path, log: Path, store_url: str, runs: int) -> str:
    env = _env()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(cfg)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: _runs_stored(store_url) >= runs or proc.poll() is not None, 60, "runs stored")
        assert proc.poll() is None, log.read_text()[-3000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log.read_text()


@pytest.mark.parametrize("client_debug", [False, True], ids=["default", "log_client_debug"])
def test_debug_logs_hold_no_record_contents_unless_client_debug_is_asked_for(
    tmp_path: Path, kafka_bootstrap: str, client_debug: bool
) -> None:
    topic, group = names("debuglog")
    create_topics(kafka_bootstrap, {topic: 1})
    records = _traffic_with_a_secret_argument(3)
    produce(kafka_bootstrap, topic, records)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    settings = daemon_settings(kafka_bootstrap, topic, group, url).model_copy(
        update={"log_level": "DEBUG", "log_client_debug": client_debug}
    )
    text = _run_daemon_until_stored(write_config(tmp_path / "monitor.yaml", settings), tmp_path / "d.log", url, 3)
    assert " DEBUG " in text  # the log level is DEBUG
    assert " INFO kafka." in text  # and kafka-python's INFO (group membership)
    if client_debug:
        assert SECRET_ARGUMENT in text  # the detector works: client DEBUG output does carry records
    else:
        assert SECRET_ARGUMENT not in text
        assert " DEBUG kafka." not in text and " DEBUG sqlalchemy." not in text


def test_the_startup_line_masks_the_store_password_and_secret_parameters(
    tmp_path: Path, kafka_bootstrap: str, postgres_cluster: PostgresCluster
) -> None:
    database_url = postgres_cluster.create_database()  # trust auth: the password is accepted and ignored
    head, tail = database_url.split("://", 1)
    user, rest = tail.split("@", 1)
    url = f"{head}://{user.split(':')[0]}:hunter2@{rest}?sslpassword=s3cr3t-key&application_name=monitor-test"
    topic, group = names("mask")
    create_topics(kafka_bootstrap, {topic: 1})
    produce(kafka_bootstrap, topic, _traffic_with_a_secret_argument(1))
    settings = daemon_settings(kafka_bootstrap, topic, group, url)
    text = _run_daemon_until_stored(write_config(tmp_path / "monitor.yaml", settings), tmp_path / "d.log", url, 1)
    started = [line for line in text.splitlines() if "started: topics" in line]
    assert len(started) == 1 and ":***@" in started[0] and "sslpassword=***" in started[0], text[-3000:]
    frozen = [line for line in text.splitlines() if "startup objects out of the garbage collector's way" in line]
    assert len(frozen) == 1 and int(frozen[0].split("froze ")[1].split()[0]) > 10_000, text[-3000:]
    assert "hunter2" not in text and "s3cr3t-key" not in text


@pytest.mark.parametrize("where", ["settings", "rules_file"])
def test_a_misspelled_scorer_is_exit_2_with_did_you_mean_and_run_starts_nothing(
    tmp_path: Path, kafka_bootstrap: str, where: str
) -> None:
    db = tmp_path / "results.db"
    doc: dict[str, Any] = {
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        "store": {"url": f"sqlite:///{db}"},
        "http": {"host": "127.0.0.1", "port": 0},
    }
    if where == "settings":
        doc["scoring"] = {"checks": ["schema_check", "shema_check"]}
        expected = "  - scoring.checks.1 = 'shema_check': no scorer of this kind. Fix: did you mean `schema_check`?"
    else:
        rules = tmp_path / "rules.yaml"
        rules.write_text("rules:\n  - match: {agent: planner}\n    scorers: {shema_check: {}}\n")
        doc["rules_file"] = str(rules)
        expected = (
            f"  - rules_file = '{rules}': rules[0].scorers.shema_check: unknown scorer kind 'shema_check'. "
            "Fix: did you mean 'schema_check'?"
        )
    cfg = _write(tmp_path / "monitor.yaml", doc)
    for command in ("config", "run"):
        done = monitor(command, "--config", str(cfg), cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        problems = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
        assert len(problems) == 1 and problems[0].startswith(expected), done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr and "valid:" not in done.stderr
    assert not db.exists()  # run neither created nor migrated the store
