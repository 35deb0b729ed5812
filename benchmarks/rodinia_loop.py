"""The whole loop on unmodified Rodinia apps: profile, plan, sampled simulation with
fast-forward, and how well the sample estimates the full run, over many seeds.

    python benchmarks/rodinia.py build --source ../shared/vendor/rodinia-cuda-9c10d3e.tar.gz \\
        --out /tmp/rodinia
    python benchmarks/rodinia_loop.py --bin /tmp/rodinia --work /tmp/loop \\
        [--apps srad_v2,gaussian] [--seeds 20] [--card SM7_QV100] \\
        [--silicon-card drawn:SM75_RTX2060:7] [--json rows.json]
    python benchmarks/rodinia_loop.py --work /tmp/loop --program "mysolver=./solver -n 64"

Every step is the user's command, run as a user runs it (``python -m hilsim.cli.main``):

1. ``hilsim agent profile --backend gpgpusim`` of the app on the simulated card (the
   reduced QV100's overrides: 4 SMs, no launch latency, no L2 fill on copies): the *full
   run*, with its CPU time and copy digests;
2. with ``--silicon-card``, the same on a second card playing the silicon (a shipped card,
   or ``drawn:BASE:SEED``, a card drawn by :func:`hilsim.simmodel.tuner.heldout.draw_card`
   on another structure, at 4 SMs): plans are made on *its* profile, as a user plans on a
   GPU's profile, and the total error (in time: the two cards' clocks differ) is
   against it;
3. ``hilsim plan -m stem -p seed=S`` for each seed and one ``hilsim plan -m pka``;
4. ``hilsim simulate PLAN --warmup auto -- APP ARGS`` on the simulated card (fast-forward:
   every launch outside the sample and its warm-up functional; the data check against
   the profile's copies), with ``--full-cycles`` the full run's cycles.

Printed per app (and written with ``--json``): launches, the full run's CPU seconds, the
sampled runs' mean CPU seconds split into fast-forward / warm-up / sample / host, the
sampling error (estimate vs the full run on the same card) per seed (mean and 90th
percentile of the absolute value), the 95% interval's mean half-width, the coverage over
seeds with its Clopper-Pearson 95% interval (``scipy.stats.beta``), PKA's error, and with
a silicon card the total error against it. Nothing here is timed by the test suite.
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hilsim.core.errors import HilsimError

#: the reduced QV100 as command-line overrides (simmodel.gpgpusim.workloads.REDUCED_QV100)
REDUCED = ("-gpgpu_n_clusters=4", "-gpgpu_kernel_launch_latency=0", "-gpgpu_perf_sim_memcpy=0")
#: the silicon stand-in card's SM count (a drawn card's own count would take hours)
SILICON_SMS = 4
HILSIM = (sys.executable, "-m", "hilsim.cli.main")


def hilsim(*args: str, timeout_s: float = 4 * 3600) -> str:
    """One hilsim command, as a user types it; its stdout (stderr on failure, raised)."""
    proc = subprocess.run([*HILSIM, *args], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise HilsimError(f"hilsim {' '.join(args[:2])}: exit {proc.returncode}: "
                          f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout


def overrides(card_options: tuple[str, ...]) -> list[str]:
    return [a for o in card_options for a in ("-O", o)]


def silicon_card(spec: str, work: Path) -> tuple[str, tuple[str, ...]]:
    """(card argument, overrides) of the silicon stand-in: a shipped card name, or
    ``drawn:BASE:SEED`` drawn on BASE's structure (written under ``work``)."""
    if not spec.startswith("drawn:"):
        return spec, REDUCED
    from hilsim.simmodel.gpgpusim.build import find_build
    from hilsim.simmodel.gpgpusim.cards import card_config
    from hilsim.simmodel.tuner.heldout import draw_card

    _, base, seed = spec.split(":")
    folder = work / f"drawn-{base}-{seed}"
    drawn = draw_card(int(seed), card_config(base, find_build()), folder)
    config = drawn.folder / "gpgpusim.config"
    return str(config), (f"-gpgpu_n_clusters={SILICON_SMS}", "-gpgpu_kernel_launch_latency=0",
                         "-gpgpu_perf_sim_memcpy=0")


