"""``hilsim simulate -o OUT`` never removes what it did not create (no simulator needed).

The simulator runs in a temporary folder outside OUT; OUT gets only simulate's own files,
each written to a temporary name and renamed, and a previous simulation there is replaced
only with --force. Here the run fails before the simulator starts (no build in the cache
the environment names): OUT must be exactly as it was.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hilsim.cli.main import main
from hilsim.core.plan import Plan


def _plan(tmp_path: Path) -> Path:
    samples = pd.DataFrame({"launch_id": [3, 7], "weight": [1.0, 1.0], "cluster": [0, 1],
                            "draws": [1, 1]})
    return Plan(method="hand", params={}, source={"n_launches": 29}, clusters=[],
                samples=samples).save(tmp_path / "plan.json")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


@pytest.fixture()
def no_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HILSIM_GPGPUSIM_HOME", raising=False)
    monkeypatch.setenv("HILSIM_GPGPUSIM_CACHE", str(tmp_path / "empty-cache"))


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_failed_run_leaves_the_output_folder_as_it_was(tmp_path: Path, no_build,
                                                       capsys) -> None:
    out = tmp_path / "out"
    (out / "run").mkdir(parents=True)  # the user's own folder named like the old run dir
    (out / "run" / "keep.txt").write_text("mine")
    (out / "notes.txt").write_text("mine too")
    before = _tree(out)
    code, text = _run(["simulate", str(_plan(tmp_path)), "--card", "SM7_QV100",
                       "--warmup", "none", "-o", str(out), "--", "./prog"], capsys)
    assert code == 2
    assert "no GPGPU-Sim build found" in text and len(text.strip().splitlines()) == 1
    assert _tree(out) == before  # nothing removed, nothing half-written (no launches.txt)


def test_a_previous_simulation_is_replaced_only_with_force(tmp_path: Path, no_build,
                                                           capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "simulate.json").write_text("{}")
    (out / "sampled.log").write_text("old")
    before = _tree(out)
    plan = str(_plan(tmp_path))
    code, text = _run(["simulate", plan, "--card", "SM7_QV100", "--warmup", "none", "-o",
                       str(out), "--", "./prog"], capsys)
    assert code == 2 and "already holds a simulation" in text
    assert "--force" in text and _tree(out) == before
    # with --force it goes on (and here fails for want of a simulator, still touching nothing)
    code, text = _run(["simulate", plan, "--card", "SM7_QV100", "--warmup", "none", "-o",
                       str(out), "--force", "--", "./prog"], capsys)
    assert code == 2 and "no GPGPU-Sim build found" in text
    assert _tree(out) == before


def test_bad_warmup_text_is_one_line(tmp_path: Path, capsys) -> None:
    code, text = _run(["simulate", str(_plan(tmp_path)), "--card", "SM7_QV100", "--warmup",
                       "lukewarm", "-o", str(tmp_path / "o"), "--", "./prog"], capsys)
    assert code == 2 and "unknown part 'lukewarm'" in text
    assert not (tmp_path / "o").exists()
