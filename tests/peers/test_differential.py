"""Differential tests: our reference scorers against the peers themselves (SCORING.md §0, §2, §7).

Every scorer configuration SCORING.md reproduces (:data:`tests.peers.cases.CONFIGS`) is run on a
few hundred hypothesis-generated cases (fixed seed) by our scorer and by the peer's released code,
each peer in its own locked environment built by ``tests/peers/setup.sh`` (they conflict with each
other). Each peer script runs once, with every case of every configuration, in a subprocess; all
peers run concurrently. Numbers must be equal exactly (DeepEval: ``abs <= 1e-12``, §2.8). Where the
peer raises, our scorer must return the not-applicable reason SCORING.md maps that failure to.

``PEER_CASES`` (environment, default 300) sets the number of cases per family.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import Any

import pytest

from tests.peers.cases import CONFIGS, Config, cases_for, ours, peer_case
from tests.peers.runner import PEERS, run_peers

N_CASES = int(os.environ.get("PEER_CASES", "300"))

PINNED = {
    "agentevals": {"agentevals": "0.0.9"},
    "adk": {"google-adk": "2.13.0", "rouge-score": "0.1.2"},
    "ragas": {"ragas": "0.4.3", "langchain-community": "0.4.1"},
    "deepeval": {"deepeval": "4.3.1"},
    "mastra": {"@mastra/evals": "1.10.2"},
}

SECTION = {
    "trajectory_match": "§2.3",
    "adk_tool_trajectory": "§2.4",
    "ragas_tool_call_accuracy": "§2.5",
    "ragas_tool_call_f1": "§2.6",
    "mastra_tool_call_accuracy": "§2.7",
    "deepeval_tool_correctness": "§2.8",
    "adk_response_match": "§2.9",
}

# Where a peer raises, ours returns one of these (SCORING.md §2.7: Mastra throws without input or output
# messages, and at construction without an expectation).
ACCEPTED_FOR_PEER_ERROR = {
    "mastra": {"config_error", "not_applicable/no_user_input", "not_applicable/no_output"},
}


def peer_input(peer: str) -> dict[str, Any]:
    configs = []
    for config in CONFIGS:
        if config.peer == peer:
            cases = [peer_case(config, c) for c in cases_for(config.family, N_CASES)]
            configs.append({"id": config.id, "params": config.peer_params, "cases": cases})
    return {"configs": configs}


@lru_cache(maxsize=1)
def peer_results() -> dict[str, Any]:
    """Every peer script run once on all its configurations (concurrently): peer → output or exception."""
    return run_peers({peer: peer_input(peer) for peer in PEERS})


def results_of(peer: str) -> dict[str, Any]:
    doc = peer_results()[peer]
    if isinstance(doc, Exception):  # a missing env or a crashed peer script fails loudly, never skips
        pytest.fail(str(doc), pytrace=False)
    return doc  # type: ignore[no-any-return]


@pytest.mark.parametrize("peer", list(PINNED))
def test_peer_versions_are_the_pinned_ones(peer: str) -> None:
    versions = results_of(peer)["versions"]
    for package, version in PINNED[peer].items():
        assert versions[package] == version, f"{peer}: {package} {versions[package]} is not the pinned {version}"


def _agrees(config: Config, mine: float | str, theirs: Any) -> bool:
    if isinstance(theirs, dict):
        return isinstance(mine, str) and mine in ACCEPTED_FOR_PEER_ERROR.get(config.peer, set())
    if isinstance(mine, str) or theirs is None:
        return False
    if config.tolerance:
        return abs(mine - float(theirs)) <= config.tolerance
    return mine == float(theirs)


@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
def test_scores_equal_the_peer(config: Config) -> None:
    doc = results_of(config.peer)
    theirs = doc["by_id"][config.id]["scores"]
    cases = cases_for(config.family, N_CASES)
    assert len(theirs) == len(cases)
    mismatches = []
    for i, case in enumerate(cases):
        mine = ours(config, case)
        if not _agrees(config, mine, theirs[i]):
            mismatches.append((i, case, mine, theirs[i]))
    if mismatches:
        lines = [
            f"{config.id}: {len(mismatches)} of {len(cases)} cases disagree with {config.peer} "
            f"(SCORING.md {SECTION[config.kind]}; ours = {config.kind} {json.dumps(config.params)}, "
            f"peer params {json.dumps(config.peer_params)})"
        ]
        for i, case, mine, their in mismatches[:5]:
            lines.append(f"  case #{i}: ours={mine!r} theirs={their!r}")
            lines.append(f"    {json.dumps(peer_case(config, case), ensure_ascii=False)}")
        pytest.fail("\n".join(lines), pytrace=False)
    # Guard against a degenerate harness: the cases must produce more than one distinct peer score.
    distinct = {json.dumps(s) for s in theirs}
    assert len(distinct) > 1, f"{config.id}: every case gave {distinct}; the generated cases do not discriminate"


if __name__ == "__main__":  # pragma: no cover - debugging aid: print the per-peer timings
    for peer, doc in peer_results().items():
        if isinstance(doc, Exception):
            print(peer, doc, file=sys.stderr)
            continue
        for r in doc["results"]:
            print(f"{r['id']:60s} {len(r['scores']):5d} cases {r['elapsed_s']:.3f}s")