def profile(exe: Path, argv: tuple[str, ...], card: str, card_options: tuple[str, ...],
            out: Path, keep_raw: Path | None = None) -> dict[str, Any]:
    """The full run on ``card`` as a bundle (the simulator's log kept as
    ``keep_raw/sim.log`` when given); its launches, cycles and CPU seconds."""
    if not (out / "manifest.json").exists():
        raw = ("--keep-raw", str(keep_raw)) if keep_raw is not None else ()
        hilsim("agent", "profile", "--backend", "gpgpusim", "--card", card,
               *overrides(card_options), *raw, "-o", str(out), "--force", "--", str(exe),
               *argv)
    manifest = json.loads((out / "manifest.json").read_text())
    prof = manifest["profilers"][0]
    import pandas as pd

    metrics = pd.read_parquet(out / "metrics.parquet", columns=["gpu__cycles_elapsed.max"])
    launches = pd.read_parquet(out / "launches.parquet", columns=["duration_ns"])
    return {"bundle": out, "launches": int(len(metrics)),
            "cycles": float(metrics["gpu__cycles_elapsed.max"].sum()),
            "ns": float(launches["duration_ns"].sum()),
            "cpu_s": float(prof["sim_cpu_s"]), "copies": len(prof.get("copy_digests") or [])}


def sampled(plan: Path, exe: Path, argv: tuple[str, ...], card: str, full: dict[str, Any],
            plan_profile: Path, out: Path,
            card_options: tuple[str, ...] = REDUCED) -> dict[str, Any]:
    """One sampled simulation of ``plan`` (``--warmup auto``) against the full run."""
    if not (out / "simulate.json").exists():
        hilsim("simulate", str(plan), "--card", card, *overrides(card_options), "-o", str(out),
               "--force", "--warmup", "auto", "--profile", str(plan_profile),
               "--full-cycles", f"{full['cycles']:.0f}", "--", str(exe), *argv)
    s = json.loads((out / "simulate.json").read_text())
    lo, hi = s["interval_cycles"] or (np.nan, np.nan)
    return {"estimate": s["estimate_cycles"], "error": s["estimate_error_signed"],
            "estimate_ns": s["estimate_cycles"] / s["core_clock_mhz"] * 1000.0,
            "half_width": (hi - lo) / 2 / full["cycles"],
            "covered": bool(lo <= full["cycles"] <= hi), "cpu_s": s["sim_cpu_s"],
            "parts": s["sim_cpu_parts"], "samples": s["samples"],
            "launches_simulated": s["launches_simulated"], "data_check": s["data_check"]}


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of a coverage of ``k`` in ``n``."""
    from scipy.stats import beta

    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def rodinia_command(name: str, bindir: Path) -> tuple[Path, tuple[str, ...]]:
    """A Rodinia app's executable and its input (benchmarks/rodinia.py's table sizes)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from rodinia import APPS  # the apps' inputs (benchmarks/rodinia.py)

    if name not in APPS:
        raise HilsimError(f"{name}: not a Rodinia app of benchmarks/rodinia.py "
                          f"({', '.join(APPS)}); give other programs with --program")
    return bindir / name, APPS[name].argv


def loop_app(name: str, command: tuple[Path, tuple[str, ...]], work: Path, seeds: int,
             card: str, silicon: tuple[str, tuple[str, ...]] | None) -> dict[str, Any]:
    """Profile, plans, sampled simulations of one program; its row."""
    exe, argv = command
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    full = profile(exe, argv, card, REDUCED, folder / "full.bundle")
    planned_on = full
    if silicon is not None:
        planned_on = profile(exe, argv, silicon[0], silicon[1], folder / "silicon.bundle")
    runs = []
    for seed in range(seeds):
        plan = folder / f"stem{seed}.plan.json"
        if not plan.exists():
            hilsim("plan", str(planned_on["bundle"]), "-m", "stem", "-p", f"seed={seed}",
                   "-o", str(plan))
        runs.append(sampled(plan, exe, argv, card, full, planned_on["bundle"],
                            folder / f"stem{seed}"))
    pka_plan = folder / "pka.plan.json"
    if not pka_plan.exists():
        hilsim("plan", str(planned_on["bundle"]), "-m", "pka", "-o", str(pka_plan))
    pka = sampled(pka_plan, exe, argv, card, full, planned_on["bundle"], folder / "pka")
    errors = np.array([r["error"] for r in runs])
    covered = int(sum(r["covered"] for r in runs))
    row = {
        "app": name, "argv": " ".join(argv), "card": card,
        "launches": full["launches"], "full_cycles": full["cycles"],
        "full_cpu_s": full["cpu_s"], "copies": full["copies"],
        "seeds": seeds, "errors": errors.tolist(),
        "mean_abs_error": float(np.mean(np.abs(errors))),
        "p90_abs_error": float(np.percentile(np.abs(errors), 90)),
        "mean_half_width": float(np.mean([r["half_width"] for r in runs])),
        "covered": covered, "coverage_ci": clopper_pearson(covered, seeds),
        "sampled_cpu_s": float(np.mean([r["cpu_s"] for r in runs])),
        "sampled_cpu_parts": {p: float(np.mean([r["parts"].get(p, 0.0) for r in runs]))
                              for p in ("fast_forward", "warmup", "sample", "host")},
        "samples": float(np.mean([r["samples"] for r in runs])),
        "data_checks": sorted({str(r["data_check"].get("reference")) for r in [*runs, pka]}),
        "pka_error": pka["error"], "pka_covered": pka["covered"], "pka_cpu_s": pka["cpu_s"],
        "wall_s": round(time.monotonic() - started, 1),
    }
    if silicon is not None:
        row["silicon_card"] = silicon[0]
        # in time: the two cards' cycles tick at different clocks
        row["silicon_ns"] = planned_on["ns"]
        row["total_errors"] = [(r["estimate_ns"] - planned_on["ns"]) / planned_on["ns"]
                               for r in runs]
    return row


