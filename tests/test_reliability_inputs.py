"""Every input a command names goes through one bounded reader: a FIFO, a device
(``/dev/zero``), a folder where a file is expected, a gzip bomb, a file past the size
guard, each ends in one line within seconds (never a hang, never memory until the
machine runs out)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

from hilsim.core import inputs as core_inputs
from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs
from tests.fuzz.promise import run_cli

EXAMPLE = inputs.SIMULATED_V100


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """Real inputs of every command, from the shipped simulated-V100 example."""
    folder = tmp_path_factory.mktemp("made")
    spec = folder / "spec.toml"
    spec.write_text(
        f'seeds = 1\n[[workloads]]\npath = "{EXAMPLE / "reference.bundle"}"\n'
        '[[methods]]\nname = "random"\nparams = { fraction = 0.05 }\n'
    )
    return {
        "bundle": EXAMPLE / "reference.bundle",
        "bundle_b": EXAMPLE / "rtx3070.bundle",
        "plan": EXAMPLE / "plans" / "stem.json",
        "timing": EXAMPLE / "tuned-timing.json",
        "log": EXAMPLE / "sims" / "stem-tuned" / "sampled.log.gz",
        "full_log": EXAMPLE / "logs" / "tuned-full.sim.log.gz",
        "pkp_run": EXAMPLE / "pkp-stem-tuned",
        "microbench": inputs.DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json",
        "spec": spec,
        "out": folder / "out",
    }


def _argv(surface: str, bad: Path, m: dict[str, Path]) -> list[str]:
    """``hilsim ...`` with ``bad`` in the place of the input ``surface``."""
    out = str(m["out"] / surface.replace(" ", "_"))
    b, plan, timing = str(m["bundle"]), str(m["plan"]), str(m["timing"])
    table = {
        "sweep spec": ["sweep", str(bad), "-o", out],
        "evaluate --plan": ["evaluate", b, "--plan", str(bad), "-o", out],
        "evaluate profile": ["evaluate", str(bad), "--plan", plan, "-o", out],
        "export plan": ["export", str(bad), "-o", out],
        "plan profile": ["plan", str(bad), "-m", "random", "-o", out],
        "dse --config": ["dse", b, "--plan", plan, "--config", str(bad), "--vary",
                         "l2_size=x2", "-o", out],
        "dse --plan": ["dse", b, "--plan", str(bad), "--config", timing, "--vary",
                       "l2_size=x2", "-o", out],
        "tune microbench": ["tune", str(bad), "-o", out],
        "tune --device-facts": ["tune", str(m["microbench"]), "--device-facts", str(bad),
                                "-o", out],
        "tune --accelsim-output": ["tune", "--accelsim-output", str(bad), "-o", out],
        "portability --plan": ["portability", "--plan", str(bad), "--source", b, "--bundle",
                               str(m["bundle_b"]), "-o", out],
        "portability --bundle": ["portability", "--plan", plan, "--source", b, "--bundle",
                                 str(bad), "-o", out],
        "pkp profile": ["pkp", str(bad), "--plan", plan, "--model", timing, "-o", out],
        "pkp --plan": ["pkp", b, "--plan", str(bad), "--model", timing, "-o", out],
        "pkp --model": ["pkp", b, "--plan", plan, "--model", str(bad), "-o", out],
        "pkp --cta-trace": ["pkp", b, "--plan", plan, "--cta-trace", str(bad), "-o", out],
        "pkp --gpgpusim-log": ["pkp", b, "--plan", plan, "--gpgpusim-log", str(bad), "-o", out],
        "validate --sim": ["validate", "--silicon", b, "--plan", plan, "--sim", str(bad),
                           "-o", out],
        "validate --sim-full": ["validate", "--silicon", b, "--plan", plan, "--sim",
                                str(m["log"]), "--sim-full", str(bad), "-o", out],
        "validate --model": ["validate", "--silicon", b, "--plan", plan, "--model", str(bad),
                             "-o", out],
        "validate --plan": ["validate", "--silicon", b, "--plan", str(bad), "--model", timing,
                            "-o", out],
        "import": ["import", str(bad), "-o", out],
    }
    return table[surface]


SURFACES = (
    "sweep spec", "evaluate --plan", "evaluate profile", "export plan", "plan profile",
    "dse --config", "dse --plan", "tune microbench", "tune --device-facts",
    "tune --accelsim-output", "portability --plan", "portability --bundle", "pkp profile",
    "pkp --plan", "pkp --model", "pkp --cta-trace", "pkp --gpgpusim-log", "validate --sim",
    "validate --sim-full", "validate --model", "validate --plan", "import",
)


@pytest.mark.parametrize("surface", SURFACES)
def test_a_fifo_is_refused_at_once(surface: str, made, tmp_path: Path) -> None:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    code, lines, _ = run_cli(_argv(surface, fifo, made), 0)
    assert code == 2 and "FIFO" in lines[0], (surface, lines)


@pytest.mark.parametrize("surface", ["sweep spec", "evaluate --plan", "dse --config",
                                     "tune --device-facts", "pkp --cta-trace",
                                     "validate --sim", "validate --sim-full", "pkp profile"])
def test_dev_zero_is_refused_at_once(surface: str, made) -> None:
    code, lines, _ = run_cli(_argv(surface, Path("/dev/zero"), made), 0)
    assert code == 2 and "character device" in lines[0], (surface, lines)


def test_sweep_workload_and_holdout_that_are_fifos(made, tmp_path: Path) -> None:
    fifo = tmp_path / "w.fifo"
    os.mkfifo(fifo)
    for key in ("path", "holdout"):
        spec = tmp_path / f"{key}.toml"
        path = fifo if key == "path" else made["bundle"]
        extra = f'holdout = "{fifo}"\n' if key == "holdout" else ""
        spec.write_text(f'seeds = 1\n[[workloads]]\nname = "w"\npath = "{path}"\n{extra}'
                        '[[methods]]\nname = "random"\n')
        code, lines, _ = run_cli(["sweep", str(spec), "-o", str(tmp_path / key)], 0)
        assert code == 2 and "FIFO" in lines[0] and f"workloads[0].{key}" in lines[0], lines
        assert not (tmp_path / key).exists()


def test_a_folder_where_a_file_is_expected(made, tmp_path: Path) -> None:
    for surface in ("evaluate --plan", "dse --config", "validate --sim-full", "sweep spec"):
        code, lines, _ = run_cli(_argv(surface, tmp_path, made), 0)
        assert code == 2 and "folder" in lines[0], (surface, lines)


def test_a_simulator_log_gzip_bomb_is_refused(made, tmp_path: Path) -> None:
    bomb = tmp_path / "sim.log.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (400 << 20), compresslevel=9))
    assert bomb.stat().st_size < 1 << 20
    for argv in (
        ["validate", "--silicon", str(made["bundle"]), "--plan", str(made["plan"]), "--sim",
         str(bomb), "-o", str(tmp_path / "v")],
        ["import", str(bomb), "--format", "gpgpusim-log", "-o", str(tmp_path / "i")],
    ):
        code, lines, grown = run_cli(argv, bomb.stat().st_size)
        assert code == 2 and "max_decompression_ratio" in lines[0], lines


def test_the_size_guard_of_a_whole_file_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HILSIM_MAX_INPUT_BYTES", "1000")
    big = tmp_path / "plan.json"
    big.write_text(" " * 1001 + "{}")
    with pytest.raises(HilsimError, match="max_input_bytes"):
        core_inputs.read_input(big)
    small = tmp_path / "small.json"
    small.write_text("{}")
    assert core_inputs.read_input(small) == b"{}"


def test_gzip_members_and_damage(tmp_path: Path) -> None:
    two = gzip.compress(b"a\n") + gzip.compress(b"b\n")
    assert core_inputs.inflate(two, "x") == b"a\nb\n"
    with pytest.raises(HilsimError, match="damaged gzip"):
        core_inputs.inflate(two[:-12], "x")
    with pytest.raises(HilsimError, match="damaged gzip"):
        core_inputs.inflate(gzip.compress(b"a") + b"garbage", "x")


def test_the_inflation_limits_hold_while_inflating(monkeypatch) -> None:
    """A bomb is refused holding about a block, not what it inflated to before the
    refusal (a 6 MB log once reached 1.35 GB); a file inflating past what is kept while
    counting is inflated again, whole and unchanged."""
    import tracemalloc

    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 65 KB -> 64 MiB
    monkeypatch.setattr(core_inputs, "_KEEP_WHILE_COUNTING", 2 << 20)
    tracemalloc.start()
    with pytest.raises(HilsimError, match="max_decompression_ratio"):
        core_inputs.inflate(bomb, "bomb.log.gz")  # cap: 200 x 65 KB + 1 MiB = 13.5 MiB
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 6 << 20, peak
    text = b"".join(b"kernel %d gpu_sim_cycle = %d\n" % (i, i * 7) for i in range(300_000))
    assert len(text) > 2 << 20
    assert core_inputs.inflate(gzip.compress(text) + gzip.compress(b"tail\n"), "x") == (
        text + b"tail\n")


def test_a_toml_spec_nested_2000_deep_is_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "deep.toml"
    spec.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")
    code, lines, _ = run_cli(["sweep", str(spec), "-o", str(tmp_path / "o")], 0)
    assert code == 2 and "nested too deeply" in lines[0], lines
    assert not (tmp_path / "o").exists()


def test_a_bad_utf8_byte_names_its_line(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_bytes(b"seeds = 1\n\xff = 2\n")
    code, lines, _ = run_cli(["sweep", str(spec), "-o", str(tmp_path / "o")], 0)
    assert code == 2 and "line 2: not UTF-8" in lines[0], lines


def test_shipped_logs_pass_the_guards() -> None:
    for path in sorted(EXAMPLE.rglob("*.log.gz")):
        assert core_inputs.read_maybe_gzip(path)  # real logs inflate 6-15x


def test_check_file_refuses_a_socket(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(HilsimError, match="is a socket"):
            core_inputs.open_input(path)
    shutil.rmtree(tmp_path, ignore_errors=True)
