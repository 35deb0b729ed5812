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
