"""Regenerate the model-correlation set: kernels simulated on shipped cards.

Usage::

    nice -n 10 python benchmarks/model_correlation_set.py --card SM7_QV100 \
        [--out tests/data/model-correlation] [--ts-steps 2]

Builds ``simmodel/gpgpusim/workloads/calib_kernels.cu`` (300 parameterised launches of 13
kernels: FMA loops, streaming, strided loads, pointer chase, divergence, shared-memory
bank conflicts, atomics, SFU chains, low-occupancy dependent chains, reductions,
shared-memory atomics, divergent loads, transposes) and ``transformer_step.cu``
(``--ts-steps`` steps, 29 launches each), runs both fully (with GPGPU-Sim's PTX line
statistics, from which :mod:`hilsim.simmodel.gpgpusim.ptxlines` adds the long-latency
instruction counts), on ``--card`` with the reduced
options below, parses the logs with
:mod:`hilsim.simmodel.gpgpusim.logprofile` (Nsight Compute counter names,
``docs/gpgpusim-metrics.md``) and writes ``<card>.csv`` (one row per launch: program,
launch id, kernel, launch configuration, counters, ``cycles``, card facts) plus
``<card>.json`` (command, commit, build key, CPU seconds). Prints the CPU time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
from hilsim.simmodel.correlation import table_from_log
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.compile import compile_cuda
from hilsim.simmodel.gpgpusim.listrun import run_on_card
from hilsim.simmodel.gpgpusim.ptxlines import add_long_latency
from hilsim.simmodel.gpgpusim.workloads import TRANSFORMER_STEP

from hilsim.core.files import write_text_atomic

ROOT = Path(__file__).resolve().parent.parent
CALIB = ROOT / "simmodel" / "gpgpusim" / "workloads" / "calib_kernels.cu"
OUT = ROOT / "tests" / "data" / "model-correlation"
#: 4 SMs, no 5,000-cycle launch latency, functional copies (the model gets the same: see
#: hilsim.simmodel.correlation.card_timing)
OPTIONS = {
    "-gpgpu_n_clusters": "4",
    "-gpgpu_kernel_launch_latency": "0",
    "-gpgpu_perf_sim_memcpy": "0",
}
#: per-PTX-line executed counts (no effect on timing): the long-latency instruction counts
LINE_STATS = {"-enable_ptx_file_line_stats": "1"}


def _commit() -> str:
    got = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=False)
    return got.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--ts-steps", type=int, default=2)
    parser.add_argument("--calib-from", type=int, default=0,
                        help="run calib_kernels launches from this index on only ...")
    parser.add_argument("--calib-log-before", type=Path,
                        help="... taking the earlier ones from this previous run's sim.log")
    parser.add_argument("--from-logs", nargs="+", metavar="PROGRAM=LOG",
                        help="build the table from kept sim.log files instead of simulating "
                             "(several logs of one program: separate runs, in order)")
    parser.add_argument("--cpu-s", type=float, help="with --from-logs: the runs' CPU seconds")
    parser.add_argument("--add-line-stats", nargs="+", metavar="PROGRAM=PTX,STATS",
                        help="add the long-latency counts of a run's PTX file and "
                             "-ptx_line_stats_filename file to the existing <card>.csv")
    args = parser.parse_args()
    if args.add_line_stats:
        path = args.out / f"{args.card}.csv"
        table = pd.read_csv(path)
        for item in args.add_line_stats:
            prog, _, files = item.partition("=")
            ptx, _, stats = files.partition(",")
            rows = table["program"] == prog
            added = add_long_latency(table[rows], Path(ptx), Path(stats))
            for col in added.columns:
                table.loc[rows, col] = added[col]
        write_text_atomic(path, table.to_csv(index=False))
        meta_path = args.out / f"{args.card}.json"
        meta = json.loads(meta_path.read_text())
        meta["line_stats"] = {"added_by": "benchmarks/model_correlation_set.py "
                              "--add-line-stats", "commit": _commit()}
        write_text_atomic(meta_path, json.dumps(meta, indent=1) + "\n")
        print(f"{args.card}: long-latency counts added -> {path}")
        return
    if args.from_logs:
        frames = []
        for item in args.from_logs:
            prog, _, log = item.partition("=")
            text = Path(log).read_text(errors="replace")
            if "hilsim-workload done" not in text:
                # a run stopped early (time budget): keep the kernels that finished
                text = text[: text.rfind("hilsim-launch ")]
            part, facts = table_from_log(text, log)
            part.insert(0, "program", prog)
            part["card"] = args.card
            for key in ("core_clock_mhz", "sm_count", "simulator_version"):
                part[key] = facts.get(key)
            frames.append(part)
        table = pd.concat(frames, ignore_index=True)
        # a launch in two runs (overlapping launch lists): the first run's
        table = table.drop_duplicates(["program", "launch_id"], keep="first")
        table = table.sort_values(["program", "launch_id"], kind="stable").reset_index(drop=True)
        table["cycles"] = table["gpu__cycles_elapsed.max"]
        build = find_build()
        _write(args, table, {"from_logs": args.from_logs, "cpu_s_total": args.cpu_s},
               build.key if build else None)
        return
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build: run `hilsim gpgpusim setup`")
    frames = []
    cpu = {}
    with tempfile.TemporaryDirectory(prefix="model-corr-") as tmp:
        t = Path(tmp)
        programs = {
            "calib_kernels": [str(compile_cuda(CALIB, t / "calib", extra_flags=("-O2",)))],
            "transformer_step": [
                str(compile_cuda(TRANSFORMER_STEP, t / "ts", extra_flags=("-O2",))),
                "--steps", str(args.ts_steps),
            ],
        }
        if args.calib_from:
            n = int(subprocess.run([programs["calib_kernels"][0], "--list"], check=True,
                                   capture_output=True, text=True).stdout.count("\n"))
            (t / "rest.txt").write_text(" ".join(map(str, range(args.calib_from, n))))
            programs["calib_kernels"] += ["--launches", str(t / "rest.txt")]
        for prog, argv in programs.items():
            stats = t / f"lines-{prog}.txt"
            run = run_on_card(argv, args.card, t / f"run-{prog}",
                              {**OPTIONS, **LINE_STATS, "-ptx_line_stats_filename": str(stats)})
            cpu[prog] = round(run.cpu_s, 1)
            texts = [run.log_path.read_text(encoding="utf-8", errors="replace")]
            if prog == "calib_kernels" and args.calib_log_before is not None:
                # a separate simulation: its running totals are differenced on their own
                before = args.calib_log_before.read_text(encoding="utf-8", errors="replace")
                texts.insert(0, before[: before.find(f"hilsim-launch {args.calib_from} ")])
            parts = []
            for text in texts:
                part, facts = table_from_log(text, str(run.log_path))
                parts.append(part)
            df = pd.concat(parts, ignore_index=True)
            if args.calib_log_before is None:
                ptx = sorted(run.run_dir.glob("*.ptx"))
                df = pd.concat([df, add_long_latency(df, ptx[0], stats)], axis=1)
            df.insert(0, "program", prog)
            df["card"] = args.card
            for key, value in facts.items():
                if isinstance(value, (int, float, str)) and key in (
                    "core_clock_mhz", "sm_count", "simulator_version"
                ):
                    df[key] = value
            frames.append(df)
            print(f"{args.card} {prog}: {len(df)} launches, CPU {run.cpu_s:.1f} s, "
                  f"wall {run.wall_s:.1f} s", flush=True)
    table = pd.concat(frames, ignore_index=True)
    table["cycles"] = table["gpu__cycles_elapsed.max"]
    _write(args, table, {"cpu_s": cpu}, build.key)


def _write(args: argparse.Namespace, table: pd.DataFrame, extra: dict, key: str | None) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / f"{args.card}.csv", table.to_csv(index=False))
    meta = {
        "card": args.card,
        "options": OPTIONS,
        "ts_steps": args.ts_steps,
        "commit": _commit(),
        "build_key": key,
        "launches": len(table),
        "command": f"nice -n 10 python benchmarks/model_correlation_set.py --card {args.card} "
                   f"--ts-steps {args.ts_steps}",
        **extra,
    }
    write_text_atomic(args.out / f"{args.card}.json", json.dumps(meta, indent=1) + "\n")
    print(f"{args.card}: {len(table)} launches -> {args.out}")

if __name__ == "__main__":
    main()
