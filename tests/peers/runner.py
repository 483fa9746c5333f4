"""Run the peer scripts (tests/peers/<peer>/score.*) in their own environments (project venv side).

Used by tests/peers/test_differential.py and bench/scorers.py. Environments are built by
``tests/peers/setup.sh``; a missing one raises :class:`PeerEnvMissing` naming it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = ROOT / "tests" / "peers"
VENVS = ROOT / ".peer-venvs"
PEERS = ("agentevals", "adk", "ragas", "deepeval", "mastra")
SETUP_HINT = "run `tests/peers/setup.sh` (or `make peers`) to build the peer environments"


class PeerEnvMissing(RuntimeError):
    """A peer environment has not been built."""


class PeerFailed(RuntimeError):
    """A peer script exited with an error."""


def peer_command(peer: str) -> list[str]:
    """The command that runs a peer script (its input file is appended)."""
    if peer == "mastra":
        modules = PEERS_DIR / "mastra" / "node_modules"
        if not (modules / ".lock.sha256").is_file() or not (modules / "@mastra" / "evals").is_dir():
            raise PeerEnvMissing(f"peer env for mastra missing ({modules}): {SETUP_HINT}")
        return ["node", str(PEERS_DIR / "mastra" / "score.mjs")]
    python = VENVS / peer / "bin" / "python"
    if not python.is_file() or not (VENVS / peer / ".lock.sha256").is_file():
        raise PeerEnvMissing(f"peer env for {peer} missing ({VENVS / peer}): {SETUP_HINT}")
    return [str(python), str(PEERS_DIR / peer / "score.py")]


def run_peers(docs: Mapping[str, dict[str, Any]], *, parallel: bool = True, timeout_s: float = 900) -> dict[str, Any]:
    """Run each peer once on its input document; peer → output document, or the exception it raised.

    ``parallel`` starts every peer at once (tests); the benchmark runs them one after another so
    that no two measurements share the CPU.
    """
    out: dict[str, Any] = {}
    tmp = Path(tempfile.mkdtemp(prefix="peers-"))
    procs: dict[str, tuple[subprocess.Popen[bytes], Any, Path]] = {}

    def finish(peer: str) -> None:
        proc, stderr, path = procs.pop(peer)
        try:
            stdout, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, _ = proc.communicate()
        stderr.seek(0)
        err = stderr.read().decode("utf-8", "replace")
        stderr.close()
        if proc.returncode != 0:
            out[peer] = PeerFailed(
                f"peer script for {peer} failed (exit {proc.returncode}, input {path}):\n{err[-3000:]}"
            )
            return
        doc = json.loads(stdout)
        doc["by_id"] = {r["id"]: r for r in doc["results"]}
        out[peer] = doc

    for peer, doc in docs.items():
        try:
            cmd = peer_command(peer)
        except PeerEnvMissing as exc:
            out[peer] = exc
            continue
        path = tmp / f"{peer}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        stderr = open(tmp / f"{peer}.stderr", "w+b")  # noqa: SIM115 (closed in finish)
        procs[peer] = (
            subprocess.Popen([*cmd, str(path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr),
            stderr,
            path,
        )
        if not parallel:
            finish(peer)
    for peer in list(procs):
        finish(peer)
    return out
