"""Outputs: only a regular file (or, for folder outputs, a real folder) is ever replaced,
whatever the command; ``-o FILE/sub`` names the file in the way; temporary files of killed
writers are removed by the next write; a bundle hidden by a crash between the two renames
of a replacement is found by the next reader; two sweeps into one folder do not mix."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hilsim.core import files
from hilsim.core.bundle import read_bundle
from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs
from tests.fuzz.promise import run_cli

EXAMPLE = inputs.SIMULATED_V100
BUNDLE, PLAN, TIMING = (EXAMPLE / "reference.bundle", EXAMPLE / "plans" / "stem.json",
                        EXAMPLE / "tuned-timing.json")


def _argv(command: str, out: Path) -> list[str]:
    b, p = str(BUNDLE), str(PLAN)
    return {
        "plan": ["plan", b, "-m", "random", "-p", "fraction=0.1", "-o", str(out)],
        "evaluate": ["evaluate", b, "--plan", p, "-o", str(out)],
        "portability": ["portability", "--plan", p, "--source", b, "--bundle",
                        str(EXAMPLE / "rtx3070.bundle"), "-o", str(out)],
        "recommend --json": ["recommend", b, "--target-error", "50%", "--seeds", "2",
                             "--budget", "5", "-o", str(out.parent / "winner.json"),
                             "--json", str(out)],
        "dse": ["dse", b, "--plan", p, "--config", str(TIMING), "--vary", "l2_size=x2", "-o",
                str(out)],
        "pkp": ["pkp", b, "--plan", p, "--model", str(TIMING), "-o", str(out)],
        "export": ["export", p, "-o", str(out), "--force"],
    }[command]


def _special(kind: str, path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("mknod needs root")
    elif kind == "symlink":
        (path.parent / "target.txt").write_text("keep")
        path.symlink_to(path.parent / "target.txt")
    return path


COMMANDS = ("plan", "evaluate", "portability", "recommend --json", "dse", "pkp", "export")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_that_is_a_device_node_is_never_replaced(command: str, tmp_path: Path):
    out = _special("device", tmp_path / "null")
    code, lines, _ = run_cli(_argv(command, out), 0)
    assert code == 2 and "is a character device" in lines[0], lines
    assert stat.S_ISCHR(os.lstat(out).st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_fifo_and_symlink_outputs_are_refused(kind: str, tmp_path: Path):
    out = _special(kind, tmp_path / "out.json")
    code, lines, _ = run_cli(_argv("evaluate", out), 0)
    assert code == 2 and ("FIFO" in lines[0] or "symbolic link" in lines[0]), lines
    assert stat.S_ISFIFO(os.lstat(out).st_mode) if kind == "fifo" else out.is_symlink()
    if kind == "symlink":
        assert (tmp_path / "target.txt").read_text() == "keep"


def test_a_folder_output_never_replaces_a_file_or_device(tmp_path: Path):
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    code, lines, _ = run_cli(["import", str(inputs.NSYS_CSV), "-o", str(victim), "--force"], 0)
    assert code == 2 and "is a file" in lines[0], lines
    assert victim.read_text() == "mine"
    device = _special("device", tmp_path / "null")
    code, lines, _ = run_cli(["import", str(inputs.NSYS_CSV), "-o", str(device), "--force"], 0)
    assert code == 2 and "character device" in lines[0], lines
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_output_under_a_file_names_the_file(tmp_path: Path):
    blocker = tmp_path / "FILE"
    blocker.write_text("x")
    for argv in (["import", str(inputs.NSYS_CSV), "-o", str(blocker / "sub.bundle")],
                 _argv("evaluate", blocker / "deeper" / "r.json")):
        code, lines, _ = run_cli(argv, 0)
        assert code == 2 and f"{blocker} is a file, not a folder" in lines[0], lines
        assert "already exists" not in lines[0]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temporary_files_of_killed_writers_are_removed(tmp_path: Path):
    out = tmp_path / "p.json"
    dead = _dead_pid()
    stale = tmp_path / f".p.json.{dead}.abc123.tmp"
    stale.write_text("half")
    live = tmp_path / f".p.json.{os.getppid()}.def456.tmp"  # a live writer's: kept
    live.write_text("in progress")
    files.write_text_atomic(out, "{}")
    assert out.read_text() == "{}"
    assert not stale.exists() and live.exists()


def test_killed_between_mkstemp_and_replace(tmp_path: Path):
    """A real kill -9 inside open_atomic, then the next write of that output."""
    out = tmp_path / "r.json"
    script = (
        "import os, sys; from hilsim.core.files import open_atomic\n"
        f"with open_atomic({str(out)!r}) as h:\n"
        "    h.write('half'); h.flush(); os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], check=False)
    assert proc.returncode == -9
    assert len(list(tmp_path.glob(".r.json.*.tmp"))) == 1
    code, lines, _ = run_cli(_argv("evaluate", out), 0)
    assert code == 0, lines
    assert list(tmp_path.glob(".r.json.*")) == []


def test_a_bundle_hidden_between_the_two_renames_is_read(tmp_path: Path):
    out = tmp_path / "b"
    assert run_cli(["import", str(inputs.NSYS_CSV), "-o", str(out)], 0)[0] == 0
    n = read_bundle(out).n_launches
    # the state a crash leaves without RENAME_EXCHANGE: the old bundle moved aside, the
    # new one not yet in place
    aside = tmp_path / f".b.{_dead_pid()}.xyz.old"
    aside.mkdir()
    os.rename(out, aside / "previous")
    code, lines, _ = run_cli(["plan", str(out), "-m", "random", "-p", "fraction=0.1", "-o",
                              str(tmp_path / "plan.json")], 0)
    assert code == 0, lines
    assert read_bundle(out).n_launches == n and not aside.exists()


def test_folder_lock_refuses_a_second_holder(tmp_path: Path):
    folder = tmp_path / "sweep"
    script = (
        "import sys, time; from hilsim.core.files import folder_lock\n"
        f"with folder_lock({str(folder)!r}, 'sweep'):\n"
        "    print('held', flush=True); time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(HilsimError, match=rf"another sweep \(pid {proc.pid}\)"), \
                files.folder_lock(folder, "sweep"):
            pass
        spec = tmp_path / "spec.toml"
        spec.write_text(f'seeds = 1\n[[workloads]]\npath = "{BUNDLE}"\n'
                        '[[methods]]\nname = "random"\n')
        started = time.monotonic()
        code, lines, _ = run_cli(["sweep", str(spec), "-o", str(folder)], 0)
        assert code == 2 and "another sweep" in lines[0], lines
        assert time.monotonic() - started < 20
        assert not (folder / "results.parquet").exists()
    finally:
        proc.kill()
        proc.wait()
    with files.folder_lock(folder, "sweep"), files.folder_lock(folder, "sweep"):
        pass  # free again once the holder died; re-entrant in one process


def test_check_output_rules(tmp_path: Path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    assert files.check_output(tmp_path / "f") == tmp_path / "f"
    assert files.check_output(tmp_path / "d", folder=True) == tmp_path / "d"
    assert files.check_output(tmp_path / "new" / "deeper" / "x.json")
    with pytest.raises(HilsimError, match="is a folder"):
        files.check_output(tmp_path / "d")
    with pytest.raises(HilsimError, match="is a file"):
        files.check_output(tmp_path / "f", folder=True)
    with pytest.raises(HilsimError, match="is a file, not a folder"):
        files.check_output(tmp_path / "f" / "x" / "y.json")


@pytest.mark.parametrize("argv", [
    ["evaluate", "{missing}", "--plan", PLAN, "-o", "{out}"],
    ["recommend", "{missing}", "--target-error", "5%", "--json", "{out}"],
    ["recommend", "{missing}", "--target-error", "5%", "-o", "{out}"],
    ["dse", "{missing}", "--plan", PLAN, "--config", TIMING, "--vary", "l2_size=x2",
     "-o", "{out}"],
    ["pkp", "{missing}", "--plan", PLAN, "--model", TIMING, "-o", "{out}"],
    ["portability", "--plan", PLAN, "--source", "{missing}", "--bundle", "{missing}",
     "-o", "{out}"],
])
def test_an_output_that_cannot_be_written_is_refused_before_the_work(argv, tmp_path):
    """The output path is checked before any input is read (a missing profile here), so a
    search of minutes (recommend) does not end in a refusal of where to write it."""
    out = tmp_path / "out"
    os.mkfifo(out)
    missing = tmp_path / "missing.bundle"
    code, lines, _ = run_cli([str(a).format(out=out, missing=missing) for a in argv], 0)
    assert code == 2 and str(out) in lines[0] and "FIFO" in lines[0], lines
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
