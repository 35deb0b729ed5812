"""Whole commands against the STEM-AE reference implementation at ~1M and ~10M launches.

Usage:
    python benchmarks/stem_ae_whole.py --reference DIR [--repeat 12,120] [--workdir DIR]
                                       [--epsilon 0.05] [--keep]

This measures the ratio of *whole commands* (start-up, reading the file from disk,
planning) between the STEM+ROOT reference code (``ejchung0406/STEM-AE``, not vendored:
``--reference DIR`` or ``STEM_AE_REF=DIR``, any checkout holding
``figure7/sampling_methods/stem.py``) and hilsim, side by side in one run.

Input (generated once per size into ``--workdir``, not timed): the real CASIO launch
table of the quickstart (STEM Fig. 1: 85,217 launches, 6 kernels, real durations),
interleaved into launch order and repeated ``--repeat`` times (12: 1,022,604 launches;
120: 10,226,040), written as the ``nsys stats --report cuda_kern_exec_trace`` CSV the
reference reads (``results_ncu-example/NAME/default/nsys_NAME.csv``; timestamps laid
out back to back, one launch configuration per kernel).

Each row is one command in its own process, on that one file:

* **STEM-AE reference**: ``python stem_ae_whole.py --run-reference DIR WORKDIR NAME``,
  which imports the reference's ``figure7/sampling_methods/stem.py`` (without the
  package ``__init__``, which imports every other method) and calls its own entry point
  ``kernel_sample(suite, use_nsys_only=True, num_iter=1)`` on a one-workload suite, in the
  folder layout it expects: its ``read_csv`` + ``dur_map`` + ``cluster_recursive``
  (scikit-learn ``KMeans``) + one draw, at its fixed error bound of 5%.
* **hilsim plan CSV**: ``hilsim plan CSV -m stem -p epsilon=E -o plan.json``: the one
  command a user runs on the file the profiler wrote (no import step). This and the
  reference are the side-by-side pair: with ``--rounds R`` both run R times, alternating,
  the order swapped every round, the 1-minute load average recorded before each run.
* **hilsim import**: ``hilsim import CSV -o BUNDLE`` (the file to a bundle).
* **hilsim plan**: ``hilsim plan BUNDLE -m stem -p epsilon=E -o plan.json``.

Figures: wall seconds, CPU seconds (user + sys of the command's processes: on a shared
machine the comparable figure) and peak RSS of the process tree (sampled every 50 ms);
over rounds the minimum and the median (and the load averages seen). Ratios: reference /
this, in wall and in CPU seconds, of the medians. The plans written from the CSV and from
the bundle must hold the same clusters and samples (checked: the script exits non-zero
otherwise). Before the first run both sides' sources are byte-compiled, as an installed
package has them (a machine with ``PYTHONDONTWRITEBYTECODE`` set would otherwise compile
every module from source in every run, on both sides).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_50m import timed as bench_50m_timed  # noqa: E402  (one process timer)

GIB = 1024**3
HEADER = (
    "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
    "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,Kernel Name\n"
)


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def write_kern_exec_csv(path: Path, repeat: int, chunk: int = 1_000_000) -> int:
    """The CASIO table repeated ``repeat`` times as a ``cuda_kern_exec_trace`` CSV.

    Returns the launch count. Written to a temporary name, then renamed.
    """
    from casio_scaled import casio_launch_pattern

    codes, durations, names = casio_launch_pattern()
    codes, durations = np.tile(codes, repeat), np.tile(durations, repeat)
    n = len(codes)
    api_dur, queue, gap = 4200, 2800, 1500
    step = durations + api_dur + queue + gap
    api_start = 1_000_000_000 + np.concatenate(([0], np.cumsum(step[:-1])))
    kernel_start = api_start + api_dur + queue
    total = kernel_start + durations - api_start
    tails = pa.array(
        [f'4242,4242,0,cudaLaunchKernel,{80 * (k + 1)} 1 1,256 1 1,"{name}"\n'
         for k, name in enumerate(names)]
    )
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(HEADER.encode())
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            rows = pc.binary_join_element_wise(
                _text(api_start[lo:hi]),
                pa.scalar(str(api_dur)),
                _text(api_start[lo:hi] + api_dur),
                pa.scalar(str(queue)),
                _text(kernel_start[lo:hi]),
                _text(durations[lo:hi]),
                _text(total[lo:hi]),
                tails.take(pa.array(codes[lo:hi])),
                ",",
            )
            offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)
            offsets = offsets[rows.offset : rows.offset + len(rows) + 1]
            out.write(memoryview(rows.buffers()[2])[offsets[0] : offsets[-1]])
    os.replace(tmp, path)
    return n


def timed(argv: list[str], log: Path, cwd: Path | None = None) -> dict[str, float]:
    """Wall s, CPU s and peak tree RSS (GiB) of one command (bench_50m's timer) and the
    1-minute load average just before it; exits on failure with the log's last line."""
    load = os.getloadavg()[0]
    wall, cpu, peak_gib, _, code = bench_50m_timed(argv, log, cwd=cwd)
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:]
        raise SystemExit(f"{' '.join(argv[:3])}: exit {code}: {tail[0] if tail else ''} ({log})")
    return {"wall": wall, "cpu": cpu, "peak": peak_gib, "load": load}


def summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """Minimum and median of each figure over ``runs`` (the median is what ratios use),
    the largest peak and the load averages seen."""
    out: dict[str, Any] = {"runs": runs, "n": len(runs)}
    for key in ("wall", "cpu"):
        values = sorted(r[key] for r in runs)
        out[key] = float(np.median(values))
        out[f"{key}_min"] = values[0]
    out["peak"] = max(r["peak"] for r in runs)
    out["load"] = [round(r["load"], 1) for r in runs]
    return out


def same_plan(first: Path, second: Path) -> bool:
    """Do two plan files hold the same clusters, samples and parameters (their source
    paths differ: a CSV and a bundle)?"""
    a, b = (json.loads(p.read_text()) for p in (first, second))
    keys = ("method", "params", "clusters", "samples", "notes")
    return all(a.get(k) == b.get(k) for k in keys) and (
        {k: v for k, v in a["source"].items() if k != "path"}
        == {k: v for k, v in b["source"].items() if k != "path"}
    )


def wait_for_memory(need_gib: float, limit_s: float = 1800.0) -> None:
    """Wait (up to ``limit_s``) until ``need_gib`` GiB are available: the machine is shared."""
    import psutil

    t0 = time.perf_counter()
    while (free := psutil.virtual_memory().available / GIB) < need_gib:
        if time.perf_counter() - t0 > limit_s:
            print(f"  only {free:.1f} GiB available after {limit_s:.0f} s; running anyway")
            return
        print(f"  waiting: {free:.1f} GiB available, {need_gib:.1f} GiB needed", flush=True)
        time.sleep(30)


def run_reference(reference: Path, workdir: Path, name: str) -> None:
    """The reference's own ``kernel_sample`` on one workload (runs in a child process)."""
    methods_dir = reference / "figure7" / "sampling_methods"
    if not (methods_dir / "stem.py").is_file():
        raise SystemExit(f"{reference}: no figure7/sampling_methods/stem.py "
                         "(not a STEM-AE checkout)")
    package = types.ModuleType("sampling_methods")
    package.__path__ = [str(methods_dir)]
    sys.modules["sampling_methods"] = package
    stem = importlib.import_module("sampling_methods.stem")
    suite = types.ModuleType("suites.bench")
    suite.names = [name]
    suite.subdirs = {name: ["default"]}
    os.chdir(workdir)
    rows = stem.kernel_sample(suite, use_nsys_only=True, num_iter=1, verbose=False)
    for row in rows:
        print(f"reference result: speedup {row[5]:.6g} error {row[6]:.6g}")


def compile_bytecode(reference: Path) -> str:
    """Byte-compile hilsim's sources and the reference's, as an installed package has them.

    A wheel install writes ``.pyc`` files and an editable one writes them on first import,
    unless ``PYTHONDONTWRITEBYTECODE`` is set (as on some shared machines): each command
    would then compile its modules from source on every run. Both sides are compiled the
    same way so that neither pays it."""
    import compileall  # (only the benchmark needs it)

    folders = [ROOT / name for name in ("hilsim", "analyzer", "simmodel", "microbench", "agent")]
    folders.append(reference / "figure7" / "sampling_methods")
    done = [compileall.compile_dir(str(folder), quiet=1) for folder in folders if folder.is_dir()]
    return f"bytecode compiled for hilsim and the reference ({'ok' if all(done) else 'errors'})"


