"""The HTML report in a real browser: headless Chromium (Debian package, REAL-PARTS §8) renders it, takes a
screenshot and dumps the DOM; the charts and tables are there, the picture is not blank, and no script is needed."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from monitor.cli import main
from tests.report.conftest import WEEK, DemoStore

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")  # make system-deps installs it


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _png_pixels(path: Path) -> tuple[int, int, set[bytes]]:
    """Width, height and the set of distinct pixels of an 8-bit RGB(A) PNG (enough to tell blank from drawn)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, colour = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = {2: 3, 6: 4}[colour]
    raw = zlib.decompress(idat)
    stride = width * channels
    seen: set[bytes] = set()
    # sample rows without undoing the filters: filtered bytes of a blank page are all zero after the first row
    for y in range(0, height, 7):
        row = raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]
        for x in range(0, width, 13):
            seen.add(row[x * channels : x * channels + 3])
    return width, height, seen


def test_chromium_renders_the_charts_and_tables(
    demo_store: DemoStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", demo_store.url)
    assert main(["report", "--week", WEEK, "--format", "html", "--out", str(tmp_path)]) == 0
    page = tmp_path / f"report-{WEEK}.html"
    html = page.read_text()
    assert "<script" not in html.lower()

    dom = _chromium("--virtual-time-budget=2000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    for element in (
        'id="headline-table"',
        'id="rec-1"',
        'id="chart-failure-ratio"',
        'id="chart-selection"',
        'id="chart-confusion-0"',
        'id="chart-parameters"',
        'id="chart-scores"',
        'id="agents-table"',
        'id="patterns-table"',
        'id="parameters-table"',
        'id="scorers-table"',
        'id="examples-table"',
        'class="confusion-table"',
    ):
        assert element in dom.stdout, element
    assert dom.stdout.count("data:image/png;base64,") >= 6

    shot = tmp_path / "report.png"
    result = _chromium("--window-size=1000,3000", f"--screenshot={shot}", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 20_000
    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (1000, 3000)
    assert len(pixels) > 20  # text, tables and charts: many colours, not a blank page
