"""Rodinia 3.1 (CUDA) on the simulated card: build the apps unmodified, run them full,
fast-forwarded and functional, and check that their results agree.

    python benchmarks/rodinia.py build --source ../shared/vendor/rodinia-cuda-9c10d3e.tar.gz \\
        --out /tmp/rodinia                         # or --git URL --commit SHA
    python benchmarks/rodinia.py table --bin /tmp/rodinia --runs /tmp/rodinia-runs \\
        [--apps gaussian,lud] [--card SM7_QV100]   # the per-app table (docs/gpgpusim.md)

**Build.** The tarball (``safe_extract``: nothing lands outside the folder) or a clone at
a pinned commit; each app's sources compiled unmodified with the toolchain's nvcc <= 11.x,
``-cudart shared -arch=sm_70 -O2`` (:func:`hilsim.simmodel.gpgpusim.compile.compile_cuda`),
our own command line instead of the app's Makefile (those name ``sm_13``/``sm_20`` and
``/usr/local/cuda``). Only the switches Rodinia itself defines to print or write a result
are set (``-DTRACEBACK``, ``-DBENCH_PRINT``, ``-DOUTPUT``, ``-DGPU``/``-DCPU``).

**Sizes** (:data:`APPS`): each full run on the reduced QV100 (4 SMs,
``REDUCED_QV100``) takes at most a few CPU-minutes, with as many launches as the app's
structure gives at that size.

**Table.** Per app, three runs on the card: *full* (every launch in performance mode, the
unpatched behaviour), *sampled* (:data:`SAMPLE_LAUNCHES` launches spread over the run in
performance mode, the rest functional) and *functional* (every launch functional), each
with copy digests; then the app's CPU reference where it has one, run natively. Printed:
launches, distinct kernels, CPU seconds of each run (``RUSAGE_CHILDREN``), and whether the
result (copy digests, result lines, output files; :mod:`hilsim.simmodel.gpgpusim.datacheck`)
is identical to the full run's, naming the first divergence otherwise.

Apps not used: ``backprop`` (2 launches) and ``lavaMD`` (1 launch) leave nothing to sample;
``bfs`` and ``srad_v1`` read input files the suite does not ship (a graph, a PGM image);
``hybridsort`` includes ``GL/glew.h``, absent here; ``particlefilter`` seeds its random
numbers with ``time(0)``, so two runs never compute the same result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.build import find_build, git_checkout
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.compile import compile_cuda
from hilsim.simmodel.gpgpusim.datacheck import find_divergences, program_outputs
from hilsim.simmodel.gpgpusim.extract import safe_extract
from hilsim.simmodel.gpgpusim.fastforward import fast_forward_env, run_fast_forward
from hilsim.simmodel.gpgpusim.run import run_program
from hilsim.simmodel.gpgpusim.workloads import REDUCED_QV100

from hilsim.core.errors import HilsimError

#: launches of a sampled run (spread evenly over the program's launches)
SAMPLE_LAUNCHES = 5
#: the folder of the CUDA apps inside the source tree
CUDA_DIR = "cuda"


@dataclass(frozen=True)
class RodiniaApp:
    """One Rodinia app: how to build it, run it and read its result."""

    name: str
    sources: tuple[str, ...]  # relative to cuda/
    argv: tuple[str, ...]  # the chosen input size
    result: str  # how the app prints or writes its result, and how it is checked
    line_pattern: str | None = None  # the app's result lines in the log
    files: tuple[str, ...] = ()  # files it writes into the run folder
    includes: tuple[str, ...] = ()  # relative to cuda/
    defines: tuple[str, ...] = ()
    cpu_defines: tuple[str, ...] | None = None  # a CPU reference build, run natively
    cpu_pattern: str | None = None  # its result lines (default: line_pattern)
    verify_pattern: str | None = None  # lines of the app's own in-process check that fail
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


APPS: dict[str, RodiniaApp] = {
    "gaussian": RodiniaApp(
        "gaussian", ("gaussian/gaussian.cu",), ("-s", "80"),
        "prints no result (its printing is behind `verbose`, which no switch sets): the "
        "check is the digests of its three copies back (m, a, b after the elimination), "
        "which the host's back substitution reads; no CPU reference",
        ),
    "lud": RodiniaApp(
        "lud", ("lud/cuda/lud.cu", "lud/cuda/lud_kernel.cu", "lud/common/common.c"),
        ("-s", "256", "-v"),
        "-v: multiplies L and U on the host and prints each element that differs from the "
        "input by more than 1e-4 ('dismatch at'): its CPU reference; the result lines are "
        "those 'dismatch' lines",
        line_pattern=r"^dismatch at |^>>>Verify", includes=("lud/common",),
        verify_pattern=r"^dismatch at "),
    "nw": RodiniaApp(
        "nw", ("nw/needle.cu",), ("768", "10"),
        "-DTRACEBACK: writes the traceback of the score matrix to result.txt",
        files=("result.txt",), defines=("-DTRACEBACK",)),
    "pathfinder": RodiniaApp(
        "pathfinder", ("pathfinder/pathfinder.cu",), ("2048", "301", "2"),
        "-DBENCH_PRINT: prints the wall, then the first row and the result row "
        "(integers): the result lines",
        line_pattern=r"^(\d+ )+$", defines=("-DBENCH_PRINT",)),
    "srad_v2": RodiniaApp(
        "srad_v2", ("srad/srad_v2/srad.cu",), ("64", "64", "0", "31", "0", "31", "0.5", "32"),
        "-DOUTPUT: prints the diffused image (5 decimals): the result lines; its CPU "
        "reference is the -DCPU build (srad.h defines GPU too: run natively with no device "
        "visible, its CUDA calls fail and it prints the CPU loop's image)",
        line_pattern=r"^(-?\d+\.\d{5} )+$", defines=("-DGPU", "-DOUTPUT"),
        cpu_defines=("-DCPU", "-DOUTPUT")),
    "streamcluster": RodiniaApp(
        "streamcluster",
        ("streamcluster/streamcluster_cuda_cpu.cpp", "streamcluster/streamcluster_cuda.cu",
         "streamcluster/streamcluster_header.cu"),
        ("3", "6", "16", "128", "128", "30", "none", "output.txt", "1"),
        "writes the cluster centres (ids, weights, coordinates) to output.txt",
        files=("output.txt",)),
}


# --- build ---------------------------------------------------------------------------


def fetch_source(out: Path, tarball: Path | None = None, git_url: str | None = None,
                 commit: str | None = None) -> Path:
    """The Rodinia source tree (its folder holding ``cuda/``) under ``out``: the tarball
    extracted safely, or a clone of ``git_url`` at ``commit``."""


    if (tarball is None) == (git_url is None):
        raise HilsimError("rodinia: give exactly one of a tarball or a git url + commit")
    out.mkdir(parents=True, exist_ok=True)
    if tarball is not None:
        (out / "src").mkdir(exist_ok=True)
        tree = safe_extract(tarball, out / "src", lambda line: print(f"extract: {line}"))
    else:
        if not commit:
            raise HilsimError("rodinia: --git needs --commit (a pinned sha)")
        tree = out / "src" / "rodinia"
        tree.parent.mkdir(parents=True, exist_ok=True)
        git_checkout(git_url, commit, tree, out / "git.log")
    if not (tree / CUDA_DIR).is_dir():
        raise HilsimError(f"{tarball or git_url}: no {CUDA_DIR}/ folder: not the Rodinia suite")
    return tree


def build_app(app: RodiniaApp, tree: Path, out: Path, *, cpu: bool = False) -> Path:
    """Compile ``app`` (its CPU reference with ``cpu``) from ``tree`` into ``out``."""

    cuda = tree / CUDA_DIR
    defines = app.cpu_defines if cpu else app.defines
    flags = ["-O2", *(f"-I{cuda / inc}" for inc in app.includes), *(defines or ())]
    name = f"{app.name}_cpu" if cpu else app.name
    return compile_cuda([cuda / s for s in app.sources], out / name, extra_flags=flags)


def build_all(tree: Path, out: Path, names: Sequence[str]) -> dict[str, float]:
    """Build the named apps (and CPU references) into ``out``; seconds per app."""
    seconds = {}
    for name in names:
        started = time.monotonic()
        build_app(APPS[name], tree, out)
        if APPS[name].cpu_defines is not None:
            build_app(APPS[name], tree, out, cpu=True)
        seconds[name] = round(time.monotonic() - started, 1)
        print(f"built {name} in {seconds[name]} s")
    return seconds


# --- runs ----------------------------------------------------------------------------


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sample_ids(launches: int, count: int = SAMPLE_LAUNCHES) -> list[int]:
    """``count`` launch ids spread evenly over ``launches`` (first and last included)."""
    if launches <= count:
        return list(range(launches))
    step = (launches - 1) / (count - 1)
    return sorted({round(i * step) for i in range(count)})


def run_mode(app: RodiniaApp, exe: Path, run_dir: Path, card: Any, launch_ids: list[int] | None,
             timeout_s: float) -> dict[str, Any]:
    """One run of ``app``: ``launch_ids`` None = full, else fast-forwarded with that list.
    Returns CPU seconds, launches, the performance kernels' cycles and the outputs."""

    if run_dir.exists():
        shutil.rmtree(run_dir)
    argv = [str(exe), *app.argv]
    before = _cpu_children()
    if launch_ids is None:
        run = run_program(argv, card, run_dir, timeout_s=timeout_s,
                          env=fast_forward_env(None))
        performance = len(run.kernel_cycles())
    else:
        ff = run_fast_forward(argv, card, run_dir, launch_ids, timeout_s=timeout_s)
        run, performance = ff.run, len(ff.performance_uids)
    cpu = _cpu_children() - before
    outputs = program_outputs(run.stdout, run_dir, line_pattern=app.line_pattern,
                              files=app.files)
    cycles = sum(c for _k, c in run.kernel_cycles())
    return {"cpu_s": round(cpu, 2), "wall_s": round(run.wall_s, 2), "launches": outputs.launches,
            "performance": performance, "cycles": cycles, "outputs": outputs,
            "kernels": _kernels(run.stdout)}


