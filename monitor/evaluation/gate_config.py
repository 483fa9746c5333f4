"""``monitor eval --config gate.yaml``: gate settings (and optionally scorers) applied to every dataset.

The file (YAML or JSON) holds ``gate:`` (the native ``gate`` block, SCORING.md §6.5/§6.7) and
optionally ``scorers:`` (the native ``scorers`` list), validated with the shipped JSON Schema::

    gate:
      min_pass_rate: 0.9
      pass_rate_rounding: 1
      allow_errors: false
      runs: 3
      scorers: {tool_trajectory_avg_score: {threshold: 0.8, min_mean: 0.9}}
    scorers: [...]        # optional: replaces every dataset's scorers

Scorer kinds and parameters are checked against the scorer registry when the file loads (an
unknown kind is a dataset error with a did-you-mean, exit 2). Merge rules: each gate field given
replaces the dataset's; a ``gate.scorers`` entry replaces (or
adds) the gate of that scorer id in every dataset that has the id (an id no dataset has is an
error). ``scorers`` replaces each dataset's scorer list; the dataset's gate entries whose ids no
longer exist are dropped, and when none is left every new scorer gates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.rules.datasets._common import Where, did_you_mean, read_document
from monitor.rules.datasets.model import Dataset, DatasetError, GateSpec, ScorerSpec
from monitor.rules.datasets.native import scorer_specs, validate

__all__ = ["GateConfig", "apply_gate_config", "load_gate_config"]

_GATE_FIELDS = ("min_pass_rate", "runs", "allow_errors", "pass_rate_rounding")


@dataclass(frozen=True, slots=True)
class GateConfig:
    fields: Mapping[str, Any] = field(default_factory=dict)
    scorers: Mapping[str, GateSpec] = field(default_factory=dict)
    scorer_specs: tuple[ScorerSpec, ...] | None = None
    file: str = ""


def load_gate_config(path: Path) -> GateConfig:
    """Read and validate a gate configuration file (errors are :class:`DatasetError`, exit 2)."""
    file = str(path)
    doc = read_document(path)
    where = Where(file)
    top = where.fields(doc, ("gate", "scorers"), what="an object with 'gate' and/or 'scorers'")
    gate = top.get("gate") or {}
    validate(gate, file, ref="gate", base="$.gate")
    specs = None
    if "scorers" in top:
        for i, s in enumerate(where.key("scorers").array(top["scorers"])):
            validate(s, file, ref="scorer", base=f"$.scorers[{i}]")
        specs = scorer_specs(top["scorers"], where.key("scorers"))
    gates = {
        sid: GateSpec(
            threshold=spec.get("threshold"),
            aggregate=spec.get("aggregate", "mean"),
            min_mean=spec.get("min_mean"),
            require=bool(spec.get("require", False)),
        )
        for sid, spec in (gate.get("scorers") or {}).items()
    }
    return GateConfig({k: gate[k] for k in _GATE_FIELDS if k in gate}, gates, specs, file)


def apply_gate_config(datasets: Sequence[Dataset], config: GateConfig) -> list[Dataset]:
    """The datasets with the configuration merged in (see the module docstring)."""
    out: list[Dataset] = []
    used: set[str] = set()
    every_id: set[str] = set()
    for ds in datasets:
        scorers = ds.scorers
        gates = dict(ds.gate.scorers)
        if config.scorer_specs is not None:
            scorers = config.scorer_specs
            ids = {s.id for s in scorers}
            gates = {k: v for k, v in gates.items() if k in ids}
            if not gates:
                gates = {s.id: GateSpec() for s in scorers}
        ids = {s.id for s in scorers}
        every_id |= ids
        for sid, spec in config.scorers.items():
            if sid in ids:
                gates[sid] = spec
                used.add(sid)
        gate = dataclasses.replace(ds.gate, scorers=gates, **dict(config.fields))
        out.append(dataclasses.replace(ds, scorers=scorers, gate=gate))
    for sid in config.scorers:
        if sid not in used:
            problem = f"no dataset has a scorer with id {sid!r}{did_you_mean(sid, sorted(every_id))}"
            raise DatasetError(config.file, f"$.gate.scorers.{sid}", problem)
    return out
