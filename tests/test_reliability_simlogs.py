"""Simulator logs (``validate --sim/--sim-full``, ``import``, ``pkp --gpgpusim-log``): values
that cannot be true are one line naming the kernel and its line, never a silent wrong
result nor an internal error; the visualizer log must cover the run and name the plan's
kernels."""

from __future__ import annotations

import gzip
import re
import shutil
import time
from pathlib import Path

import pytest

from tests import reliability_inputs as inputs
from tests.fuzz.promise import check_no_output, run_cli

EXAMPLE = inputs.SIMULATED_V100
SAMPLED = EXAMPLE / "sims" / "stem-tuned" / "sampled.log.gz"


def _import(log: Path, tmp_path: Path) -> tuple[int, list[str]]:
    out = tmp_path / "out"
    code, lines, _ = run_cli(["import", str(log), "--format", "gpgpusim-log", "-o", str(out)],
                             log.stat().st_size)
    if code == 2:
        check_no_output(out)
    return code, lines


def _validate(log: Path, tmp_path: Path, full: Path | None = None) -> tuple[int, list[str]]:
    argv = ["validate", "--silicon", str(EXAMPLE / "reference.bundle"), "--plan",
            str(EXAMPLE / "plans" / "stem.json"), "--sim", str(log), "-o", str(tmp_path / "rep")]
    if full is not None:
        argv += ["--sim-full", str(full)]
    code, lines, _ = run_cli(argv, log.stat().st_size)
    return code, lines


def _sampled_text() -> str:
    return gzip.decompress(SAMPLED.read_bytes()).decode()


@pytest.mark.parametrize("value", ["-1000", "0"])
def test_validate_refuses_impossible_kernel_cycles(value: str, tmp_path: Path) -> None:
    """Every kernel -1000 cycles once gave a projection of -1,044,000 cycles, exit 0."""
    log = inputs.gpgpusim_log(tmp_path, lambda t: inputs.replace_values(t, "gpu_sim_cycle",
                                                                        value),
                              "s.log", _sampled_text())
    code, lines = _validate(log, tmp_path)
    assert code == 2 and f"gpu_sim_cycle = {value}" in lines[0], lines
    assert "kernel 1 (" in lines[0] and "line " in lines[0]
    assert not (tmp_path / "rep.html").exists()


def test_validate_refuses_per_kernel_and_cumulative_cycles_that_disagree(tmp_path: Path):
    def edit(text: str) -> str:  # kernel 3's own cycles doubled, the running total kept
        blocks = text.split("kernel_name = ")
        match = re.search(r"^gpu_sim_cycle = (\d+)", blocks[3], flags=re.M)
        assert match
        blocks[3] = blocks[3].replace(match.group(0), f"gpu_sim_cycle = {2 * int(match[1])}")
        return "kernel_name = ".join(blocks)

    log = inputs.gpgpusim_log(tmp_path, edit, "s.log", _sampled_text())
    code, lines = _validate(log, tmp_path)
    assert code == 2 and "kernel 3 (" in lines[0] and "contradictory" in lines[0], lines


def test_validate_sim_full_refuses_contradictory_totals(tmp_path: Path) -> None:
    full = gzip.decompress((EXAMPLE / "logs" / "tuned-full.sim.log.gz").read_bytes()).decode()
    bad = inputs.gpgpusim_log(
        tmp_path, lambda t: inputs.replace_values(t, "gpu_tot_sim_cycle", "5"), "f.log", full)
    code, lines = _validate(SAMPLED, tmp_path, bad)
    assert code == 2 and "gpu_tot_sim_cycle" in lines[0], lines


@pytest.mark.parametrize("value, what", [
    ("inf", "kernel_launch_uid = inf"), ("1e308", "not a launch uid"),
    ("9223372036854775808", "not a launch uid"), ("0", "not a launch uid"),
])
def test_import_refuses_impossible_launch_uids(value: str, what: str, tmp_path: Path) -> None:
    log = inputs.gpgpusim_log(tmp_path, lambda t: inputs.replace_values(
        t, "kernel_launch_uid", value))
    code, lines = _import(log, tmp_path)
    assert code == 2 and what in lines[0], lines


