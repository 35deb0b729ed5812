"""Sampled simulation in parallel: wall and CPU time for 1, 2 and 4 local workers and on a
local Dask cluster, each estimate against the one-process run's.

    python benchmarks/simulate_parallel.py --work /tmp/par [--workers 1,2,4] [--dask 2] \\
        [--case transformer] [--case NAME=BUNDLE,PLAN,PROGRAM ARGS...]

Every run is the user's command, ``hilsim simulate PLAN --card SM7_QV100 -O ... --warmup
auto --profile BUNDLE -o OUT --force [--workers N | --scheduler ADDRESS] -- PROGRAM``, timed
from outside (wall) and read back from its ``simulate.json`` (simulator CPU seconds and
their split, processes, the estimate, per-sample cycles in ``samples.csv``). The Dask
cluster is started as a user starts one: ``dask scheduler --scheduler-file F`` and ``dask
worker --scheduler-file F --nworkers N --nthreads 1`` processes on this machine.

Cases: ``transformer`` is the shipped example (``analyzer/examples/simulated-v100``: the
STEM plan of ``transformer_step --steps 36``, 1,044 launches, on its reference bundle),
run on its skip path (``--launches {launches}``: chunks cost no fast-forward); a Rodinia
app is given as ``NAME=BUNDLE,PLAN,PROGRAM ARGS`` (e.g. from ``rodinia_loop.py``'s work
folder), run with fast-forward. Printed: one row per case and setting: wall seconds (and
its ratio to one process), CPU seconds, CPU per part (fast-forward / warm-up / sample /
host), processes, the samples per chunk of each split run (with the launches it carried),
the estimate's difference from the one-process run's, and how many
samples' cycles differ from it (with the largest relative difference).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

REDUCED = ("-gpgpu_n_clusters=4", "-gpgpu_kernel_launch_latency=0", "-gpgpu_perf_sim_memcpy=0")
HILSIM = (sys.executable, "-m", "hilsim.cli.main")
EXAMPLE = Path(__file__).resolve().parents[1] / "analyzer" / "examples" / "simulated-v100"


def transformer_case(work: Path) -> tuple[Path, Path, list[str]]:
    from hilsim.simmodel.gpgpusim.workloads import build_transformer_step

    program = build_transformer_step(work / "bin" / "transformer_step")
    return (EXAMPLE / "reference.bundle", EXAMPLE / "plans" / "stem.json",
            [str(program), "--steps", "36", "--launches", "{launches}"])


def simulate(bundle: Path, plan: Path, program: list[str], out: Path,
             extra: list[str]) -> dict[str, Any]:
    """One ``hilsim simulate``; its summary, samples and the wall seconds it took."""
    argv = [*HILSIM, "simulate", str(plan), "--card", "SM7_QV100",
            *(a for o in REDUCED for a in ("-O", o)), "--warmup", "auto", "--profile",
            str(bundle), "-o", str(out), "--force", *extra, "--", *program]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[3:5])} {extra}: {done.stderr.strip()[-400:]}")
    summary = json.loads((out / "simulate.json").read_text())
    samples = pd.read_csv(out / "samples.csv")
    return {"wall_s": wall, "summary": summary,
            "cycles": dict(zip(samples["launch_id"], samples["cycles"], strict=True))}


def start_dask(workers: int, folder: Path) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and ``workers`` single-thread worker processes; the address."""
    info = folder / "scheduler.json"
    info.unlink(missing_ok=True)
    procs = [subprocess.Popen(["dask", "scheduler", "--scheduler-file", str(info), "--port",
                               "0", "--dashboard-address", ":0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for _ in range(100):
        if info.exists():
            break
        time.sleep(0.2)
    procs.append(subprocess.Popen(["dask", "worker", "--scheduler-file", str(info),
                                   "--nworkers", str(workers), "--nthreads", "1",
                                   "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    address = json.loads(info.read_text())["address"]
    from distributed import Client

    with Client(address) as client:
        client.wait_for_workers(workers, timeout=60)
    return address, procs


def _split(summary: dict[str, Any]) -> str:
    """Samples per chunk of each run that was split (carried launches in brackets)."""
    out = []
    for run in summary.get("runs", []):
        chunks = run.get("chunks")
        if chunks:
            carried = chunks.get("carried_per_chunk") or [0] * chunks["chunks"]
            out.append(f"{run['run']} " + "/".join(
                f"{n}" + (f"[{c}]" if c else "") for n, c in zip(
                    chunks["samples_per_chunk"], carried, strict=True)))
    return ", ".join(out) or "-"


def row(case: str, setting: str, got: dict[str, Any], one: dict[str, Any]) -> str:
    s, base = got["summary"], one["summary"]
    parts = s.get("sim_cpu_parts") or {}
    differ = [k for k in one["cycles"] if got["cycles"].get(k) != one["cycles"][k]]
    worst = max((abs(got["cycles"][k] - one["cycles"][k]) / one["cycles"][k] for k in differ),
                default=0.0)
    moved = (s["estimate_cycles"] - base["estimate_cycles"]) / base["estimate_cycles"]
    return (f"| {case} | {setting} | {got['wall_s']:.0f} ({got['wall_s'] / one['wall_s']:.2f}x)"
            f" | {s['sim_cpu_s']:.0f} ({s['sim_cpu_s'] / base['sim_cpu_s']:.2f}x) | "
            f"{parts.get('fast_forward', 0):.0f} / {parts.get('warmup', 0):.0f} / "
            f"{parts.get('sample', 0):.0f} / {parts.get('host', 0):.0f} | "
            f"{s.get('processes', 1)} | {_split(s)} | "
            f"{100 * moved:+.3f}% | {len(differ)} of {len(one['cycles'])} "
            f"(max {100 * worst:.2f}%) |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--dask", type=int, default=2, help="Dask worker processes (0: none)")
    parser.add_argument("--case", action="append", default=None,
                        help="transformer, or NAME=BUNDLE,PLAN,PROGRAM ARGS")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="sim-parallel-"))
    work.mkdir(parents=True, exist_ok=True)
    cases: dict[str, tuple[Path, Path, list[str]]] = {}
    for spec in args.case or ["transformer"]:
        if spec == "transformer":
            cases[spec] = transformer_case(work)
            continue
        name, _, rest = spec.partition("=")
        bundle, plan, command = rest.split(",", 2)
        cases[name] = (Path(bundle), Path(plan), shlex.split(command))
    print("| case | setting | wall s (vs 1) | CPU s (vs 1) | CPU ff / warm-up / sample / host | "
          "processes | samples per chunk [carried] | estimate vs 1 | samples that differ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (bundle, plan, program) in cases.items():
        one = None
        for n in [int(w) for w in args.workers.split(",")]:
            got = simulate(bundle, plan, program, work / name / f"w{n}", ["--workers", str(n)])
            one = one or got
            print(row(name, f"{n} local worker(s)", got, one), flush=True)
        if args.dask and one is not None:
            address, procs = start_dask(args.dask, work)
            try:
                got = simulate(bundle, plan, program, work / name / "dask",
                               ["--scheduler", address])
                print(row(name, f"Dask, {args.dask} workers", got, one), flush=True)
            finally:
                for proc in reversed(procs):
                    proc.terminate()
                    proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
