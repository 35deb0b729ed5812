"""What a functional launch costs against a performance one, per card and program.

    python benchmarks/fastforward_cost.py --rodinia-bin /tmp/rodinia \\
        [--cards QV100,H100,RTX3070] [--programs transformer_step,pipeline_step,nw,...]

Each program runs twice per card: every launch in performance mode (no launch list: the
unpatched behaviour) and every launch functionally (an empty launch list, simulator patch
0002), on the card with ``REDUCED_QV100``'s overrides (4 SMs, no kernel launch latency,
functional host->device copies). Printed per (program, card): launches, CPU seconds of the
simulator process (``RUSAGE_CHILDREN``) of each run, per launch, and their ratio. Both runs
include the same start-up (the simulator reads the program's PTX and runs ptxas), so the
ratio is a lower bound of the per-launch ratio; the ``perf - func`` column is the cost
fast-forward saves per launch it runs functionally.

Programs: the shipped ``transformer_step --steps 1`` (29 launches, inputs that do not flow)
and ``pipeline_step --steps 6`` (42 launches, data flowing from kernel to kernel), and
Rodinia apps built by ``benchmarks/rodinia.py build`` at the smaller inputs of
:data:`RODINIA_COST_ARGV` (the ratio, not the size, is measured here).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.fastforward import fast_forward_env, run_fast_forward
from hilsim.simmodel.gpgpusim.run import run_program
from hilsim.simmodel.gpgpusim.workloads import (
    REDUCED_QV100,
    build_pipeline_step,
    build_transformer_step,
)

#: the cards: a shipped (or project) card with the reduced overrides
CARDS = {"QV100": "SM7_QV100", "H100": "SM90_H100", "RTX3070": "SM86_RTX3070"}
#: smaller inputs of the Rodinia apps for this measurement (``rodinia.py`` has the table's)
RODINIA_COST_ARGV: dict[str, tuple[str, ...]] = {
    "gaussian": ("-s", "48"),
    "nw": ("256", "10"),
    "pathfinder": ("1024", "61", "2"),
    "srad_v2": ("64", "64", "0", "31", "0", "31", "0.5", "15"),
    "lud": ("-s", "128", "-v"),
    "streamcluster": ("3", "5", "4", "128", "128", "20", "none", "output.txt", "1"),
}


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def programs(names: list[str], rodinia_bin: Path | None, work: Path) -> dict[str, list[str]]:
    """argv per program name (the shipped workloads compiled into ``work``)."""

    out: dict[str, list[str]] = {}
    for name in names:
        if name == "transformer_step":
            out[name] = [str(build_transformer_step(work / "ts")), "--steps", "1"]
        elif name == "pipeline_step":
            out[name] = [str(build_pipeline_step(work / "ps")), "--steps", "6"]
        elif name in RODINIA_COST_ARGV:
            if rodinia_bin is None:
                raise SystemExit(f"{name}: needs --rodinia-bin (benchmarks/rodinia.py build)")
            out[name] = [str(rodinia_bin / name), *RODINIA_COST_ARGV[name]]
        else:
            raise SystemExit(f"unknown program {name}")
    return out


def measure(argv: list[str], card: Any, run_dir: Path) -> dict[str, float]:
    """CPU seconds of the all-performance and the all-functional run, and the launches."""

    before = _cpu_children()
    full = run_program(argv, card, run_dir / "perf", env=fast_forward_env(None),
                       timeout_s=3600)
    perf_s = _cpu_children() - before
    before = _cpu_children()
    func = run_fast_forward(argv, card, run_dir / "func", [], timeout_s=3600)
    func_s = _cpu_children() - before
    launches = func.launches
    if len(full.kernel_cycles()) > launches:
        raise SystemExit(f"{argv[0]}: {len(full.kernel_cycles())} kernels in the full run, "
                         f"{launches} launches in the functional one")
    return {"launches": launches, "perf_s": perf_s, "func_s": func_s,
            "cycles": sum(c for _k, c in full.kernel_cycles())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", default=",".join(CARDS))
    parser.add_argument("--programs", default="transformer_step,pipeline_step,"
                        + ",".join(RODINIA_COST_ARGV))
    parser.add_argument("--rodinia-bin", type=Path, help="the folder rodinia.py build wrote")
    parser.add_argument("--work", type=Path, help="run folders (default: a temp dir)")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="ff-cost-"))
    progs = programs([p for p in args.programs.split(",") if p], args.rodinia_bin, work)
    rows = []
    print("| program | card | launches | simulated cycles | performance CPU-s (per launch) | "
          "functional CPU-s (per launch) | ratio | perf - func per launch |")
    print("|---|---|---|---|---|---|---|---|")
    for card_name in [c for c in args.cards.split(",") if c]:
        card = card_config(CARDS[card_name], find_build(), options=REDUCED_QV100)
        for name, cmd in progs.items():
            m = measure(cmd, card, work / card_name / name)
            n = m["launches"]
            rows.append((name, card_name, m))
            print(f"| {name} `{' '.join(cmd[1:])}` | {card_name} | {n} | {m['cycles']:,} | "
                  f"{m['perf_s']:.1f} ({m['perf_s'] / n:.3f}) | "
                  f"{m['func_s']:.1f} ({m['func_s'] / n:.3f}) | "
                  f"{m['perf_s'] / m['func_s']:.1f}x | "
                  f"{(m['perf_s'] - m['func_s']) / n:.3f} |", flush=True)
    for card_name in {c for _n, c, _m in rows}:
        mine = [m for _n, c, m in rows if c == card_name]
        perf, func = sum(m["perf_s"] for m in mine), sum(m["func_s"] for m in mine)
        print(f"{card_name}: all programs {perf:.1f} CPU-s performance, {func:.1f} functional, "
              f"{perf / func:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
