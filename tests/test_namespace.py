"""One import name: the built wheel installs only ``hilsim``.

The repository keeps the design card's top-level folders; setuptools' ``package-dir``
mapping must put them under ``hilsim/`` in site-packages, so that no other package's
``agent`` or ``analyzer`` module can collide with ours.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


#: every test here shares one wheel build (~10 s of CPU): the slow tier
pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    if run.returncode != 0:
        pytest.fail(f"pip wheel failed: {run.stderr[-2000:]}")
    (found,) = out.glob("hilsim-*.whl")
    return found


def test_wheel_has_only_hilsim_at_top_level(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"hilsim"}, sorted(top)


def test_wheel_keeps_every_source_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("agent", "analyzer", "simmodel", "microbench"):
        for src in (ROOT / folder).rglob("*.py"):
            rel = src.relative_to(ROOT).as_posix()
            assert f"hilsim/{rel}" in names, rel
    for folder in ("core", "formats", "cli"):  # the layers that live in hilsim/ itself
        for src in (ROOT / "hilsim" / folder).rglob("*.py"):
            rel = src.relative_to(ROOT).as_posix()
            assert rel in names, rel
    assert "hilsim/analyzer/examples/casio-nerf-a100.nsys.sqlite" in names
    assert "hilsim/simmodel/presets/QV100.json" in names
    # the simulated example: every shipped file, bundles and gzip logs included
    example = ROOT / "analyzer" / "examples" / "simulated-v100"
    for f in example.rglob("*"):
        if f.is_file():
            assert f"hilsim/{f.relative_to(ROOT).as_posix()}" in names, f


def test_entry_point_targets_the_namespace(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        (ep,) = [n for n in z.namelist() if n.endswith("entry_points.txt")]
        text = z.read(ep).decode()
    assert "hilsim = hilsim.cli.main:main" in text
