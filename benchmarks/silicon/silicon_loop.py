"""The silicon loop: native programs profiled on a GPU, sampled, simulated on the card
tuned from that GPU's microbenchmarks, and compared with silicon (runs here, no GPU).

    python benchmarks/silicon/silicon_loop.py --silicon DIR --card CARD --work WORK \\
        [--programs transformer_step,gaussian] [--seeds 5] [--rodinia-bin BIN] \\
        [--json rows.json]

``DIR`` holds the bundles the kit's ``loop`` stage wrote on the GPU (``loop-NAME``: every
launch under the CUPTI injection profiler, ncu counters for every launch with
``--cache-control none``); ``CARD`` is the folder ``hilsim tune --on-simulator`` wrote
(its ``gpgpusim.config``) or a shipped card; the programs and their arguments are
``native/programs.tsv`` (the same on both sides). The simulator's builds are made here
(``-cudart shared``): the project's workloads into ``WORK/bin``, the Rodinia apps from
``--rodinia-bin`` (``python benchmarks/rodinia.py build --out BIN``).

For each program, every step the user's command (``python -m hilsim.cli.main``):

1. ``hilsim agent profile --backend gpgpusim --card CARD --keep-raw``: the full simulation
   of every launch on the tuned card (its log is what ``validate --sim-full`` reads);
2. ``hilsim plan SILICON -m stem -p seed=S`` for each seed (the plan is made on the silicon
   profile, as a user makes it), and ``-m pka`` where the bundle has PKA's counters;
3. ``hilsim simulate PLAN --card CARD --warmup auto --profile SILICON``: the sampled
   simulation with fast-forward, its DRAM reads placing each sample between warm and cold;
4. ``hilsim validate --silicon SILICON --plan STEM0 --sim STEM0 --sim-full LOG``: the
   report (HTML + JSON), configuration and sampling error apart, per kernel.

Printed per program (and written with ``--json``): launches, silicon time, the full
simulation's time at the card's clock, the **configuration error** (full simulation vs
silicon), the **sampling error** (sampled vs full simulation, same card; mean and 90th
percentile of |error| over seeds, with the coverage of the 95% interval), the **total
error** (sampled simulation vs silicon), and the CPU time of each simulation. Errors in
time: the GPU's and the card's clocks differ. Nothing here is timed by the test suite.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: the Rodinia loop's steps
sys.path.insert(0, str(HERE / "native"))

from programs import NativeProgram, programs  # noqa: E402
from rodinia_loop import clopper_pearson, collect_rows, hilsim, profile, sampled  # noqa: E402

from hilsim.core.errors import HilsimError  # noqa: E402


def simulator_build(program: NativeProgram, work: Path, rodinia_bin: Path | None) -> Path:
    """The program built for the simulator (``-cudart shared``)."""
    if program.kind == "rodinia":
        if rodinia_bin is None:
            raise HilsimError(f"{program.name}: Rodinia apps need --rodinia-bin "
                              "(python benchmarks/rodinia.py build --out BIN)")
        exe = rodinia_bin / program.name
        if not exe.is_file():
            raise HilsimError(f"{exe}: not built (benchmarks/rodinia.py build --apps "
                              f"{program.name})")
        return exe
    from hilsim.simmodel.gpgpusim import workloads

    exe = work / "bin" / program.name
    if not exe.is_file():
        exe.parent.mkdir(parents=True, exist_ok=True)
        getattr(workloads, f"build_{program.name}")(exe)
    return exe


def silicon_time_ns(bundle: Path) -> tuple[int, float]:
    """(launches, summed kernel time in ns) of a silicon bundle."""
    import pyarrow.parquet as pq

    durations = pq.read_table(bundle / "launches.parquet", columns=["duration_ns"]).column(0)
    return len(durations), float(np.sum(durations.to_numpy()))


def has_pka_counters(bundle: Path) -> bool:
    """Whether the bundle's counters hold PKA's features (the instruction mix)."""
    import pyarrow.parquet as pq

    path = bundle / "metrics.parquet"
    return path.exists() and "smsp__inst_executed.sum" in pq.read_schema(path).names


def loop_program(program: NativeProgram, silicon: Path, card: str, work: Path, seeds: int,
                 rodinia_bin: Path | None) -> dict[str, Any]:
    """Full simulation, plans, sampled simulations and the report of one program."""
    folder = work / program.name
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    exe = simulator_build(program, work, rodinia_bin)
    n_silicon, silicon_ns = silicon_time_ns(silicon)
    full = profile(exe, program.argv, card, (), folder / "full.bundle", folder / "full-raw")
    if full["launches"] != n_silicon:
        raise HilsimError(f"{program.name}: {n_silicon} launches on silicon, "
                          f"{full['launches']} simulated: not the same run")
    runs = []
    for seed in range(seeds):
        plan = folder / f"stem{seed}.plan.json"
        if not plan.exists():
            hilsim("plan", str(silicon), "-m", "stem", "-p", f"seed={seed}", "-o", str(plan))
        runs.append(sampled(plan, exe, program.argv, card, full, silicon,
                            folder / f"stem{seed}", card_options=()))
    row: dict[str, Any] = {"program": program.name, "argv": " ".join(program.argv),
                           "card": card, "launches": n_silicon, "silicon_ns": silicon_ns,
                           "full_ns": full["ns"], "full_cycles": full["cycles"],
                           "full_cpu_s": full["cpu_s"]}
    if has_pka_counters(silicon):
        pka_plan = folder / "pka.plan.json"
        if not pka_plan.exists():
            hilsim("plan", str(silicon), "-m", "pka", "-o", str(pka_plan))
        pka = sampled(pka_plan, exe, program.argv, card, full, silicon, folder / "pka",
                      card_options=())
        row["pka_sampling_error"] = pka["error"]
        row["pka_total_error"] = (pka["estimate_ns"] - silicon_ns) / silicon_ns
    report = folder / "report"
    if not report.with_suffix(".json").exists():
        hilsim("validate", "--silicon", str(silicon), "--plan", str(folder / "stem0.plan.json"),
               "--sim", str(folder / "stem0"), "--sim-full", str(folder / "full-raw" / "sim.log"),
               "-o", str(report))
    sampling = np.array([r["error"] for r in runs])
    total = np.array([(r["estimate_ns"] - silicon_ns) / silicon_ns for r in runs])
    covered = int(sum(r["covered"] for r in runs))
    row.update({
        "configuration_error": (full["ns"] - silicon_ns) / silicon_ns,
        "sampling_errors": sampling.tolist(),
        "sampling_mean_abs": float(np.mean(np.abs(sampling))),
        "sampling_p90_abs": float(np.percentile(np.abs(sampling), 90)),
        "covered": covered, "seeds": seeds, "coverage_ci": clopper_pearson(covered, seeds),
        "total_errors": total.tolist(), "total_mean": float(np.mean(total)),
        "sampled_cpu_s": float(np.mean([r["cpu_s"] for r in runs])),
        "samples": float(np.mean([r["samples"] for r in runs])),
        "data_checks": sorted({str(r["data_check"].get("reference")) for r in runs}),
        "report": str(report.with_suffix(".html")),
        "wall_s": round(time.monotonic() - started, 1),
    })
    return row


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The table of ``docs/silicon.md`` (markdown)."""
    print("| program | launches | silicon ms | full sim ms | configuration error | "
          "sampling error mean / p90 abs | coverage [95% CI] | total error (mean) | "
          "full / sampled CPU-s | samples |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["coverage_ci"]
        print(f"| {r['program']} `{r['argv']}` | {r['launches']} | "
              f"{r['silicon_ns'] / 1e6:.3f} | {r['full_ns'] / 1e6:.3f} | "
              f"{100 * r['configuration_error']:+.1f}% | "
              f"{100 * r['sampling_mean_abs']:.2f}% / {100 * r['sampling_p90_abs']:.2f}% | "
              f"{r['covered']}/{r['seeds']} [{100 * lo:.0f}-{100 * hi:.0f}%] | "
              f"{100 * r['total_mean']:+.1f}% | {r['full_cpu_s']:.0f} / "
              f"{r['sampled_cpu_s']:.0f} | {r['samples']:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silicon", type=Path, required=True,
                        help="the folder holding the loop stage's loop-NAME bundles")
    parser.add_argument("--card", required=True,
                        help="the tuned card's gpgpusim.config (or a shipped card)")
    parser.add_argument("--work", type=Path, required=True,
                        help="simulations, plans and reports (reused when present)")
    parser.add_argument("--programs", default="", help="default: every program of the list")
    parser.add_argument("--list", type=Path, default=None,
                        help="another programs.tsv (default: native/programs.tsv)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rodinia-bin", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    card = args.card
    if Path(card).is_dir():
        card = str(Path(card) / "gpgpusim.config")
    wanted = [p for p in args.programs.split(",") if p]
    listed = [p for p in (programs(args.list) if args.list else programs())
              if not wanted or p.name in wanted]
    unknown = sorted(set(wanted) - {p.name for p in listed})
    if unknown:
        parser.error(f"not in programs.tsv: {', '.join(unknown)}")
    args.work.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for program in listed:
        bundle = args.silicon / f"loop-{program.name}"
        if not (bundle / "manifest.json").is_file():
            print(f"{program.name}: no silicon bundle {bundle}", file=sys.stderr)
            continue
        jobs[program.name] = functools.partial(loop_program, program, bundle, card, args.work,
                                               args.seeds, args.rodinia_bin)
    rows = collect_rows(jobs, args.json)
    print_rows(rows)
    return 0 if rows else 2


if __name__ == "__main__":
    raise SystemExit(main())