def hilsim_argv() -> list[str]:
    """The ``hilsim`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("hilsim")
    found = str(script) if script.is_file() else shutil.which("hilsim")
    if not found:
        raise SystemExit("stem_ae_whole.py: no `hilsim` command (pip install -e .)")
    return [found]


def one_size(reference: Path, workdir: Path, repeat: int, epsilon: float, rounds: int = 1) -> dict:
    name = f"casio-x{repeat}"
    folder = workdir / "results_ncu-example" / name / "default"
    folder.mkdir(parents=True, exist_ok=True)
    csv = folder / f"nsys_{name}.csv"
    if not csv.is_file():
        t0 = time.perf_counter()
        n = write_kern_exec_csv(csv, repeat)
        print(f"  wrote {csv} ({n:,} launches, {csv.stat().st_size / 1e9:.2f} GB) "
              f"in {time.perf_counter() - t0:.1f} s", flush=True)
    n = 85_217 * repeat
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    bundle, plan = workdir / f"{name}.bundle", workdir / f"{name}.plan.json"
    out: dict = {"name": name, "launches": n, "csv_gb": csv.stat().st_size / 1e9}
    csv_plan = workdir / f"{name}.csv-plan.json"
    commands = {
        "reference": [sys.executable, str(Path(__file__).resolve()), "--run-reference",
                      str(reference), str(workdir), name],
        "plan_csv": [*hilsim_argv(), "plan", str(csv), "-m", "stem", "-p",
                     f"epsilon={epsilon}", "-o", str(csv_plan)],
    }
    runs: dict[str, list[dict[str, float]]] = {"reference": [], "plan_csv": []}
    for round_ in range(rounds):
        order = ["reference", "plan_csv"] if round_ % 2 == 0 else ["plan_csv", "reference"]
        for key in order:
            wait_for_memory(1.0 + 1.2 * n / 1e6)  # the reference: ~1.1 GiB per M launches
            fig = timed(commands[key], logs / f"{name}.{key}.log")
            runs[key].append(fig)
            print(f"  round {round_ + 1} {key}: {fig['wall']:.2f} s wall, {fig['cpu']:.2f} s "
                  f"CPU, {fig['peak']:.2f} GiB (load {fig['load']:.1f})", flush=True)
    out["reference"], out["plan_csv"] = summary(runs["reference"]), summary(runs["plan_csv"])
    ref_log = (logs / f"{name}.reference.log").read_text()
    out["reference_result"] = next(
        (ln for ln in ref_log.splitlines() if ln.startswith("reference result")), "?"
    )
    said = (logs / f"{name}.plan_csv.log").read_text().strip().splitlines()
    print(f"  reference: {out['reference_result']}; hilsim: {said[-1] if said else ''}",
          flush=True)
    wait_for_memory(1.0 + 0.6 * n / 1e6)
    out["import"] = timed(
        [*hilsim_argv(), "import", str(csv), "-o", str(bundle), "--force"],
        logs / f"{name}.import.log",
    )
    print(f"  hilsim import: {out['import']['wall']:.1f} s, {out['import']['peak']:.2f} GiB",
          flush=True)
    out["plan"] = timed(
        [*hilsim_argv(), "plan", str(bundle), "-m", "stem", "-p", f"epsilon={epsilon}",
         "-o", str(plan)],
        logs / f"{name}.plan.log",
    )
    said = (logs / f"{name}.plan.log").read_text().strip().splitlines()
    print(f"  hilsim plan: {out['plan']['wall']:.2f} s, {out['plan']['peak']:.2f} GiB "
          f"({said[-1] if said else ''})", flush=True)
    out["same_plan"] = same_plan(csv_plan, plan)
    if not out["same_plan"]:
        print(f"  PLANS DIFFER: {csv_plan} (from the CSV) and {plan} (from the bundle)")
    return out


def ratio_text(ref: dict[str, float], ours: dict[str, float]) -> str:
    """Reference / ours, in wall time and (in parentheses) in CPU time."""
    return f"{ref['wall'] / ours['wall']:.1f}x ({ref['cpu'] / ours['cpu']:.1f}x)"


def table(results: list[dict]) -> str:
    lines = [
        "| launches | command | runs | wall s (min / median) | CPU s (min / median) "
        "| peak RSS GiB | load1 before each run | reference / this: wall (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ref, one, imp, plan = r["reference"], r["plan_csv"], r["import"], r["plan"]
        both = {"wall": imp["wall"] + plan["wall"], "cpu": imp["cpu"] + plan["cpu"],
                "peak": max(imp["peak"], plan["peak"]), "load": imp["load"]}
        for label, fig, ratio in (
            ("STEM-AE reference `kernel_sample` (stem.py) on the CSV", ref, ""),
            ("hilsim `plan -m stem trace.csv` (one command)", one, ratio_text(ref, one)),
            ("hilsim `import`", imp, ""),
            ("hilsim `plan -m stem run.bundle`", plan, ratio_text(ref, plan)),
            ("hilsim `import` + `plan -m stem run.bundle`", both, ratio_text(ref, both)),
        ):
            n = fig.get("n", 1)
            wall = (f"{fig['wall_min']:.2f} / {fig['wall']:.2f}" if "wall_min" in fig
                    else f"{fig['wall']:.2f}")
            cpu = (f"{fig['cpu_min']:.2f} / {fig['cpu']:.2f}" if "cpu_min" in fig
                   else f"{fig['cpu']:.2f}")
            load = fig["load"] if isinstance(fig["load"], list) else [round(fig["load"], 1)]
            lines.append(f"| {r['launches']:,} | {label} | {n} | {wall} | {cpu} "
                         f"| {fig['peak']:.2f} | {', '.join(f'{x:g}' for x in load)} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=os.environ.get("STEM_AE_REF"))
    parser.add_argument("--repeat", default="12,120",
                        help="CASIO table repetitions, comma-separated (12: 1.02M, 120: 10.2M)")
    parser.add_argument("--workdir", type=Path, help="inputs and outputs (default: a temp dir)")
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--keep", action="store_true", help="keep the temporary workdir")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--rounds", default="3",
                        help="runs of the side-by-side pair (reference, plan CSV), alternating; "
                        "one number, or one per --repeat size (e.g. 3,2)")
    parser.add_argument("--run-reference", nargs=3, metavar=("DIR", "WORKDIR", "NAME"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_reference:
        ref, wd, name = args.run_reference
        run_reference(Path(ref), Path(wd), name)
        return
    if not args.reference:
        raise SystemExit("stem_ae_whole.py: --reference DIR (or STEM_AE_REF) is required")
    repeats = [int(x) for x in args.repeat.split(",") if x.strip()]
    rounds = [int(x) for x in args.rounds.split(",") if x.strip()]
    if len(rounds) == 1:
        rounds *= len(repeats)
    if len(rounds) != len(repeats) or min(rounds) < 1:
        raise SystemExit("stem_ae_whole.py: --rounds: one number >= 1, or one per --repeat size")
    with contextlib.ExitStack() as stack:
        if args.workdir:
            workdir = args.workdir.resolve()
            workdir.mkdir(parents=True, exist_ok=True)
        elif args.keep:
            workdir = Path(tempfile.mkdtemp(prefix="stem-ae-whole-"))
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stem-ae-")))
        print(f"workdir {workdir}; reference {args.reference}; epsilon {args.epsilon:g} "
              f"(the reference's fixed 5%); {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        print(compile_bytecode(args.reference.resolve()), flush=True)
        results = []
        for repeat, n_rounds in zip(repeats, rounds, strict=True):
            print(f"\n{85_217 * repeat:,} launches (CASIO x{repeat}):", flush=True)
            results.append(one_size(args.reference.resolve(), workdir, repeat, args.epsilon,
                                    n_rounds))
        print()
        print(table(results))
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
        if args.json:
            from hilsim.core.files import write_text_atomic

            write_text_atomic(args.json, json.dumps(results, indent=1) + "\n")
        if not all(r["same_plan"] for r in results):
            raise SystemExit("stem_ae_whole.py: the plans from the CSV and the bundle differ")


if __name__ == "__main__":
    main()
