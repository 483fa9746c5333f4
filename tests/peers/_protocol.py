"""The peer-script protocol, shared by the Python peer scripts (stdlib only: it runs in every peer venv).

A peer script is run as ``<peer-python> tests/peers/<peer>/score.py IN.json`` and prints one JSON
document on stdout. ``IN.json``::

    {"configs": [{"id": str, "params": {...peer-native parameters...}, "cases": [case, ...]}, ...], "repeat": int?}

Output::

    {"peer": str, "versions": {package: version}, "results": [
        {"id": str, "scores": [float | {"error": "Type: message"}, ...], "elapsed_s": float}, ...]}

For each configuration the script first converts every case into the peer's own input objects
(untimed), then times only the loop that calls the peer's scorer on them (``time.perf_counter``
around the loop, in-process; with ``repeat`` > 1 the loop runs that many times and the fastest pass
is reported). A case the peer rejects (raises) gets ``{"error": ...}`` instead of
a score. Case format: see ``tests/peers/cases.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

# No peer may reach the network or write telemetry while it is being measured.
QUIET_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "NO",
    "DEEPEVAL_GRPC_LOGGING": "NO",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "ERROR_REPORTING": "NO",
    "RAGAS_DO_NOT_TRACK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "ADK_DISABLE_TELEMETRY": "1",
    "OTEL_SDK_DISABLED": "true",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TQDM_DISABLE": "1",
}
for _k, _v in QUIET_ENV.items():
    os.environ.setdefault(_k, _v)

Prepared = Callable[[], Any]
"""A zero-argument callable that scores one prepared case and returns a float."""


def run(peer: str, packages: list[str], prepare: Callable[[dict[str, Any], dict[str, Any]], Prepared]) -> None:
    """Read the configurations, score every case, print the result document.

    ``prepare(params, case)`` builds the peer-native inputs for one case (not timed) and returns a
    callable that scores it (timed). Exceptions in either are reported per case.
    """
    with open(sys.argv[1], encoding="utf-8") as fh:
        doc = json.load(fh)
    results = []
    for config in doc["configs"]:
        params = config.get("params", {})
        prepared: list[Prepared | BaseException] = []
        for case in config["cases"]:
            try:
                prepared.append(prepare(params, case))
            except Exception as exc:
                prepared.append(exc)
        scores: list[Any] = [None] * len(prepared)
        elapsed = float("inf")
        for _ in range(max(1, int(doc.get("repeat", 1)))):
            start = time.perf_counter()
            for i, fn in enumerate(prepared):
                if isinstance(fn, BaseException):
                    continue
                try:
                    scores[i] = fn()
                except Exception as exc:
                    scores[i] = exc
            elapsed = min(elapsed, time.perf_counter() - start)
        out = []
        for fn, score in zip(prepared, scores, strict=True):
            err = fn if isinstance(fn, BaseException) else score if isinstance(score, BaseException) else None
            if err is not None:
                out.append({"error": f"{type(err).__name__}: {str(err)[:300]}"})
            else:
                out.append(float(score))
        results.append({"id": config["id"], "scores": out, "elapsed_s": elapsed})
    versions = {p: metadata.version(p) for p in packages}
    json.dump({"peer": peer, "versions": versions, "results": results}, sys.stdout)
    sys.stdout.write("\n")
