"""The CUPTI injection profiler's overhead against warm bare runs (GPU host).

``python benchmarks/silicon/overhead.py -o OUT.json [--runs K] [--in-process-runs J]
[--keep-raw DIR] -- CMD ARGS``

One bare run first to warm the machine (module loads, kernel caches, page cache; not
counted), then K rounds of a bare run and a run under the injection library
(``CUDA_INJECTION64_PATH``, as ``hilsim agent profile --backend cupti`` sets it), in turn so
that drift hits both alike; with ``--in-process-runs J`` (Python programs), J runs under
the in-process launcher (``python -m hilsim.agent.cupti_launch``) after them. Each run's whole
process wall time and the program's own loop time (its ``... in X s`` line, when it
prints one: ``launch_loop``, ``cupy_mix.py``) are kept; the summary gives the medians,
the ratios to the bare medians, and the microseconds per recorded launch. Every
profiled run's records are imported (``bundle_from_cupti_records``) and their launch,
range and region counts kept, so a run that recorded nothing cannot pass as fast.

Each failure is one line and exit code 2 (no GPU: the warm-up run fails).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hilsim.agent.backends.cupti import injection_argv, pick_records
from hilsim.agent.cupti_build import build_injection
from hilsim.agent.runner import RunResult
from hilsim.agent.tools import hilsim_pythonpath, python_target

from hilsim.core.errors import HilsimError
from hilsim.formats.cupti_records import bundle_from_cupti_records, read_cupti_records

LOOP_TIME = re.compile(r"\bin ([0-9]+(?:\.[0-9]+)?) s\b")
RUN_TIMEOUT_S = 300


def _run(argv: list[str], env: dict[str, str], label: str) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise HilsimError(f"{label} run of {argv[0]} failed to start: {exc}") from exc
    wall = time.perf_counter() - start
    if done.returncode != 0:
        last = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        raise HilsimError(f"{label} run failed (exit code {done.returncode}): "
                          + (last[-1][:200] if last else "no output"))
    loop = LOOP_TIME.findall(done.stdout)
    return {"wall_s": round(wall, 6), "loop_s": float(loop[-1]) if loop else None,
            "stdout_tail": done.stdout.splitlines()[-3:]}


def _recorded(records: Path) -> dict[str, Any]:
    header = read_cupti_records(records)[0]
    bundle = bundle_from_cupti_records(records)
    return {"launches": bundle.n_launches,
            "ranges": int(header.get("counts", {}).get("range", 0)),
            "launches_with_region": int(bundle.launches["region"].notna().sum()),
            "header": header}


def _keep(records: Path, keep: Path | None, name: str) -> None:
    if keep is None:
        return
    keep.mkdir(parents=True, exist_ok=True)
    with records.open("rb") as src, gzip.open(keep / f"{name}.cupti.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)


def injection_run(argv: list[str], env: dict[str, str], library: Any, scratch: Path
                  ) -> tuple[dict[str, Any], Path]:
    """One run under the injection library; its timing, what it recorded, its file."""
    for old in scratch.glob("light.*.cupti.jsonl"):
        old.unlink()
    run_env = {**env, "CUDA_INJECTION64_PATH": str(library.path),
               "HILSIM_CUPTI_OUT": str(scratch / "light.%p.cupti.jsonl")}
    run_env.setdefault("NVTX_INJECTION64_PATH", str(library.install.library))
    result = _run(argv, run_env, "injection")
    records, others = pick_records(scratch, RunResult(argv, 0, result["wall_s"]))
    result.update(_recorded(records), other_processes=others)
    return result, records


def in_process_run(command: list[str], env: dict[str, str], scratch: Path
                   ) -> tuple[dict[str, Any], Path]:
    """One run under the in-process launcher (cupti-python)."""
    target = python_target(command)
    if target is None:
        raise HilsimError("--in-process needs a Python program")
    records = scratch / "in-process.cupti.jsonl"
    records.unlink(missing_ok=True)
    argv = target.launcher_argv("hilsim.agent.cupti_launch", ["--out", str(records)])
    result = _run(argv, env, "in-process")
    result.update(_recorded(records))
    return result, records


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 6) if values else None


def summary(bare: list[dict[str, Any]], profiled: dict[str, list[dict[str, Any]]]
            ) -> dict[str, Any]:
    """Medians, ratios to the bare medians and microseconds per recorded launch."""
    out: dict[str, Any] = {"bare": {k: _median(bare, k) for k in ("wall_s", "loop_s")}}
    for mode, runs in profiled.items():
        launches = statistics.median(r["launches"] for r in runs)
        entry: dict[str, Any] = {"launches": launches}
        for key in ("wall_s", "loop_s"):
            mine, base = _median(runs, key), out["bare"][key]
            entry[key] = mine
            if mine is not None and base:
                entry[f"{key[:-2]}_ratio"] = round(mine / base, 4)
                entry[f"{key[:-2]}_us_per_launch"] = (
                    round(1e6 * (mine - base) / launches, 3) if launches else None)
        out[mode] = entry
    return out


def measure(command: list[str], runs: int, in_process: int, keep: Path | None
            ) -> dict[str, Any]:
    library = build_injection()
    env = hilsim_pythonpath()
    argv = injection_argv(command)
    with tempfile.TemporaryDirectory(prefix="hilsim-overhead-") as folder:
        scratch = Path(folder)
        warm = _run(argv, env, "warm-up bare")
        bare: list[dict[str, Any]] = []
        profiled: dict[str, list[dict[str, Any]]] = {"injection": []}
        records = None
        for _ in range(runs):
            bare.append(_run(argv, env, "bare"))
            result, records = injection_run(argv, env, library, scratch)
            profiled["injection"].append(result)
        if records is not None:
            _keep(records, keep, "injection")
        if in_process:
            profiled["in-process"] = []
            for _ in range(in_process):
                result, records = in_process_run(command, env, scratch)
                profiled["in-process"].append(result)
            _keep(records, keep, "in-process")
    return {"command": command, "argv": argv, "runs": runs, "library": str(library.path),
            "cupti": library.install.describe(), "warm_up": warm, "bare_runs": bare,
            "profiled_runs": profiled, "summary": summary(bare, profiled)}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print("overhead.py: usage: overhead.py -o OUT.json [--runs K] [--in-process-runs J] "
              "[--keep-raw DIR] -- CMD ARGS", file=sys.stderr)
        return 2
    cut = args.index("--")
    parser = argparse.ArgumentParser(prog="overhead.py")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--in-process-runs", type=int, default=0)
    parser.add_argument("--keep-raw", type=Path, default=None)
    options = parser.parse_args(args[:cut])
    command = args[cut + 1:]
    try:
        result = measure(command, max(1, options.runs), max(0, options.in_process_runs),
                         options.keep_raw)
    except HilsimError as exc:
        print(f"overhead.py: error: {exc}", file=sys.stderr)
        return 2
    options.output.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"overhead.py: {os.path.basename(command[0])}: "
          + json.dumps(result["summary"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
