"""Fuzz tier: the surfaces added since the first attack, each fed generated or mutated
inputs built from real ones.

* source tarballs through the extractor: member lists of nasty names, every member type,
  links to anything, PAX records; nothing may appear outside the destination, no link
  inside it, and a refusal is one :class:`HilsimError`;
* GPGPU-Sim logs (the real ``transformer_step`` log) through ``hilsim import``: byte
  mutations and edits of the statistics values, launch marks, region marks and options;
* sweep specs (TOML) through the spec check and the task list (no cluster is started);
* ``dse --vary`` values through ``hilsim dse``;
* input paths that are FIFOs, devices or folders, output paths that are devices, FIFOs,
  links or under a file, through the commands that read and write them.

Same promise as the rest of the tier (:mod:`tests.fuzz.promise`), same bounds.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tarfile
import tempfile
from functools import cache
from pathlib import Path

import pytest
from hilsim.analyzer.sweep import build_tasks, parse_spec
from hilsim.simmodel.gpgpusim.extract import safe_extract
from hypothesis import example, given
from hypothesis import strategies as st

from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs
from tests.fuzz.promise import check_bundle, check_no_output, run_cli
from tests.fuzz.strategies import NASTY_TEXT, byte_mutations, fuzz_settings, numbers

pytestmark = pytest.mark.fuzz

EXAMPLE = inputs.SIMULATED_V100

# ------------------------------------------------------------------------ tarballs

_NAMES = ("top", "top/a", "top/b.txt", "top/lib/x.so", "top/lib", "a", "..", "../x", "/abs",
          "top/../../x", "top/./c", "", ".", "top//d", "x" * 300, "top/\u00e9", "top/a/b/c")
_TYPES = (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
          tarfile.FIFOTYPE, tarfile.CHRTYPE)
_PAX = {"size": ("0", "-1", "1e20", "100000000000000000000", "x"),
        "mtime": ("nan", "inf", "-1", "1e300", "1700000000.5"),
        "path": ("../p", "/p", "top/p")}


@st.composite
def tar_members(draw):
    members = []
    for _ in range(draw(st.integers(1, 8))):
        info = tarfile.TarInfo(draw(st.sampled_from(_NAMES)))
        info.type = draw(st.sampled_from(_TYPES))
        data = None
        if info.type == tarfile.REGTYPE:
            data = draw(st.binary(max_size=64))
        elif info.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
            info.linkname = draw(st.sampled_from(_NAMES + ("/etc/passwd", "../../../x")))
        if draw(st.booleans()):
            key = draw(st.sampled_from(sorted(_PAX)))
            info.pax_headers = {key: draw(st.sampled_from(_PAX[key]))}
        info.mode = draw(st.sampled_from([0o644, 0o755, 0o4777, 0o000]))
        members.append((info, data))
    return members


def _tarball(path: Path, members) -> Path | None:
    try:
        return inputs.tarball(path, members)
    except (ValueError, tarfile.TarError, UnicodeError):
        return None  # tarfile cannot write it: nothing to extract


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_mode, p.lstat().st_size)
            for p in folder.rglob("*")}


@fuzz_settings(80)
@given(tar_members())
def test_fuzz_tarball_extraction(members):
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-tar-") as folder:
        outer = Path(folder)
        (outer / "flag").write_text("secret")
        (outer / "x").write_text("keep")
        tarball = _tarball(outer / "src-667834c.tar.gz", members)
        if tarball is None:
            return
        dest = outer / "nest" / "dest"
        dest.mkdir(parents=True)
        before = {k: v for k, v in _snapshot(outer).items() if not k.startswith("nest")}
        try:
            safe_extract(tarball, dest)
        except HilsimError as exc:
            assert "\n" not in str(exc)
        after = {k: v for k, v in _snapshot(outer).items() if not k.startswith("nest")}
        assert after == before
        assert sorted(p.name for p in (outer / "nest").iterdir()) == ["dest"]
        for path in dest.rglob("*"):
            mode = path.lstat().st_mode
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode), path


# ----------------------------------------------------------------- simulator logs

_KEYS = ("gpu_sim_cycle", "gpu_tot_sim_cycle", "gpu_sim_insn", "gpu_tot_sim_insn",
         "kernel_launch_uid", "L2_total_cache_accesses", "gpgpu_n_tot_w_icount",
         "total dram reads")


@cache
def _log_text() -> str:
    return inputs.GPGPUSIM_LOG.read_text(encoding="utf-8")


@st.composite
def edited_logs(draw) -> bytes:
    text = _log_text()
    if draw(st.integers(0, 3)) == 0:
        return draw(byte_mutations(text.encode()))
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["value", "mark", "region", "clock", "block"]))
        value = draw(st.one_of(st.sampled_from(NASTY_TEXT), numbers.map(str)))
        value = value.replace("\n", " ") or "0"
        if what == "value":
            key = draw(st.sampled_from(_KEYS))
            matches = list(re.finditer(rf"^{re.escape(key)}\s*=\s*\S+", text, flags=re.M))
            if matches:
                m = matches[draw(st.integers(0, len(matches) - 1))]
                text = text[: m.start()] + f"{key} = {value}" + text[m.end():]
        elif what == "mark":
            k = draw(st.integers(0, 28))
            text = text.replace(f"hilsim-launch {k} ", f"hilsim-launch {value} ", 1)
        elif what == "region":
            depth = draw(st.sampled_from([1, 70, 2000]))
            pushes = "".join(f"hilsim-region push {value}\n" for _ in range(depth))
            text = text.replace("hilsim-region push step0\n", pushes, 1)
        elif what == "clock":
            text = re.sub(r"^-gpgpu_clock_domains \S+", f"-gpgpu_clock_domains {value}", text,
                          flags=re.M)
        else:
            start = text.index("hilsim-launch 3 ")
            end = text.index("hilsim-launch 4 ")
            text = text[:end] + text[start:end] + text[end:]
    return text.encode("utf-8", "surrogatepass")


@fuzz_settings(70)
@given(edited_logs())
def test_fuzz_gpgpusim_log_import(data):
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-log-") as folder:
        log = Path(folder) / "sim.log"
        log.write_bytes(data)
        output = Path(folder) / "out"
        code, _, _ = run_cli(["import", str(log), "--format", "gpgpusim-log", "-o",
                              str(output)], len(data))
        if code == 2:
            check_no_output(output)
        else:
            check_bundle(output)


# -------------------------------------------------------------------- sweep specs

_SPEC_VALUES = st.one_of(
    st.none(), st.booleans(), numbers, st.text(max_size=12), st.sampled_from(NASTY_TEXT),
    st.lists(st.one_of(numbers, st.text(max_size=4)), max_size=3),
    st.sampled_from(["results.parquet", "summary.csv", "sim", "x" * 300, "a/b", ".h",
                     "=1+1", "w$\\frac{$", 10**9, [2**63], [2**64], [-1], []]),
)


@fuzz_settings(120)
@given(st.data())
def test_fuzz_sweep_specs(data):
    workload = {"path": str(EXAMPLE / "reference.bundle")}
    method = {"name": "random", "params": {"fraction": 0.05}}
    spec = {"seeds": 2, "workloads": [workload], "methods": [method]}
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(["top", "workload", "method", "params"]))
        value = data.draw(_SPEC_VALUES)
        if where == "top":
            spec[data.draw(st.sampled_from(["seeds", "simulate", "cards", "workloads",
                                            "methods", "other"]))] = value
        elif where == "workload":
            workload[data.draw(st.sampled_from(["name", "path", "holdout", "example"]))] = value
        elif where == "method":
            method[data.draw(st.sampled_from(["name", "params"]))] = value
        else:
            method["params"] = {data.draw(st.sampled_from(["fraction", "seed", "n_samples",
                                                           "budget_ns", "min_samples"])): value}
    try:
        parsed = parse_spec(spec, Path("spec.toml"))
    except HilsimError as exc:
        assert "\n" not in str(exc)
        return
    assert 1 <= len(parsed.seeds) <= 10_000
    tasks = build_tasks(parsed)
    assert len({t.key for t in tasks}) == len(tasks)


# ---------------------------------------------------------------------- dse --vary

@fuzz_settings(30)
@given(st.sampled_from(["l2_size", "sm_clock", "dram_clock", "sm_count", "l1_latency",
                        "dram_bandwidth", "schedulers", "nope"]),
       st.one_of(numbers.map(str), st.sampled_from(NASTY_TEXT)), st.booleans())
def test_fuzz_dse_variations(name, value, scale):
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-dse-") as folder:
        output = Path(folder) / "dse.json"
        code, _, _ = run_cli(["dse", str(EXAMPLE / "reference.bundle"), "--plan",
                              str(EXAMPLE / "plans" / "stem.json"), "--config",
                              str(EXAMPLE / "tuned-timing.json"), "--vary",
                              f"{name}={'x' if scale else ''}{value}", "-o", str(output)], 0)
        if code == 2:
            check_no_output(output)
        else:
            import json

            json.loads(output.read_text(), parse_constant=pytest.fail)


# ------------------------------------------------------------- warm-up specs and tune inputs

_WARMUP_PARTS = ("none", "l2-fill", "cold-bound", "bracket", "auto", "preceding:",
                 "PRECEDING:", "preceding", "+", " ", ":")


_WARMUP_K = st.one_of(st.sampled_from(NASTY_TEXT), st.integers(-5, 10**30).map(str),
                     st.sampled_from(["1e9", "\u00b2", "\u0663", "9" * 5001, "1000000000"]))


@fuzz_settings(40)
@given(st.lists(st.one_of(st.sampled_from(_WARMUP_PARTS), _WARMUP_K,
                          _WARMUP_K.map(lambda k: "preceding:" + k)), min_size=1, max_size=4))
@example(["preceding:\u00b2"])  # the attack's reproducers, always run
@example(["preceding:", "9" * 5001])
@example(["l2-fill+", "preceding:1000000000"])
def test_fuzz_warmup_specs(parts):
    """``export --warmup SPEC``: a list of the plan's samples and their windows, or one
    line; the windows never cost more than the launches they cover."""
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-warm-") as folder:
        output = Path(folder) / "list.g"
        code, _, _ = run_cli(["export", str(EXAMPLE / "plans" / "stem.json"), "--warmup",
                              "".join(parts), "-o", str(output)], 0)
        if code == 2:
            check_no_output(output)


_FACT_KEYS = ("sm_count", "multiProcessorCount", "clockRate", "max_sm_clock_mhz",
              "warp_size", "memoryBusWidth", "l2CacheSize", "max_mem_clock_mhz",
              "compute_capability", "major", "minor", "memory_type", "regs_per_sm")
_ROW_FIELDS = ("value", "samples", "spread", "valid", "unit", "name")


@fuzz_settings(40)
@given(st.data(), st.booleans())
def test_fuzz_tune_inputs(data, on_simulator):
    """``tune`` (and ``--on-simulator``, up to where it looks for the simulator) on edited
    device facts and measurement rows of a real microbench file: a card whose facts a GPU
    can have, or one line."""
    import json
    from unittest import mock

    from hilsim.simmodel.tuner import search

    document = json.loads(inputs.MICROBENCH_QV100.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        value = data.draw(st.one_of(numbers, st.sampled_from(NASTY_TEXT), st.none(),
                                    st.booleans(), st.lists(st.integers(0, 9), max_size=2)))
        if data.draw(st.booleans()):
            document["device"][data.draw(st.sampled_from(_FACT_KEYS))] = value
        else:
            row = data.draw(st.integers(0, len(document["measurements"]) - 1))
            document["measurements"][row][data.draw(st.sampled_from(_ROW_FIELDS))] = value
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-tune-") as folder:
        bench = Path(folder) / "bench.json"
        try:
            bench.write_text(json.dumps(document))
        except ValueError:
            return  # (an integer json cannot write)
        output = Path(folder) / "card"
        extra = ["--on-simulator"] if on_simulator else []
        with mock.patch.object(search, "find_build", lambda: None):
            code, lines, _ = run_cli(["tune", str(bench), *extra, "-o", str(output)],
                                     bench.stat().st_size)
        if code == 2:
            check_no_output(output)
        else:
            assert not on_simulator  # no build: the search never starts
            card = (output / "gpgpusim.config").read_text()
            found = re.search(r"-gpgpu_clock_domains\s+([0-9.:]+)", card)
            assert found and all(float(x) >= 1 for x in found.group(1).split(":")), found
            clusters = re.search(r"-gpgpu_n_clusters\s+(\d+)", card)
            assert clusters and 1 <= int(clusters.group(1)) <= 4096, clusters


# ------------------------------------------------------------- gzip inputs

@fuzz_settings(40)
@given(st.lists(st.tuples(st.integers(0, 3 << 20), st.sampled_from([b"\0", b"ab\n", b"x"])),
                min_size=1, max_size=3),
       st.sampled_from(["", "truncate", "garbage", "zeros"]))
def test_fuzz_gzip_members(members, damage):
    """Any run of gzip members (each possibly past one inflation block), damaged or not:
    the members' bytes joined, or one :class:`HilsimError`; never a hang."""
    import gzip

    from hilsim.core import inputs as core_inputs

    want = b"".join(unit * (size // len(unit)) for size, unit in members)
    data = b"".join(gzip.compress(unit * (size // len(unit)), compresslevel=1)
                    for size, unit in members)
    if damage == "truncate":
        data = data[: max(len(data) - 9, 1)]
    elif damage == "garbage":
        data += b"garbage"
    elif damage == "zeros":
        data += b"\0" * 64
    try:
        got = core_inputs.inflate(data, "fuzz.log.gz")
    except HilsimError as exc:
        assert "\n" not in str(exc) and damage in ("truncate", "garbage", "") , exc
        return
    assert got == want and damage in ("", "zeros")


# ------------------------------------------------------------- a simulate folder's samples

_SAMPLE_COLUMNS = ("launch_id", "weight", "kernel", "cycles", "state_variance", "dram_reads")


@fuzz_settings(12)
@given(st.data())
def test_fuzz_simulate_folder_samples(data):
    """``validate --sim FOLDER`` on a ``samples.csv`` with edited cells (or rows dropped
    or repeated): a report whose simulated figures are finite, or one line."""
    import json

    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-samples-") as folder:
        sim = Path(folder) / "sim"
        shutil.copytree(EXAMPLE / "sims" / "stem-reference", sim)
        lines = (sim / "samples.csv").read_text().splitlines()
        header = lines[0].split(",")
        for _ in range(data.draw(st.integers(1, 3))):
            row = data.draw(st.integers(1, len(lines) - 1))
            if data.draw(st.integers(0, 4)) == 0:
                lines.insert(row, lines[row])  # a launch repeated
                continue
            cells = lines[row].split(",")
            column = header.index(data.draw(st.sampled_from(_SAMPLE_COLUMNS)))
            cells[column] = data.draw(st.one_of(numbers.map(str), st.sampled_from(NASTY_TEXT)))
            lines[row] = ",".join(c.replace(",", ";").replace("\n", " ") for c in cells)
        (sim / "samples.csv").write_text("\n".join(lines) + "\n")
        output = Path(folder) / "rep"
        code, _, _ = run_cli(["validate", "--silicon", str(EXAMPLE / "reference.bundle"),
                              "--plan", str(EXAMPLE / "plans" / "stem.json"), "--sim",
                              str(sim), "-o", str(output)], 0)
        if code == 2:
            check_no_output(output)
        else:
            text = "".join(p.read_text() for p in output.rglob("*.json"))
            json.loads(text or "{}", parse_constant=pytest.fail)


# ------------------------------------------------------------- input and output paths

def _special(kind: str, path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(path.parent / "elsewhere")
    elif kind == "under-file":
        path.parent.joinpath("FILE").write_text("x")
        return path.parent / "FILE" / "sub"
    return path


_READERS = {
    "evaluate --plan": lambda bad, out: ["evaluate", EXAMPLE / "reference.bundle", "--plan",
                                         bad, "-o", out],
    "validate --sim": lambda bad, out: ["validate", "--silicon", EXAMPLE / "reference.bundle",
                                        "--plan", EXAMPLE / "plans" / "stem.json", "--sim", bad,
                                        "-o", out],
    "dse --config": lambda bad, out: ["dse", EXAMPLE / "reference.bundle", "--plan",
                                      EXAMPLE / "plans" / "stem.json", "--config", bad,
                                      "--vary", "l2_size=x2", "-o", out],
    "pkp --cta-trace": lambda bad, out: ["pkp", EXAMPLE / "reference.bundle", "--plan",
                                         EXAMPLE / "plans" / "stem.json", "--cta-trace", bad,
                                         "-o", out],
    "plan profile": lambda bad, out: ["plan", bad, "-m", "random", "-o", out],
    "sweep spec": lambda bad, out: ["sweep", bad, "-o", out],
}


@fuzz_settings(24)
@given(st.sampled_from(sorted(_READERS)), st.sampled_from(["fifo", "folder", "/dev/zero",
                                                           "/dev/null", "missing"]))
def test_fuzz_input_paths(surface, kind):
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-in-") as folder:
        bad = Path(kind) if kind.startswith("/") else _special(kind, Path(folder) / "input")
        output = Path(folder) / "out"
        code, _, _ = run_cli([str(a) for a in _READERS[surface](bad, output)], 0)
        assert code == 2
        check_no_output(output)


@fuzz_settings(12)
@given(st.sampled_from(["fifo", "folder", "symlink", "under-file"]),
       st.sampled_from(["evaluate", "plan"]))
def test_fuzz_output_paths(kind, command):
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-out-") as folder:
        target = _special(kind, Path(folder) / "out.json")
        before = _snapshot(Path(folder))
        argv = (["evaluate", EXAMPLE / "reference.bundle", "--plan",
                 EXAMPLE / "plans" / "stem.json", "-o", target] if command == "evaluate" else
                ["plan", EXAMPLE / "reference.bundle", "-m", "random", "-o", target])
        code, _, _ = run_cli([str(a) for a in argv], 0)
        assert code == 2
        assert _snapshot(Path(folder)) == before
