"""Golden datasets (SCORING.md §6): loaders for every supported format into one internal form.

``load_paths([...])`` finds, detects and loads dataset files into
:class:`~monitor.rules.datasets.model.Dataset` objects; every problem is a
:class:`~monitor.rules.datasets.model.DatasetError` naming the file, the JSON path and the problem.
"""

from monitor.rules.datasets.loader import detect, discover, load_file, load_paths
from monitor.rules.datasets.model import Case, Dataset, DatasetError, Gate, GateSpec, ScorerSpec, Turn

__all__ = [
    "Case",
    "Dataset",
    "DatasetError",
    "Gate",
    "GateSpec",
    "ScorerSpec",
    "Turn",
    "detect",
    "discover",
    "load_file",
    "load_paths",
]
