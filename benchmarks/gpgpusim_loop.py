"""The whole loop on the simulated card, timed: profile fully, plan, simulate the sample, validate.

    python benchmarks/gpgpusim_loop.py --out runs/loop [--steps 36] [--card SM7_QV100]
        [--method stem] [--method pka] ...

Steps (each printed with its wall time; simulator runs also with their CPU time):
1. compile ``transformer_step.cu`` (``hilsim.simmodel.gpgpusim.workloads``);
2. ``hilsim agent profile --backend gpgpusim`` on the reduced card -> ``full.bundle``
   (its log kept in ``full-raw/sim.log``);
3. per method: ``hilsim plan`` -> ``METHOD.json``; ``hilsim simulate`` -> ``METHOD-sim/``
   (prints the simulated-time saving); ``hilsim validate --sim`` -> ``METHOD-report.html``.

Figures go to stdout and ``OUT/loop.json``. Needs a GPGPU-Sim build and nvcc <= 11.x.
The full run of the default 36 steps costs about 20 CPU-minutes (workloads README).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _hilsim(*args: str) -> tuple[float, float, str]:
    started, cpu = time.monotonic(), _cpu()
    done = subprocess.run([sys.executable, "-m", "hilsim.analyzer.cli", *args],
                          capture_output=True, text=True, check=False)
    out = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        sys.exit(f"hilsim {' '.join(args[:3])} failed: {out.splitlines()[-1] if out else ''}")
    return time.monotonic() - started, _cpu() - cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=36)
    ap.add_argument("--card", default="SM7_QV100")
    ap.add_argument("--method", action="append", default=None)
    args = ap.parse_args()
    from hilsim.simmodel.gpgpusim.workloads import REDUCED_QV100, build_transformer_step

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    opts = [x for k, v in REDUCED_QV100.items() for x in ("-O", f"{k}={v}")]
    figures: dict[str, object] = {"steps": args.steps, "card": args.card, "options": opts}
    started = time.monotonic()
    program = build_transformer_step(out / "transformer_step")
    figures["compile_wall_s"] = round(time.monotonic() - started, 1)
    command = ["--", str(program), "--steps", str(args.steps)]
    wall, cpu, text = _hilsim("agent", "profile", "--backend", "gpgpusim", "--card", args.card,
                              *opts, "--keep-raw", str(out / "full-raw"), "--force",
                              "-o", str(out / "full.bundle"), *command)
    print(text)
    figures["full"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
    for method in args.method or ["stem", "pka"]:
        plan = out / f"{method}.json"
        w_plan, _, text = _hilsim("plan", str(out / "full.bundle"), "-m", method,
                                  "-o", str(plan))
        print(text)
        w_sim, c_sim, text = _hilsim("simulate", str(plan), "--card", args.card, *opts,
                                     "-o", str(out / f"{method}-sim"), *command)
        print(text)
        w_val, _, text = _hilsim("validate", "--silicon", str(out / "full.bundle"),
                                 "--plan", str(plan), "--sim", str(out / f"{method}-sim"),
                                 "-o", str(out / f"{method}-report"))
        print(text)
        summary = json.loads((out / f"{method}-sim" / "simulate.json").read_text())
        figures[method] = {"plan_wall_s": round(w_plan, 1), "sim_wall_s": round(w_sim, 1),
                           "sim_cpu_s": round(c_sim, 1), "validate_wall_s": round(w_val, 1),
                           "launches": summary["launches_simulated"],
                           "simulated_time_speedup": summary["simulated_time_speedup"]}
    (out / "loop.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
