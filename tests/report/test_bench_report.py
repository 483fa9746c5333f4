"""``bench/report.py`` in its short form: it runs end to end on SQLite and prints its three phases and the baseline
ratio (speed is not asserted: CI machines vary; the figures are in the README)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_benchmark_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "report.py"), "--runs", "1500", "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for phase in ("queries", "analysis", "rendering", "baseline SELECT count(*)", "ratio", "total"):
        assert phase in out, out
    assert (tmp_path / "report-sqlite.html").stat().st_size > 10_000
    assert (tmp_path / "report-sqlite.json").exists() and (tmp_path / "report-sqlite.md").exists()
