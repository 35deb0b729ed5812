"""Writes to one output are exclusive, a ``--force`` replacement
survives a crash at any step, leftovers of killed runs are cleaned, and output files get
the permissions of the user's umask."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hilsim.cli.main import main
from hilsim.core import files as atomic
from hilsim.core.bundle import read_bundle, write_bundle
from hilsim.core.files import atomic_directory
from hilsim.formats.read import import_profile
from tests import reliability_inputs as inputs


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ------------------------------------------------------------------------- exclusive create

def test_writer_that_finishes_second_does_not_replace(tmp_path):
    out = tmp_path / "out"
    first = import_profile(inputs.NSYS_CSV)
    with pytest.raises(FileExistsError), atomic_directory(out) as tmp:
        (tmp / "launches.parquet").write_text("the slower writer")
        write_bundle(first, out)  # another writer claims the output meanwhile
    assert read_bundle(out).n_launches == first.n_launches
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_two_concurrent_imports_one_wins(tmp_path):
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "hilsim.cli.main", "import", str(inputs.SQLITE), "-o",
            str(out)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2).splitlines()
    assert len(loser) == 1 and "already exists" in loser[0]
    assert read_bundle(out).n_launches == 1106 and _leftovers(tmp_path) == []


# ------------------------------------------------------------------- crash-safe replacement

STEPS = ("replace", "rename", "renameat2", "rmtree")


def _crash_at(step: int, exchange: bool, source: Path, out: Path) -> int:
    """Fork; the child imports ``source`` over ``out`` with --force and dies (os._exit,
    no cleanup, as kill -9) at its ``step``-th filesystem step of the commit."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            calls = {"n": 0}

            def dying(original):
                def step(*args, **kwargs):
                    calls["n"] += 1
                    if calls["n"] == step_at:
                        os._exit(137)
                    return original(*args, **kwargs)
                return step

            step_at = step
            if not exchange:
                atomic._renameat2_fn = None
            atomic._renameat2 = dying(atomic._renameat2)
            os.replace = dying(os.replace)
            os.rename = dying(os.rename)
            atomic.shutil.rmtree = dying(atomic.shutil.rmtree)
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115
            code = main(["import", str(source), "-o", str(out), "--force"])
            os._exit(100 + code)
        finally:
            os._exit(99)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.slow
@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_force_replacement_survives_a_crash_at_every_step(tmp_path, exchange):
    out = tmp_path / "out"
    assert main(["import", str(inputs.NSYS_CSV), "-o", str(out)]) == 0
    old_n = read_bundle(out).n_launches
    crashed = 0
    for step in range(1, 8):
        code = _crash_at(step, exchange, inputs.SQLITE, out)
        assert code in (137, 100), code
        crashed += code == 137
        # the old or the new bundle, complete (without RENAME_EXCHANGE the reader first
        # moves back a folder that a replacement killed between its renames set aside)
        n = read_bundle(out).n_launches
        assert n in (old_n, 1106)
        # the next writer cleans what the killed one left, and succeeds
        assert main(["import", str(inputs.NSYS_CSV), "-o", str(out), "--force"]) == 0
        assert read_bundle(out).n_launches == old_n
        assert _leftovers(tmp_path) == [], step
    assert crashed >= 2  # the crash did hit the commit's steps


def test_dead_writers_temporary_folder_is_removed(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".out.{dead.pid}.abc123.tmp"
    stale.mkdir()
    (stale / "launches.parquet").write_text("half")
    assert main(["import", str(inputs.NSYS_CSV), "-o", str(tmp_path / "out")]) == 0
    assert _leftovers(tmp_path) == []


# ------------------------------------------------------------- permissions follow the umask

@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600)])
def test_plan_result_report_follow_umask(tmp_path, umask, mode):
    from hilsim.core.files import write_text_atomic

    bundle = tmp_path / "b"
    assert main(["import", str(inputs.SQLITE), "-o", str(bundle)]) == 0
    previous = os.umask(umask)
    try:
        assert main(["plan", str(bundle), "-m", "random", "-o", str(tmp_path / "p.json")]) == 0
        assert main(["evaluate", str(bundle), "--plan", str(tmp_path / "p.json"), "-o",
                     str(tmp_path / "r.json")]) == 0
        # the report writer (validate.write_report) writes through write_text_atomic
        write_text_atomic(tmp_path / "report.html", "<html></html>")
        write_text_atomic(tmp_path / "report.json", "{}")
    finally:
        os.umask(previous)
    for name in ("p.json", "r.json", "report.html", "report.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


# ------------------------------------------------------------------------ unwritable output

def test_output_under_proc_is_one_line(capsys, tmp_path):
    code = main(["import", str(inputs.NSYS_CSV), "-o", "/proc/hilsim-x"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and "/proc" in err[0] and "internal" not in err[0]
