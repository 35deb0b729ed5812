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


# ------------------------------------------- the writer: swap, lock, re-check (no simulator)
# The shipped example's real warm and cold logs and samples stand in for a run's results.

EXAMPLE = Path(__file__).parent.parent / "analyzer" / "examples" / "simulated-v100"


def _results(tmp_path: Path, tag: str):  # noqa: ANN202 - (warm, cold, placement, result)
    import gzip
    from types import SimpleNamespace

    import numpy as np

    sim = EXAMPLE / "sims" / "stem-reference"
    run_dir = tmp_path / f"run-{tag}"
    run_dir.mkdir()
    for name in ("sampled", "cold"):
        (run_dir / f"{name}.log").write_bytes(
            gzip.decompress((sim / f"{name}.log.gz").read_bytes()) + tag.encode())
    table = pd.read_csv(sim / "samples.csv")
    warm = SimpleNamespace(base=SimpleNamespace(
        run=SimpleNamespace(log_path=run_dir / "sampled.log", run_dir=run_dir),
        launch_ids=np.asarray(table["launch_id"]), logs=(run_dir / "sampled.log",)), extra=[])
    cold = SimpleNamespace(run=SimpleNamespace(log_path=run_dir / "cold.log"),
                           logs=(run_dir / "cold.log",))
    result = SimpleNamespace(log=None, launch_list=None, to_dict=lambda: {"tag": tag})
    return warm, cold, SimpleNamespace(table=table), result


def _write(out: Path, tmp_path: Path, tag: str, force: bool = False) -> None:
    from hilsim.analyzer import simulate

    from hilsim.core.plan import load_plan, parse_warmup

    warm, cold, placement, result = _results(tmp_path, tag)
    simulate._write_outputs(out, load_plan(EXAMPLE / "plans" / "stem.json"),
                            parse_warmup("l2-fill"), 0, warm, cold, placement, result, force)


def _tag(out: Path) -> str:
    import json

    return json.loads((out / "simulate.json").read_text())["tag"]


def test_outputs_replace_the_folder_whole_and_keep_other_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, tmp_path, "first")
    (out / "notes.txt").write_text("mine")
    (out / "warm-preceding4.log").write_text("a replaced simulation's")
    _write(out, tmp_path, "second", force=True)
    assert _tag(out) == "second" and (out / "notes.txt").read_text() == "mine"
    assert (out / "sampled.log").read_bytes().endswith(b"second")
    assert not (out / "warm-preceding4.log").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == [
        ".out.lock"]  # no temporary folder left, the lock file stays


def test_a_run_killed_while_writing_leaves_the_old_simulation_whole(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """The outputs of two simulations never mix (a kill while writing once left one
    simulation's log beside another's samples)."""
    from hilsim.analyzer import simulate

    out = tmp_path / "out"
    _write(out, tmp_path, "old")
    before = _tree(out)
    real = simulate.write_text_atomic

    def killed(path, text):  # noqa: ANN001, ANN202
        if Path(path).name == "samples.csv":
            raise KeyboardInterrupt  # as a kill between two files
        return real(path, text)

    monkeypatch.setattr(simulate, "write_text_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        _write(out, tmp_path, "new", force=True)
    assert _tree(out) == before


def test_a_simulation_written_meanwhile_is_not_replaced_without_force(tmp_path: Path) -> None:
    """Two ``simulate -o OUT`` into a new OUT: the check before simulating passed for
    both; the second to write refuses (checked again under the lock)."""
    from hilsim.core.errors import HilsimError

    out = tmp_path / "out"
    _write(out, tmp_path, "first")
    with pytest.raises(HilsimError, match="already holds a simulation"):
        _write(out, tmp_path, "second")
    assert _tag(out) == "first"


def test_outputs_are_locked_while_written(tmp_path: Path) -> None:
    import subprocess
    import sys

    from hilsim.core.errors import HilsimError

    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from hilsim.core.files import output_lock\n"
         f"with output_lock({str(out)!r}, 'hilsim simulate'):\n"
         "    print('held', flush=True); time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(HilsimError, match=f"another hilsim simulate \\(pid {holder.pid}\\)"):
            _write(out, tmp_path, "second")
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    _write(out, tmp_path, "third")  # the kernel dropped the lock with its holder
    assert _tag(out) == "third"