@pytest.mark.parametrize("mark, what", [
    ("9223372036854775808", "past 2^63"), ("1" * 5000, "past 2^63"),
    ("\u00b2", "no 'hilsim-launch K' mark"), ("\u0663", "no 'hilsim-launch K' mark"),
])
def test_import_refuses_launch_marks_that_are_not_ids(mark: str, what: str, tmp_path: Path):
    log = inputs.gpgpusim_log(tmp_path, lambda t: t.replace("hilsim-launch 2 ",
                                                            f"hilsim-launch {mark} ", 1))
    code, lines = _import(log, tmp_path)
    assert code == 2 and what in lines[0], lines


@pytest.mark.parametrize("value, what", [("0:1132.0:1132.0:850.0", "'0'"),
                                         ("1.2.3:1132.0:1132.0:850.0", "'1.2.3'")])
def test_import_refuses_a_core_clock_that_is_not_one(value: str, what: str, tmp_path: Path):
    log = inputs.gpgpusim_log(tmp_path, lambda t: re.sub(
        r"^-gpgpu_clock_domains \S+", f"-gpgpu_clock_domains {value}", t, flags=re.M))
    code, lines = _import(log, tmp_path)
    assert code == 2 and what in lines[0] and "not a frequency" in lines[0], lines


def test_import_refuses_a_duplicated_kernel_block(tmp_path: Path) -> None:
    def edit(text: str) -> str:
        start = text.index("hilsim-launch 3 ")
        end = text.index("hilsim-launch 4 ")
        return text[:end] + text[start:end] + text[end:]

    code, lines = _import(inputs.gpgpusim_log(tmp_path, edit), tmp_path)
    assert code == 2 and ("marked twice" in lines[0] or "contradictory" in lines[0]), lines


def test_import_refuses_2000_nested_regions_quickly(tmp_path: Path) -> None:
    pushes = "".join(f"hilsim-region push r{i}\n" for i in range(2000))
    log = inputs.gpgpusim_log(tmp_path, lambda t: t.replace("hilsim-region push step0\n",
                                                            pushes, 1))
    started = time.monotonic()
    code, lines = _import(log, tmp_path)
    assert code == 2 and "nested 65 deep" in lines[0], lines
    assert time.monotonic() - started < 10


def test_a_kernel_name_line_without_value(tmp_path: Path) -> None:
    log = inputs.gpgpusim_log(tmp_path, lambda t: t.replace("hilsim-launch 5 ",
                                                            "kernel_name\nhilsim-launch 5 ", 1))
    code, lines = _import(log, tmp_path)
    assert code == 0, lines