def collect_rows(jobs: dict[str, Callable[[], dict[str, Any]]],
                 json_path: Path | None) -> list[dict[str, Any]]:
    """Each job's row, in turn: a job that fails is one line on stderr and no row; each
    row is printed as JSON on stderr, and every row so far rewritten to ``json_path``
    after each job (an interrupted run keeps what it finished)."""
    rows: list[dict[str, Any]] = []
    for name, job in jobs.items():
        try:
            rows.append(job())
        except HilsimError as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            continue
        print(json.dumps(rows[-1]), file=sys.stderr)
        if json_path is not None:
            json_path.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The table of ``docs/validation.md`` (markdown)."""
    print("| app | launches | full CPU-s | sampled CPU-s (ff / warm-up / sample / host) | "
          "CPU speedup | samples | mean abs err | p90 abs err | mean half-width | "
          "coverage [95% CI] | PKA err | data check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = r["sampled_cpu_parts"]
        lo, hi = r["coverage_ci"]
        print(f"| {r['app']} | {r['launches']} | {r['full_cpu_s']:.0f} | "
              f"{r['sampled_cpu_s']:.0f} ({p['fast_forward']:.0f} / {p['warmup']:.0f} / "
              f"{p['sample']:.0f} / {p['host']:.0f}) | "
              f"{r['full_cpu_s'] / r['sampled_cpu_s']:.1f}x | {r['samples']:.1f} | "
              f"{100 * r['mean_abs_error']:.2f}% | {100 * r['p90_abs_error']:.2f}% | "
              f"{100 * r['mean_half_width']:.2f}% | {r['covered']}/{r['seeds']} "
              f"[{100 * lo:.0f}-{100 * hi:.0f}%] | {100 * r['pka_error']:+.2f}% | "
              f"{', '.join(r['data_checks'])} |")
        if "total_errors" in r:
            t = np.abs(r["total_errors"])
            print(f"|  ↳ planned on {Path(r['silicon_card']).parent.name or r['silicon_card']}"
                  f" | | | | | | total vs that card: mean {100 * t.mean():.1f}% | "
                  f"p90 {100 * np.percentile(t, 90):.1f}% | | | | |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=None, help="benchmarks/rodinia.py build --out")
    parser.add_argument("--work", type=Path, required=True,
                        help="bundles, plans and simulations (reused when present)")
    parser.add_argument("--apps", default="srad_v2", help="Rodinia apps ('' for none)")
    parser.add_argument("--program", action="append", default=[], metavar="NAME=COMMAND",
                        help="any other program (linked with -cudart shared) and its "
                             "arguments, e.g. 'cg=./cg -n 64' (repeatable)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--card", default="SM7_QV100")
    parser.add_argument("--silicon-card", default=None,
                        help="plan on this card's profile: a card, or drawn:BASE:SEED")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    silicon = silicon_card(args.silicon_card, args.work) if args.silicon_card else None
    commands: dict[str, Any] = {}
    for spec in args.program:
        name, _, line = spec.partition("=")
        words = shlex.split(line)
        if not name or not words:
            parser.error(f"--program {spec!r}: expected NAME=COMMAND ARGS")
        commands[name] = (Path(words[0]).resolve(), tuple(words[1:]))
    for name in [a for a in args.apps.split(",") if a]:
        if args.bin is None:
            parser.error("Rodinia apps need --bin (benchmarks/rodinia.py build --out)")
        commands[name] = None
    def job(name: str, command: tuple[Path, tuple[str, ...]] | None) -> dict[str, Any]:
        return loop_app(name, command or rodinia_command(name, args.bin), args.work,
                        args.seeds, args.card, silicon)

    rows = collect_rows({name: functools.partial(job, name, command)
                         for name, command in commands.items()}, args.json)
    print_rows(rows)
    return 0 if rows else 2


if __name__ == "__main__":
    raise SystemExit(main())
