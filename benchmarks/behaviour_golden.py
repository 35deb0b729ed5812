"""Not a benchmark: the outputs of hilsim's commands on the shipped inputs, for a before/after diff.

usage: python benchmarks/behaviour_golden.py OUTDIR [--parts imports,plans,...,simulate]

Runs whole commands (``hilsim ...`` in a subprocess, as a user does) on committed inputs:
``import`` of every real fixture format, ``plan`` of every method that runs on them and
``evaluate`` of it, ``compare``, ``quickstart`` (both examples: plans, evaluation, validate,
pkp, portability, dse) and, with a GPGPU-Sim build, ``agent profile --backend gpgpusim`` and
``simulate`` of a STEM plan of ``transformer_step`` on the reduced QV100. Each output lands
under ``OUTDIR/PART/CASE/``, made comparable: JSON with run-dependent keys (times, dates,
hosts, temporary paths) removed and keys sorted, Parquet tables as CSV, logs kept as the
lines hilsim reads. Run it before and after a refactoring and compare with ``diff -r``.
:mod:`benchmarks.tuner_golden` covers ``tune``; ``tune_on_simulator.py --cases h100`` the
on-simulator tuner.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "analyzer" / "examples"

#: keys whose values differ from run to run (timings, dates, hosts, versions)
VOLATILE = re.compile(
    r"(^|_)(created|time|times|timing|timings|wall|wall_s|seconds|cpu|cpu_s|elapsed|host|"
    r"hostname|date|started|finished|version|hilsim_version|duration_s|runtime_s|pid|"
    r"user_s|sys_s|cwd|python)($|_)", re.IGNORECASE)

IMPORTS = {
    "nsys-csv-thor": DATA / "nsys" / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv",
    "nsys-csv-ada": DATA / "nsys" / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv",
    "nsys-sqlite-nerf": DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite",
    "wide-casio": DATA / "casio" / "casio-kernel-durations.csv",
    "kineto-v100": DATA / "kineto" / "hta-v100-ns-resolution.trace.json.gz",
    "kineto-a100-counters": DATA / "kineto" / "hta-a100-cupti-counters.trace.json.gz",
    "gpgpusim-log": DATA / "gpgpusim" / "transformer_step1.SM7_QV100-4sm.log",
}
PLAN_METHODS = {
    "nsys-sqlite-nerf": ("stem", "random", "first-n", "pka", "tbpoint", "megsim"),
    "wide-casio": ("stem", "random", "first-n"),
    "kineto-v100": ("stem", "pka", "tbpoint"),
    "gpgpusim-log": ("stem", "pka", "sieve", "photon", "random"),
}


def normalize_json(data: Any, work: str) -> Any:
    """``data`` without run-dependent keys, with the work folder's path replaced."""
    if isinstance(data, dict):
        return {k: normalize_json(v, work) for k, v in sorted(data.items())
                if not VOLATILE.search(str(k))}
    if isinstance(data, list):
        return [normalize_json(v, work) for v in data]
    if isinstance(data, str):
        return data.replace(work, "<WORK>").replace(str(REPO), "<REPO>")
    return data


def keep(src: Path, dest: Path, work: str) -> None:
    """Copy ``src`` (file or folder) into ``dest`` in comparable form."""
    if src.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        for child in sorted(src.iterdir()):
            keep(child, dest / child.name, work)
        return
    name = src.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(src)
        table.to_pandas().to_csv(dest.with_suffix(".csv"), index=False)
        return
    if name.endswith(".gz"):
        with gzip.open(src, "rb") as fh:
            raw = fh.read()
        name = name[:-3]
        dest = dest.with_name(name)
    else:
        raw = src.read_bytes()
    if name.endswith(".json"):
        try:
            data = json.loads(raw)
        except ValueError:
            dest.write_bytes(raw)
            return
        dest.write_text(json.dumps(normalize_json(data, work), indent=1, sort_keys=True) + "\n")
    elif name.endswith((".png", ".html")):
        # plots and pages embed timings and fonts: keep their size class, not their bytes
        text = raw.decode("utf-8", "replace") if name.endswith(".html") else ""
        text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:image/png;base64,...", text)
        text = re.sub(r"\d+(\.\d+)? ?(s|ms|CPU-s|CPU-min) ", "<T> ", text)
        dest.write_text(text.replace(work, "<WORK>"))
    elif name.endswith(".log") or "log" in name:
        lines = raw.decode("utf-8", "replace").splitlines()
        keepers = [ln for ln in lines if ln.startswith(("kernel_name", "gpu_sim_cycle",
                                                        "gpu_tot_sim_cycle", "kernel_launch_uid",
                                                        "gpu_sim_insn", "hilsim-launch"))]
        dest.write_text("\n".join(keepers) + "\n")
    else:
        text = raw.decode("utf-8", "replace").replace(work, "<WORK>")
        dest.write_text(text.replace(str(REPO), "<REPO>"))


