"""Headless Chromium renders the validation report (opt-in: ``pytest -m chromium``).

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); skipped otherwise and
never run in the default suite.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from hilsim.analyzer.validate import SimResults, validate, write_report

from tests.test_validate import _bundle, _plan

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium"),
]


def test_report_renders_offline(tmp_path):
    bundle = _bundle()
    plan = _plan(bundle)
    sim = SimResults(np.array([1100.0, 2200.0, 1100.0, 4400.0]))
    report, images = validate(bundle, [("p", plan)], lambda p: sim, 1000.0)
    html_path, _ = write_report(report, images, tmp_path / "r")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", f"--screenshot={shot}",
         "--window-size=1200,3000", html_path.as_uri()],
        check=True, timeout=120, capture_output=True,
    )
    assert shot.stat().st_size > 10_000
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
         html_path.as_uri()],
        check=True, timeout=120, capture_output=True, text=True,
    ).stdout
    assert "Sampled simulation vs silicon" in dom and "<script" not in dom


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_report_fits_1400px_without_horizontal_overflow(tmp_path):
    """The NeRF profile (1,106 real launches, long C++ kernel names, 330 STEM clusters):
    at 1400 px the page must not scroll sideways and nothing may stick out of the main
    column; the figures and the headline come before the cluster table, which shows its
    top rows with the rest behind <details>. The simulated cycles are a stand-in (silicon
    times a per-kernel factor): this test is about layout, not accuracy."""
    import json

    from hilsim.analyzer import methods
    from hilsim.analyzer.validate import TOP_CLUSTER_ROWS, silicon_cycles

    from hilsim.formats.read import import_profile
    from tests.conftest import DATA

    bundle = import_profile(DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite")
    silicon, _ = silicon_cycles(bundle, 1410.0)
    codes = bundle.launches["name"].cat.codes.to_numpy()
    factor = np.random.default_rng(0).lognormal(0.0, 0.15, codes.max() + 1)
    sim = SimResults(silicon * factor[codes], source="stand-in")
    plans = [(m, methods.create(m).plan(bundle).attach_names(bundle.launches["name"]))
             for m in ("stem", "tbpoint")]
    report, images = validate(bundle, plans, lambda p: sim, 1410.0)
    html_path, _ = write_report(report, images, tmp_path / "r")
    text = html_path.read_text()
    assert text.index("Headline") < text.index("Duration histograms") < text.index("<h3>Clusters")
    assert "<details><summary>" in text
    first_table = text.split("<h3>Clusters")[1].split("</table>")[0]
    assert first_table.count("<tr>") == TOP_CLUSTER_ROWS + 1  # header + top rows
    probe = (
        "<script>window.addEventListener('load', () => {"
        "const main = document.querySelector('main').getBoundingClientRect();"
        "let right = 0; for (const el of document.querySelectorAll('main *')) {"
        "if (el.closest('details:not([open])')) continue;"
        "right = Math.max(right, el.getBoundingClientRect().right); }"
        "document.title = JSON.stringify({doc: document.documentElement.scrollWidth, "
        "win: window.innerWidth, main: main.right, right: right}); });</script>"
    )
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("</body>", probe + "</body>"))
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--window-size=1400,1000",
         "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        check=True, timeout=180, capture_output=True, text=True,
    ).stdout
    found = json.loads(dom.split("<title>")[1].split("</title>")[0].replace("&quot;", '"'))
    assert found["win"] == 1400
    assert found["doc"] <= found["win"], found  # no horizontal scroll
    assert found["right"] <= found["main"] + 1, found  # nothing sticks out of the column
    shot = tmp_path / "shot.png"
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--hide-scrollbars", f"--screenshot={shot}",
         "--window-size=1400,2400", html_path.as_uri()],
        check=True, timeout=180, capture_output=True,
    )
    assert _png_size(shot) == (1400, 2400)
    assert shot.stat().st_size > 100_000  # figures drawn, not a blank page
