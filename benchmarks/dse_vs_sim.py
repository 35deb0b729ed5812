"""``hilsim dse`` checked against re-simulation: direction and speedup error.

Usage::

    nice -n 5 python benchmarks/dse_vs_sim.py --simulate [--card SM7_QV100] [--jobs 2]
    python benchmarks/dse_vs_sim.py [--data tests/data/dse-vs-sim]

``--simulate``: picks a subset of the correlation set's launches (:func:`subset`: up to
``--per-kernel`` launches of every kernel, evenly spread over its cycle range, none over
``--max-cycles`` on the baseline), re-simulates it on the reduced card
(``benchmarks/model_correlation_set.py`` options) as is and under each variation of
:data:`hilsim.simmodel.dse_check.SIM_VARIATIONS` (GPGPU-Sim options from
:func:`hilsim.simmodel.dse_check.sim_options`), and writes ``<card>-baseline.csv``
(the subset's counters on the unvaried card), ``<card>-cycles.csv`` (variation,
program, launch_id, kernel, cycles, core clock) and ``<card>.json`` (options, CPU s).

Without ``--simulate`` it prints, per variation and overall: the simulated and the
model's speedup of the subset, the share of (launch, variation) and (kernel, variation)
pairs whose direction the model gets right (:func:`hilsim.simmodel.dse_check.direction_right`:
a simulated change under 1% counts as none), and the speedup error |model - sim| / sim.
The model predicts from the baseline counters with the variation applied to its config
(:func:`hilsim.simmodel.dse.vary`, cache capacities by the square-root rule).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from hilsim.simmodel import correlation as corr
from hilsim.simmodel import dse_check

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "dse-vs-sim"
CORR = ROOT / "tests" / "data" / "model-correlation"
CALIB = ROOT / "simmodel" / "gpgpusim" / "workloads" / "calib_kernels.cu"
#: as benchmarks/model_correlation_set.py: 4 SMs, no launch latency, functional copies
OPTIONS = {
    "-gpgpu_n_clusters": "4",
    "-gpgpu_kernel_launch_latency": "0",
    "-gpgpu_perf_sim_memcpy": "0",
}


def subset(table: pd.DataFrame, per_kernel: int, max_cycles: float) -> pd.DataFrame:
    """Up to ``per_kernel`` launches of each kernel, evenly spread by cycles (<= max; a
    kernel with none under the maximum keeps its shortest launch)."""
    keep = []
    for _, g in table.groupby(["program", "kernel"]):
        g = g.sort_values(["cycles", "launch_id"], kind="stable")
        g = g[g["cycles"] <= max_cycles] if (g["cycles"] <= max_cycles).any() else g.iloc[:1]
        pick = np.unique(np.round(np.linspace(0, len(g) - 1, min(per_kernel, len(g)))))
        keep.append(g.iloc[pick.astype(int)])
    return pd.concat(keep).sort_values(["program", "launch_id"]).reset_index(drop=True)


def _simulate(args: argparse.Namespace) -> None:
    from hilsim.simmodel.gpgpusim.build import find_build
    from hilsim.simmodel.gpgpusim.cards import card_config
    from hilsim.simmodel.gpgpusim.compile import compile_cuda
    from hilsim.simmodel.gpgpusim.listrun import run_on_card
    from hilsim.simmodel.gpgpusim.workloads import TRANSFORMER_STEP

    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build: run `hilsim gpgpusim setup`")
    table = corr.load_set(str(CORR / f"{args.card}.csv"))
    sub = subset(table, args.per_kernel, args.max_cycles)
    print(f"{args.card}: {len(sub)} launches of {sub['kernel'].nunique()} kernels, "
          f"{sub['cycles'].sum():,.0f} baseline cycles", flush=True)
    base_opts = card_config(args.card, build, OPTIONS).options()
    specs = ["baseline", *args.vary]
    args.data.mkdir(parents=True, exist_ok=True)
    rows: list[pd.DataFrame] = []
    meta: dict = {"card": args.card, "options": OPTIONS, "per_kernel": args.per_kernel,
                  "max_cycles": args.max_cycles, "launches": len(sub), "variations": {},
                  "command": "nice -n 5 python benchmarks/dse_vs_sim.py --simulate "
                             f"--card {args.card}", "build_key": build.key}
    with tempfile.TemporaryDirectory(prefix="dse-vs-sim-") as tmp:
        t = Path(tmp)
        progs = {
            "calib_kernels": [str(compile_cuda(CALIB, t / "calib", extra_flags=("-O2",)))],
            "transformer_step": [str(compile_cuda(TRANSFORMER_STEP, t / "ts",
                                                  extra_flags=("-O2",))), "--steps", "1"],
        }
        lists = {}
        for prog in progs:
            ids = sub.loc[sub["program"] == prog, "launch_id"].astype(int)
            lists[prog] = t / f"{prog}.txt"
            lists[prog].write_text(" ".join(map(str, ids)) + "\n")

        def one(spec: str) -> tuple[str, pd.DataFrame, dict]:
            extra = {} if spec == "baseline" else dse_check.sim_options(spec, base_opts)
            opts = {**OPTIONS, **extra}
            clock = float(card_config(args.card, build, opts).core_clock_mhz)
            parts, cpu = [], 0.0
            for prog, argv in progs.items():
                run = run_on_card([*argv, "--launches", str(lists[prog])], args.card,
                                  t / f"{spec}-{prog}".replace("=", "_"), opts)
                cpu += run.cpu_s
                part, _ = corr.table_from_log(run.log_path.read_text(errors="replace"),
                                              str(run.log_path))
                part.insert(0, "program", prog)
                parts.append(part)
            df = pd.concat(parts, ignore_index=True)
            df["variation"] = spec
            df["cycles"] = df["gpu__cycles_elapsed.max"]
            df["core_clock_mhz"] = clock
            df["card"] = args.card
            df["sm_count"] = int(opts["-gpgpu_n_clusters"])
            # children's CPU time is per process: only one run at a time measures its own
            return spec, df, {"options": extra,
                              "cpu_s": round(cpu, 1) if args.jobs == 1 else None}

        t0 = time.time()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for spec, df, info in pool.map(one, specs):
                rows.append(df)
                meta["variations"][spec] = info
                print(f"  {spec}: {len(df)} launches, CPU {info['cpu_s']} s "
                      f"(wall so far {time.time() - t0:.0f} s)", flush=True)
                if spec == "baseline":
                    write_text_atomic(args.data / f"{args.card}-baseline.csv",
                                      df.drop(columns=["variation"]).to_csv(index=False))
                cyc = pd.concat(rows, ignore_index=True)[
                    ["variation", "program", "launch_id", "kernel", "cycles", "core_clock_mhz"]]
                write_text_atomic(args.data / f"{args.card}-cycles.csv",
                                  cyc.to_csv(index=False))
                meta["cpu_s_total"] = (round(sum(v["cpu_s"] for v in meta["variations"].values()
                                                 ), 1) if args.jobs == 1 else None)
                write_text_atomic(args.data / f"{args.card}.json",
                                  json.dumps(meta, indent=1) + "\n")


def report(data: Path, card: str) -> dict[str, dict[str, float]]:
    """Print the comparison for one card; returns the launch- and kernel-pair summaries."""
    base = pd.read_csv(data / f"{card}-baseline.csv")
    cycles = pd.read_csv(data / f"{card}-cycles.csv")
    lp = dse_check.pairs(base, cycles, card)
    kp = dse_check.kernel_pairs(lp)
    print(f"== {card}: {len(lp.drop_duplicates(['program', 'launch_id']))} launches x "
          f"{lp['variation'].nunique()} variations, {kp['kernel'].nunique()} kernels")
    print(f"  {'variation':18s} {'sim':>7s} {'model':>7s}  {'launch dir':>10s} "
          f"{'kernel dir':>10s} {'speedup MAE':>11s}")
    for spec, g in lp.groupby("variation", sort=False):
        k = kp[kp["variation"] == spec]
        s_l, s_k = dse_check.summary(g), dse_check.summary(k)
        sim = g["sim_t0"].sum() / g["sim_t1"].sum()
        mod = g["model_t0"].sum() / g["model_t1"].sum()
        print(f"  {spec:18s} {sim:7.3f} {mod:7.3f}  {100 * s_l['direction_right']:9.1f}% "
              f"{100 * s_k['direction_right']:9.1f}% {100 * s_l['speedup_mae']:10.1f}%")
    out = {"launch": dse_check.summary(lp), "kernel": dse_check.summary(kp)}
    for what, s in out.items():
        print(f"  all {what} pairs: {s['pairs']}, direction right "
              f"{100 * s['direction_right']:.1f}%, speedup MAE {100 * s['speedup_mae']:.2f}% "
              f"(max {100 * s['speedup_max_err']:.1f}%)")
    wrong = kp[~dse_check.direction_right(kp["sim_speedup"], kp["model_speedup"])]
    if len(wrong):
        print("  kernel pairs with the wrong direction:")
        for r in wrong.itertuples():
            print(f"    {r.variation:16s} {r.kernel:14s} sim {r.sim_speedup:.3f} "
                  f"model {r.model_speedup:.3f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("--card", default="SM7_QV100")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--vary", nargs="+", default=list(dse_check.SIM_VARIATIONS))
    parser.add_argument("--per-kernel", type=int, default=10)
    parser.add_argument("--max-cycles", type=float, default=12000)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    try:
        if args.simulate:
            _simulate(args)
        report(args.data, args.card)
    except HilsimError as exc:
        raise SystemExit(f"dse_vs_sim: {exc}") from None


if __name__ == "__main__":
    main()