def _kernels(log_text: str) -> int:
    return len(set(re.findall(r"^GPGPU-Sim PTX: pushing kernel '([^']*)'", log_text, re.M)))


def cpu_reference(app: RodiniaApp, exe: Path, run_dir: Path) -> tuple[str, ...]:
    """The result lines of the app's CPU reference build, run natively in ``run_dir`` with
    no CUDA device visible (a reference that also tries the GPU gets errors there)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([str(exe), *app.argv], cwd=run_dir, capture_output=True, text=True,
                          timeout=600, check=False,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    if proc.returncode != 0:
        raise RuntimeError(f"{exe}: exit {proc.returncode}: {proc.stderr[-300:]}")
    pattern = re.compile(app.cpu_pattern or app.line_pattern or "$^")
    return tuple(ln for ln in proc.stdout.splitlines() if pattern.search(ln))


def check_app(app: RodiniaApp, bindir: Path, runs: Path, card: Any,
              timeout_s: float) -> dict[str, Any]:
    """The three runs of ``app`` (and its CPU reference); the table row."""

    exe = bindir / app.name
    full = run_mode(app, exe, runs / app.name / "full", card, None, timeout_s)
    ids = sample_ids(full["launches"])
    sampled = run_mode(app, exe, runs / app.name / "sampled", card, ids, timeout_s)
    functional = run_mode(app, exe, runs / app.name / "functional", card, [], timeout_s)
    row: dict[str, Any] = {"app": app.name, "argv": " ".join(app.argv),
                           "launches": full["launches"], "kernels": full["kernels"],
                           "sample_ids": ids, "result": app.result}
    for label, run in (("full", full), ("sampled", sampled), ("functional", functional)):
        row[f"{label}_cpu_s"] = run["cpu_s"]
        row[f"{label}_cycles"] = run["cycles"]
        if label != "full":
            found = find_divergences(full["outputs"], run["outputs"], ("full run", f"{label} run"))
            row[f"{label}_same"] = "identical" if not found else "; ".join(found)
    out = full["outputs"]
    row["copies"] = len(out.digests)
    row["result_lines"] = len(out.lines)
    row["files"] = sorted(out.files)
    if app.verify_pattern is not None:
        failed = sum(1 for ln in out.lines if re.search(app.verify_pattern, ln))
        row["cpu_reference"] = f"own check (in the run): {failed} elements off"
    if app.cpu_defines is not None:
        ref = cpu_reference(app, bindir / f"{app.name}_cpu", runs / app.name / "cpu")
        diff = sum(1 for a, b in zip(ref, out.lines, strict=False) if a != b)
        row["cpu_reference"] = ("identical" if ref == out.lines else
                                f"{diff} of {len(out.lines)} result lines differ"
                                + (f" (CPU printed {len(ref)})" if len(ref) != len(out.lines)
                                   else ""))
    return row


def print_table(rows: list[dict[str, Any]], card_name: str) -> None:
    """The per-app table (markdown)."""
    print(f"\nRodinia on {card_name} (CPU seconds of the simulator process)\n")
    print("| app | input | launches | kernels | full CPU-s | sampled (launches) CPU-s | "
          "functional CPU-s | sampled = full | functional = full | CPU reference |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['app']} | `{r['argv']}` | {r['launches']} | {r['kernels']} | "
              f"{r['full_cpu_s']:.1f} | {r['sampled_cpu_s']:.1f} ({len(r['sample_ids'])}) | "
              f"{r['functional_cpu_s']:.1f} | {r['sampled_same']} | {r['functional_same']} | "
              f"{r.get('cpu_reference', '-')} |")
    print("\nWhat each app's result is and how it is checked (besides the copy digests):")
    for r in rows:
        print(f"- {r['app']}: {r['result']} ({r['copies']} copies to the host, "
              f"{r['result_lines']} result lines, files {r['files'] or '-'})")


def _card(name: str) -> Any:

    return card_config(name, find_build(), options=REDUCED_QV100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="extract or clone the suite and compile the apps")
    b.add_argument("--source", type=Path, help="rodinia-cuda-<sha>.tar.gz")
    b.add_argument("--git", help="a git URL of the suite (with --commit)")
    b.add_argument("--commit")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--apps", default=",".join(APPS))
    t = sub.add_parser("table", help="run each app full / sampled / functional and compare")
    t.add_argument("--bin", type=Path, required=True, help="the folder `build` wrote")
    t.add_argument("--runs", type=Path, default=None, help="run folders (default: a temp dir)")
    t.add_argument("--apps", default=",".join(APPS))
    t.add_argument("--card", default="SM7_QV100", help="with REDUCED_QV100's overrides")
    t.add_argument("--timeout", type=float, default=3600, help="wall seconds per run")
    t.add_argument("--json", type=Path, help="also write the rows here")
    r = sub.add_parser("report", help="print the table of rows written by `table --json`")
    r.add_argument("json", type=Path, nargs="+")
    r.add_argument("--card", default="SM7_QV100")
    args = parser.parse_args(argv)
    if args.command == "report":
        rows = [row for path in args.json for row in json.loads(path.read_text())]
        print_table(rows, f"{args.card} reduced (REDUCED_QV100 overrides)")
        return 0
    names = [a for a in args.apps.split(",") if a]
    unknown = [a for a in names if a not in APPS]
    if unknown:
        parser.error(f"unknown apps {unknown}; known: {', '.join(APPS)}")
    if args.command == "build":
        tree = fetch_source(args.out, args.source, args.git, args.commit)
        build_all(tree, args.out, names)
        return 0
    runs = args.runs or Path(tempfile.mkdtemp(prefix="rodinia-runs-"))
    card = _card(args.card)
    rows = []
    for name in names:
        rows.append(check_app(APPS[name], args.bin, runs, card, args.timeout))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "result"}), flush=True)
        if args.json:  # after each app: an interrupted table keeps the apps it finished
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print_table(rows, f"{args.card} reduced (REDUCED_QV100 overrides)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