def run(args: list[str], dest: Path, work: str, env: dict[str, str] | None = None) -> int:
    """Run ``hilsim ARGS``; keep its exit code and output (timings masked) in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    exe = str(Path(sys.executable).with_name("hilsim"))
    env = {**os.environ, **(env or {}), "COLUMNS": "160", "NO_COLOR": "1"}
    proc = subprocess.run([exe, *args], capture_output=True, text=True, cwd=work, env=env,
                          check=False)
    out = re.sub(r"\d+(\.\d+)? ?(s|ms|min|CPU-s|CPU-min|GB|MB|MiB|GiB)\b", "<T>",
                 proc.stdout + proc.stderr)
    (dest / "console.txt").write_text(
        f"exit {proc.returncode}\n" + out.replace(work, "<WORK>").replace(str(REPO), "<REPO>"))
    return proc.returncode


def part_imports(root: Path, work: Path) -> None:
    for case, src in IMPORTS.items():
        bundle = work / f"{case}.bundle"
        run(["import", str(src), "-o", str(bundle)], root / "imports" / case, str(work))
        if bundle.exists():
            keep(bundle, root / "imports" / case / "bundle", str(work))


def part_plans(root: Path, work: Path) -> None:
    for case, methods in PLAN_METHODS.items():
        bundle = work / f"{case}.bundle"
        if not bundle.exists():
            run(["import", str(IMPORTS[case]), "-o", str(bundle)], work / "scratch", str(work))
        for m in methods:
            dest = root / "plans" / f"{case}-{m}"
            plan = work / f"{case}-{m}.json"
            run(["plan", str(bundle), "-m", m, "-o", str(plan)], dest / "plan", str(work))
            if plan.exists():
                keep(plan, dest / "plan.json", str(work))
                result = work / f"{case}-{m}-eval.json"
                run(["evaluate", str(bundle), "--plan", str(plan), "-o", str(result)],
                    dest / "evaluate", str(work))
                if result.exists():
                    keep(result, dest / "evaluate.json", str(work))
            seeds = work / f"{case}-{m}-seeds.json"
            run(["evaluate", str(bundle), "-m", m, "--seeds", "3", "-o", str(seeds)],
                dest / "evaluate-seeds", str(work))
            if seeds.exists():
                keep(seeds, dest / "evaluate-seeds.json", str(work))


def part_compare(root: Path, work: Path) -> None:
    for case in ("nsys-sqlite-nerf", "gpgpusim-log"):
        bundle = work / f"{case}.bundle"
        if not bundle.exists():
            run(["import", str(IMPORTS[case]), "-o", str(bundle)], work / "scratch", str(work))
        out = work / f"cmp-{case}"
        run(["compare", str(bundle), "--seeds", "2", "-o", str(out)],
            root / "compare" / case, str(work))
        if out.exists():
            keep(out, root / "compare" / case / "out", str(work))


def part_examples(root: Path, work: Path) -> None:
    for example in ("profiles", "simulated-v100"):
        out = work / f"qs-{example}"
        run(["quickstart", "--example", example, "--seeds", "3", "-o", str(out)],
            root / "examples" / example, str(work))
        if out.exists():
            keep(out, root / "examples" / example / "out", str(work))
    sims = EXAMPLES / "simulated-v100"
    for method in ("stem", "pka"):
        for card in ("reference", "tuned"):
            out = work / f"validate-{method}-{card}"
            run(["validate", "--silicon", str(sims / "reference.bundle"),
                 "--plan", str(sims / "plans" / f"{method}.json"),
                 "--sim", str(sims / "sims" / f"{method}-{card}"),
                 "--sim-full", str(sims / "logs" / f"{card}-full.sim.log.gz"),
                 "-o", str(out)], root / "validate" / f"{method}-{card}", str(work))
            for f in sorted(work.glob(f"validate-{method}-{card}*")):
                keep(f, root / "validate" / f"{method}-{card}" / f.name, str(work))


def part_simulate(root: Path, work: Path) -> None:
    """Full profile and a STEM sampled simulation of ``transformer_step`` (1 step) on the
    reduced QV100 (needs a GPGPU-Sim build and nvcc <= 11.x: ~4 CPU-min)."""
    from hilsim.simmodel.gpgpusim.workloads import REDUCED_QV100, build_transformer_step

    exe = build_transformer_step(work / "ts")
    reduced = [x for k, v in REDUCED_QV100.items() for x in ("-O", f"{k}={v}")]
    bundle = work / "ts.bundle"
    run(["agent", "profile", "--backend", "gpgpusim", "--card", "SM7_QV100", *reduced,
         "-o", str(bundle), "--", str(exe), "--steps", "2"], root / "simulate" / "profile",
        str(work))
    if bundle.exists():
        keep(bundle, root / "simulate" / "profile" / "bundle", str(work))
    plan = work / "ts-stem.json"
    run(["plan", str(bundle), "-m", "stem", "-o", str(plan)], root / "simulate" / "plan",
        str(work))
    for warmup in ("none", "l2-fill", "preceding:2", "auto"):
        out = work / f"sim-{warmup.replace(':', '')}"
        run(["simulate", str(plan), "--card", "SM7_QV100", *reduced, "--warmup", warmup,
             "--profile", str(bundle), "-o", str(out), "--", str(exe), "--steps", "2"],
            root / "simulate" / warmup, str(work))
        if out.exists():
            keep(out, root / "simulate" / warmup / "out", str(work))


PARTS = {"imports": part_imports, "plans": part_plans, "compare": part_compare,
         "examples": part_examples, "simulate": part_simulate}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--parts", default=",".join(PARTS))
    args = ap.parse_args()
    root = args.outdir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="behaviour-golden."))
    try:
        for part in args.parts.split(","):
            PARTS[part](root, work)
            print(f"{part}: done", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