def _pkp_run(tmp_path: Path, sim_edit=None, vis_edit=None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(EXAMPLE / "pkp-stem-tuned", run)
    for name, edit in (("sim.log.gz", sim_edit), ("gpgpusim_visualizer_.log.gz", vis_edit)):
        if edit is not None:
            text = gzip.decompress((run / name).read_bytes()).decode()
            (run / name).write_bytes(gzip.compress(edit(text).encode(), mtime=0))
    return run


def _pkp(run: Path, tmp_path: Path) -> tuple[int, list[str]]:
    code, lines, _ = run_cli(["pkp", str(EXAMPLE / "reference.bundle"), "--plan",
                              str(EXAMPLE / "plans" / "stem.json"), "--gpgpusim-log", str(run),
                              "-o", str(tmp_path / "pkp.json")], 0)
    return code, lines


def test_pkp_on_the_shipped_run_still_projects(tmp_path: Path) -> None:
    code, lines = _pkp(_pkp_run(tmp_path), tmp_path)
    assert code == 0, lines


@pytest.mark.parametrize("value", ["inf", "nan", "-5"])
def test_pkp_refuses_impossible_cycles(value: str, tmp_path: Path) -> None:
    run = _pkp_run(tmp_path, sim_edit=lambda t: inputs.replace_values(t, "gpu_sim_cycle", value))
    code, lines = _pkp(run, tmp_path)
    assert code == 2, lines


def test_pkp_refuses_permuted_launch_marks(tmp_path: Path) -> None:
    """Marks of two launches of different kernels swapped: 4.64M projected for 3.40M."""
    def swap(text: str) -> str:
        marks = re.findall(r"^hilsim-launch (\d+)\b.*$", text, flags=re.M)
        first, second = marks[0], marks[1]
        text = re.sub(rf"^hilsim-launch {first}\b", "hilsim-launch @A", text, flags=re.M)
        text = re.sub(rf"^hilsim-launch {second}\b", f"hilsim-launch {first}", text,
                      flags=re.M)
        return text.replace("hilsim-launch @A", f"hilsim-launch {second}")

    code, lines = _pkp(_pkp_run(tmp_path, sim_edit=swap), tmp_path)
    assert code == 2 and "disagree" in lines[0], lines


def test_pkp_refuses_a_visualizer_log_cut_in_half(tmp_path: Path) -> None:
    def half(text: str) -> str:
        lines = text.splitlines()
        return "\n".join(lines[: len(lines) // 2]) + "\n"

    code, lines = _pkp(_pkp_run(tmp_path, vis_edit=half), tmp_path)
    assert code == 2 and "visualizer" in lines[0], lines


# ------------------------------------------------------------ a simulate folder's samples.csv

def _edited_samples(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "sim"
    shutil.copytree(EXAMPLE / "sims" / "stem-reference", folder)
    import pandas as pd

    table = pd.read_csv(folder / "samples.csv")
    edit(table)
    table.to_csv(folder / "samples.csv", index=False)
    return folder


def _validate_folder(folder: Path, tmp_path: Path) -> tuple[int, list[str]]:
    code, lines, _ = run_cli(["validate", "--silicon", str(EXAMPLE / "reference.bundle"),
                              "--plan", str(EXAMPLE / "plans" / "stem.json"), "--sim",
                              str(folder), "-o", str(tmp_path / "rep")], 0)
    return code, lines


def test_an_untouched_simulate_folder_validates(tmp_path: Path) -> None:
    code, lines = _validate_folder(_edited_samples(tmp_path, lambda t: None), tmp_path)
    assert code == 0, lines


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda t: t.__setitem__("cycles", t["cycles"].where(t.index != 2, -1985.0)),
         "row 3: cycles -1985.0 is not a finite number > 0"),
        (lambda t: t.__setitem__("cycles", t["cycles"].where(t.index != 0, 0.0)),
         "row 1: cycles 0.0"),
        (lambda t: t.__setitem__("weight", t["weight"].where(t.index != 1, float("nan"))),
         "row 2: weight nan"),
        (lambda t: t.__setitem__("weight", t["weight"].where(t.index != 1, float("inf"))),
         "row 2: weight inf"),
        (lambda t: t.__setitem__("state_variance",
                                 t["state_variance"].where(t.index != 0, -5.0)),
         "row 1: state_variance -5.0"),
        (lambda t: t.__setitem__("launch_id", t["launch_id"].astype(float).where(
            t.index != 0, 1.5)), "row 1: launch_id 1.5 is not an integer"),
        (lambda t: t.__setitem__("launch_id", t["launch_id"].where(
            t.index != 1, t["launch_id"].iloc[0])), "appears twice"),
        (lambda t: t.pop("kernel"), "missing column 'kernel'"),
        (lambda t: t.__setitem__("launch_id", t["launch_id"].astype(object).where(
            t.index != 0, 10**400)), "row 1: launch_id 1000"),
        (lambda t: t.__setitem__("cycles", t["cycles"].astype(object).where(
            t.index != 0, 10**400)), "row 1: cycles 1000"),
    ],
    ids=["negative-cycles", "zero-cycles", "nan-weight", "inf-weight", "negative-variance",
         "fractional-id", "repeated-launch", "no-kernel", "id-past-float", "cycles-past-float"],
)
def test_samples_csv_values_checked_before_any_figure(tmp_path: Path, edit, words) -> None:
    """``validate --sim FOLDER`` reports nothing from a ``samples.csv`` whose values no
    simulation gives: one line naming the file and row."""
    code, lines = _validate_folder(_edited_samples(tmp_path, edit), tmp_path)
    assert code == 2 and "samples.csv" in lines[0] and words in lines[0], lines
    check_no_output(tmp_path / "rep")
