"""Wall time and peak memory of the analyzer paths no other benchmark covers.

Usage: python benchmarks/bench_scale.py [--launches 1000000] [--only NAME] [--edits 300]
       [--workdir DIR] [--timeout 1800]

Paths (``--only`` takes one of these names):

* ``portability``: :func:`hilsim.analyzer.portability.evaluate_portability` of a STEM plan
  made on bundle A (the CASIO pattern of ``casio_scaled.py``, 50 ns jitter) scored on
  bundle B, a perturbed copy: per-kernel duration scale in [0.6, 1.4] x 5 % log-normal
  noise, plus 300 launches deleted and 300 inserted (``--edits``) at seeded random
  positions, so the alignment has mismatches to resolve.
* ``portability-nerf``: the same with A = the real launch order of the shipped CASIO
  NeRF A100 profile (1,106 launches, 116 kernels) repeated to N launches with 5 %
  duration jitter: a realistic sequence, where the CASIO pattern above has long runs
  of one kernel in which names cannot say which launch an edit removed.
* ``dse``: what ``hilsim dse`` runs after reading the bundle:
  :func:`hilsim.simmodel.dse.counters_from_bundle` and :func:`hilsim.simmodel.dse.dse` with a
  STEM plan, preset QV100 and three ``--vary`` variations (``l2_size=x2``,
  ``sm_count=x0.5``, ``l1_size=x0.5``). Launch configurations per kernel class and
  the model's counters for every launch are synthesised (seeded, scaled with the
  durations) as ``bench_report.py`` does.
* ``evaluate``: ``hilsim evaluate BUNDLE -m stem --seeds 20`` and the same for
  ``random`` (:func:`hilsim.analyzer.evaluate.evaluate_method`) on the bundle of
  ``bench_methods.py`` (CASIO pattern, 16 metrics for every launch, NVTX steps).
* ``compare``: ``hilsim compare BUNDLE --seeds 10`` (:func:`hilsim.analyzer.compare.
  compare_methods`, default methods and workers) on the same bundle; the peak counts
  the worker processes too.
* ``bundle-write`` / ``bundle-read``: :func:`hilsim.core.bundle.write_bundle` and
  :func:`hilsim.core.bundle.read_bundle` (sha256 manifest verification included) of
  that bundle.
* ``import-nsys``: :func:`hilsim.formats.read.load_profile` of an ``nsys stats
  --report cuda_gpu_trace`` CSV with the exact header and row format of
  ``tests/data/nsys/*.csv``: N kernel rows (CASIO names and durations in the fixture's
  kernel-row layout) plus one fixture memcpy row per 8 kernels.
* ``import-kineto``: ``load_profile`` of a Kineto trace (plain ``.json``) laid out like
  ``tests/data/kineto/hta-v100-ns-resolution.trace.json.gz``: the fixture's kernel
  events cycled to N kernels, each with its ``cudaLaunchKernel`` runtime event and
  ``ac2g`` flow pair, a ``gpu_memcpy`` per 8 kernels and ``ProfilerStep#`` CPU and GPU
  annotations per 1000 kernels. Skipped when the file would exceed the importer's
  ``MAX_TRACE_BYTES``.

Each path runs in a fresh ``spawn`` process: its inputs are built first (file inputs
by another process, into ``--workdir``) and not timed; then the peak-RSS mark is reset
(``/proc/self/clear_refs``; elsewhere ``getrusage`` and the reset is not possible) and
the path is timed. ``peak GB`` is the process's VmHWM during the path (inputs it holds
included; ``inputs GB`` is the RSS before it started) or, for paths with worker
processes, the sampled peak of the whole process tree, whichever is larger.

Budget (project rule): every path handles 10M launches on a 2-core, 24 GB machine,
vectorised (no per-launch Python loop).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import multiprocessing
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from bench_methods import full_bundle  # noqa: E402
from casio_scaled import casio_launch_pattern, scaled_bundle  # noqa: E402
from hilsim.analyzer import methods  # noqa: E402

from hilsim.core.bundle import Bundle  # noqa: E402
from hilsim.core.schema import LAUNCH_COLUMNS, missing_int_column  # noqa: E402

NSYS_FIXTURE = ROOT / "tests/data/nsys/vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv"
KINETO_FIXTURE = ROOT / "tests/data/kineto/hta-v100-ns-resolution.trace.json.gz"
GB = 1024**3
EDITS = {"portability": 300}  # deletions (and as many insertions) in B; --edits
CHUNK = 250_000  # rows per write when generating files


# ----------------------------------------------------------------------------- memory


def _status_kb(field: str, pid: str = "self") -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_kb() -> int:
    hwm = _status_kb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class TreeSampler(threading.Thread):
    """Samples the summed RSS of this process and its descendants every 50 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = 0
        self.max_children = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        if not Path("/proc/self/status").exists():
            return
        me = os.getpid()
        while not self._stop_event.wait(0.05):
            children = _descendants(me)
            self.max_children = max(self.max_children, len(children))
            if not children:
                continue
            total = sum(_status_kb("VmRSS", str(p)) or 0 for p in [me, *children])
            self.peak_kb = max(self.peak_kb, total)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


# ----------------------------------------------------------------------------- inputs


def _with_names(plan: Any, bundle: Bundle) -> Any:
    return plan.attach_names(bundle.launches["name"])


def perturbed_copy(bundle: Bundle, edits: int = 300, seed: int = 1) -> tuple[Bundle, np.ndarray]:
    """B for portability, and the true position in B of every launch of A (-1: deleted).

    Durations get a per-kernel scale in [0.6, 1.4] and 5 % log-normal noise; ``edits``
    launches are deleted and ``edits`` inserted (a random kernel at its mean duration).
    """
    rng = np.random.default_rng(seed)
    launches = bundle.launches
    names = launches["name"]
    codes = names.cat.codes.to_numpy().astype(np.int64)
    k = len(names.cat.categories)
    kernel_of_name = np.zeros(k, dtype=np.int64)  # short name of every full name
    kernel_of_name[codes] = launches["kernel"].cat.codes.to_numpy()
    duration = launches["duration_ns"].to_numpy(np.float64)
    duration = duration * rng.uniform(0.6, 1.4, k)[codes] * rng.lognormal(0, 0.05, len(codes))
    n = len(codes)
    keep = np.ones(n, dtype=bool)
    keep[rng.choice(n, size=min(edits, n // 4), replace=False)] = False
    codes, duration = codes[keep], duration[keep]
    where = np.sort(rng.integers(0, len(codes), size=edits))
    new_codes = rng.integers(0, k, size=edits)
    means = np.bincount(codes, weights=duration, minlength=k) / np.maximum(
        np.bincount(codes, minlength=k), 1
    )
    codes = np.insert(codes, where, new_codes)
    duration = np.insert(duration, where, means[new_codes])
    truth = np.full(n, -1, dtype=np.int64)
    kept = np.arange(int(keep.sum()))
    truth[keep] = kept + np.searchsorted(where, kept, side="right")
    m = len(codes)
    out = pd.DataFrame(
        {
            "launch_id": np.arange(m, dtype=np.int64),
            "name": pd.Categorical.from_codes(codes, categories=names.cat.categories),
            "duration_ns": np.round(duration).astype(np.int64),
        }
    )
    out["kernel"] = pd.Categorical.from_codes(kernel_of_name[codes],
                                              categories=launches["kernel"].cat.categories)
    for column in LAUNCH_COLUMNS:
        if column not in out.columns:
            out[column] = missing_int_column(m)
    out["region"] = pd.Categorical.from_codes(np.full(m, -1), categories=[])
    return Bundle(launches=out[list(LAUNCH_COLUMNS)]), truth


#: launch configuration per CASIO kernel class: grid_x, block_x, regs, smem_static
_CONFIGS = np.array(
    [
        [2048, 256, 32, 0],
        [4096, 128, 40, 0],
        [8192, 256, 24, 0],
        [1024, 512, 32, 0],
        [640, 256, 128, 16384],
        [3136, 256, 32, 0],
    ],
    dtype=np.int64,
)


def model_bundle(n: int, seed: int = 0) -> Bundle:
    """CASIO launches with launch configurations and the model's counters everywhere."""
    from hilsim.simmodel import model

    bundle = scaled_bundle(n, jitter_ns=50, seed=seed)
    launches = bundle.launches
    codes = launches["name"].cat.codes.to_numpy()
    cfg = _CONFIGS[codes % len(_CONFIGS)]
    for j, column in enumerate(("grid_x", "block_x", "regs", "smem_static")):
        launches[column] = pd.array(cfg[:, j], dtype="Int64")
    for column in ("grid_y", "grid_z", "block_y", "block_z"):
        launches[column] = pd.array(np.ones(n, dtype=np.int64), dtype="Int64")
    launches["smem_dynamic"] = pd.array(np.zeros(n, dtype=np.int64), dtype="Int64")
    rng = np.random.default_rng(seed + 1)
    cycles = launches["duration_ns"].to_numpy(np.float64) * 1.53  # ~QV100 clock, GHz
    rates = rng.uniform(0.2, 2.0, size=(len(_CONFIGS), 7))[codes % len(_CONFIGS)]

    def noisy(j: int, scale: float) -> np.ndarray:
        return cycles * 80 * scale * rates[:, j] * rng.lognormal(0, 0.1, n)

    inst = noisy(0, 1.0)
    l1 = noisy(1, 0.1)
    l2 = l1 * rng.uniform(0.1, 0.9, n)
    bundle.metrics = pd.DataFrame(
        {
            "launch_id": np.arange(n, dtype=np.int64),
            model.INST: inst,
            model.FP32_OPS[0]: inst * 32 * rng.uniform(0, 0.5, n),
            model.GLD_INST: l1 / 4,
            model.L1_LD: l1,
            model.L1_ST: noisy(2, 0.02),
            model.SHLD_INST: noisy(3, 0.05),
            model.L2_RD: l2,
            model.L2_WR: noisy(4, 0.02),
            model.DRAM_RD: l2 * 32 * rng.uniform(0, 1, n),
            model.DRAM_WR: noisy(5, 0.5),
        }
    )
    return bundle


def _casio_sequence(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    codes, durations, names = casio_launch_pattern()
    reps = -(-n // len(codes))
    rng = np.random.default_rng(seed)
    durations = np.tile(durations, reps)[:n] + rng.integers(0, 50, n)
    return np.tile(codes, reps)[:n], durations, names


def write_nsys_csv(path: Path, n: int) -> str:
    """``cuda_gpu_trace`` CSV in the fixture's format: n kernel rows + n // 8 memcpy rows."""
    lines = NSYS_FIXTURE.read_text().splitlines()
    header = lines[0]
    kernel_row = next(ln for ln in lines[1:] if "saxpyKernel" in ln)
    memcpy_row = next(ln for ln in lines[1:] if "memcpy" in ln)
    k_tail = kernel_row.split(",", 3)[3]  # GrdX.. up to Name, with the quoted name
    m_tail = memcpy_row.split(",", 3)[3]
    codes, durations, names = _casio_sequence(n)
    tails = [k_tail.replace("saxpyKernel", f"{name}Kernel") for name in names]
    gap = 1500
    rows = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(header + "\n")
        start, corr = 268525307, 123
        for lo in range(0, n, CHUNK):
            parts = []
            for i in range(lo, min(n, lo + CHUNK)):
                if i % 8 == 0:
                    parts.append(f"{start},15424,{corr},{m_tail}")
                    start += 15424 + gap
                    corr += 1
                d = int(durations[i])
                parts.append(f"{start},{d},{corr},{tails[codes[i]]}")
                start += d + gap
                corr += 2
            rows += len(parts)
            out.write("\n".join(parts) + "\n")
    return f"{rows:,} rows ({n:,} kernels), {path.stat().st_size / 1e9:.2f} GB"


_KERNEL = """  {{
    "ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7,
    "ts": {ts}, "dur": {dur},
    "args": {{
      "External id": {eid},      "queued": 0, "device": 0, "context": 1,      \
"stream": 7, "correlation": {corr},      "registers per thread": {regs},      \
"shared memory": {smem},      "blocks per SM": {bps},      "warps per SM": {wps},      \
"grid": {grid},      "block": {block},      "est. achieved occupancy %": {occ}
    }}
  }},
  {{
    "ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {ts},
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  }},
  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1102, "tid": 1102,
    "ts": {cts}, "dur": 4.950,
    "args": {{
      "External id": {eid},      "cbid": 211, "correlation": {corr}
    }}
  }},
  {{
    "ph": "s", "id": {corr}, "pid": 1102, "tid": 1102, "ts": {cts},
    "cat": "ac2g", "name": "ac2g"
  }},
"""
_MEMCPY = """  {{
    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, \
"tid": 7,
    "ts": {ts}, "dur": 1.280,
    "args": {{
      "External id": {eid},      "device": 0, "context": 1,      "stream": 7, \
"correlation": {corr},      "bytes": 256, "memory bandwidth (GB/s)": 0.2
    }}
  }},
"""
_STEP = """  {{
    "ph": "X", "cat": "{cat}", "name": "ProfilerStep#{step}", "pid": {pid}, "tid": {tid},
    "ts": {ts}, "dur": {dur},
    "args": {{
      "External id": {eid}
    }}
  }},
"""


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def kineto_templates() -> list[dict[str, Any]]:
    with gzip.open(KINETO_FIXTURE, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    return [e for e in data["traceEvents"] if e.get("cat") == "kernel"]


def kineto_bytes_estimate(n: int) -> float:
    kernels = kineto_templates()
    sizes = [len(_kernel_event(e, 0, 0, 0, 0)) for e in kernels]
    return n * (float(np.mean(sizes)) + len(_MEMCPY) / 8 + 2 * len(_STEP) / 1000 + 60)


def _kernel_event(e: dict[str, Any], ts: int, cts: int, corr: int, eid: int) -> str:
    a = e["args"]
    return _KERNEL.format(
        name=e["name"],
        ts=_us(ts),
        dur=_us(round(float(e["dur"]) * 1000)),
        eid=eid,
        corr=corr,
        regs=a["registers per thread"],
        smem=a["shared memory"],
        bps=f"{a['blocks per SM']:.6f}",
        wps=f"{a['warps per SM']:.6f}",
        grid=json.dumps(a["grid"]),
        block=json.dumps(a["block"]),
        occ=a["est. achieved occupancy %"],
        cts=_us(cts),
    )


def write_kineto_json(path: Path, n: int) -> str:
    """Kineto trace like the HTA V100 fixture, with ``n`` kernels (see module doc)."""
    with gzip.open(KINETO_FIXTURE, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    head = {
        k: v
        for k, v in data.items()
        if k not in ("traceEvents", "traceName", "displayTimeUnit", "INFO")
    }
    t0 = 1712195495505582988
    step_len = 1000
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n')
        ts, corr, eid = t0, 135071, 112
        step_start = ts
        for i in range(n):
            if i % step_len == 0:
                step_start = ts
            e = kernels[i % len(kernels)]
            out.write(_kernel_event(e, ts, ts - 40_000, corr, eid))
            ts += round(float(e["dur"]) * 1000) + 2000
            corr += 3
            eid += 2
            if i % 8 == 7:
                out.write(_MEMCPY.format(ts=_us(ts), eid=eid, corr=corr))
                ts += 1280 + 2000
                corr += 1
            if i % step_len == step_len - 1 or i == n - 1:
                step = i // step_len
                for cat, pid, tid in (
                    ("user_annotation", 1102, 1102),
                    ("gpu_user_annotation", 0, 7),
                ):
                    out.write(
                        _STEP.format(
                            cat=cat,
                            step=step,
                            pid=pid,
                            tid=tid,
                            ts=_us(step_start - 50_000),
                            dur=_us(ts - step_start + 50_000),
                            eid=eid,
                        )
                    )
        out.write(
            '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
            f'    "pid": "", "tid": "", "ts": {_us(ts)}\n  }}\n  ],\n'
        )
        out.write(
            '  "traceName": "/tmp/libkineto_activities_1102.json",\n  "displayTimeUnit": "ns"\n}\n'
        )
    return f"{n:,} kernels, {path.stat().st_size / 1e9:.2f} GB"


# ----------------------------------------------------------------------------- paths


@dataclass
class BenchPath:
    """One measured path: ``setup`` (untimed, in the measuring process) and ``run``."""

    name: str
    setup: Callable[[int, Path], Any]
    run: Callable[[Any], list[str]]
    prepare: Callable[[int, Path], str] | None = None  # file inputs, in another process
    skip: Callable[[int], str | None] | None = None


def _stem_plan(bundle: Bundle) -> Any:
    return _with_names(methods.create("stem").plan(bundle), bundle)


def setup_portability(n: int, workdir: Path) -> Any:
    a = scaled_bundle(n, jitter_ns=50)
    return (_stem_plan(a), a, *perturbed_copy(a, EDITS["portability"]))


def nerf_tiled_bundle(n: int, seed: int = 0) -> Bundle:
    """The real launch order of the shipped CASIO NeRF A100 profile (1,106 launches, 116
    kernels), repeated to ``n`` launches, every duration times 5 % log-normal jitter."""
    from hilsim.analyzer.examples import EXAMPLES

    from hilsim.formats.read import load_profile

    example = EXAMPLES[1]
    real = load_profile(example.path(example.profile)).launches
    reps = -(-n // len(real))
    rows = np.tile(np.arange(len(real)), reps)[:n]
    durations = real["duration_ns"].to_numpy(np.float64)[rows]
    durations *= np.random.default_rng(seed).lognormal(0.0, 0.05, n)
    out = pd.DataFrame({
        "launch_id": np.arange(n, dtype=np.int64),
        "name": pd.Categorical.from_codes(real["name"].cat.codes.to_numpy()[rows],
                                          categories=real["name"].cat.categories),
        "duration_ns": np.round(durations).astype(np.int64),
    })
    out["kernel"] = pd.Categorical.from_codes(real["kernel"].cat.codes.to_numpy()[rows],
                                              categories=real["kernel"].cat.categories)
    for column in LAUNCH_COLUMNS:
        if column not in out.columns:
            out[column] = missing_int_column(n)
    out["region"] = pd.Categorical.from_codes(np.full(n, -1), categories=[])
    return Bundle(launches=out[list(LAUNCH_COLUMNS)])


def setup_portability_nerf(n: int, workdir: Path) -> Any:
    a = nerf_tiled_bundle(n)
    return (_stem_plan(a), a, *perturbed_copy(a, EDITS["portability"]))


def run_portability(state: Any) -> list[str]:
    from hilsim.analyzer.portability import evaluate_portability

    plan, a, b, truth = state
    r = evaluate_portability(plan, a, b)
    al = r["alignment"]
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy()
    dur_b = b.launches["duration_ns"].to_numpy(np.float64)
    ok = truth[ids] >= 0
    true_error = abs(np.sum(weights[ok] * dur_b[truth[ids][ok]]) / dur_b.sum() - 1)
    return [
        f"B has {b.n_launches:,} launches; aligned {al['aligned']:,}, unaligned A "
        f"{al['unaligned_a']:,} / B {al['unaligned_b']:,} (true: {int((truth < 0).sum())} "
        f"each), samples lost {al['samples_lost']} of {plan.n_samples}",
        f"error on B {100 * r['error']:.2f}% (with the true pairing {100 * true_error:.2f}%)",
    ]


def setup_dse(n: int, workdir: Path) -> Any:
    from hilsim.simmodel.presets import load_preset

    bundle = model_bundle(n)
    return bundle, _stem_plan(bundle), load_preset("QV100").timing


def run_dse(state: Any) -> list[str]:
    from hilsim.simmodel.dse import counters_from_bundle, dse

    bundle, plan, config = state
    t0 = time.perf_counter()
    counters = counters_from_bundle(bundle)
    t1 = time.perf_counter()
    result = dse(config, counters, plan, ["l2_size=x2", "sm_count=x0.5", "l1_size=x0.5"])
    t2 = time.perf_counter()
    rows = ", ".join(
        f"{r.variation} {r.true_speedup:.3f}/{r.sampled_speedup:.3f}" for r in result.rows[1:]
    )
    return [
        f"counters_from_bundle {t1 - t0:.2f} s, dse (4 model runs) {t2 - t1:.2f} s; "
        f"{plan.n_samples} samples",
        f"true/sampled speedup: {rows}",
    ]


def setup_full(n: int, workdir: Path) -> Bundle:
    return full_bundle(n, 1000)


def run_evaluate(bundle: Bundle) -> list[str]:
    from hilsim.analyzer.evaluate import evaluate_method

    out = []
    for name in ("stem", "random"):
        t0 = time.perf_counter()
        summary = evaluate_method(methods.create(name), bundle, 20)
        seconds = time.perf_counter() - t0
        plan_s = sum(summary.plan_seconds)
        out.append(
            f"{name}: 20 seeds {seconds:.2f} s (plan {plan_s:.2f} s, score "
            f"{seconds - plan_s:.2f} s); mean error {100 * summary.mean_error:.3f}%"
        )
    return out


def run_compare(bundle: Bundle) -> list[str]:
    from hilsim.analyzer.compare import compare_methods

    result = compare_methods(bundle, None, 10)
    out = [
        f"{s['method']}: {s['runs']} run(s), mean plan {s['mean_plan_seconds']:.2f} s"
        for s in result["methods"]
    ]
    out += [f"skipped {name}: {why[:90]}" for name, why in result["skipped"].items()]
    return out


def setup_write(n: int, workdir: Path) -> Any:
    return full_bundle(n, 1000), workdir / f"write-{n}.bundle"


def run_write(state: Any) -> list[str]:
    from hilsim.core.bundle import _sha256, write_bundle

    bundle, path = state
    write_bundle(bundle, path, overwrite=True)
    size = sum(f.stat().st_size for f in path.iterdir())
    t0 = time.perf_counter()
    for f in path.iterdir():
        _sha256(f)
    sha = time.perf_counter() - t0
    shutil.rmtree(path)
    return [f"{size / 1e9:.2f} GB on disk; sha256 of the files alone {sha:.2f} s (after)"]


def _bundle_path(n: int, workdir: Path) -> Path:
    return workdir / f"full-{n}.bundle"


def prepare_read(n: int, workdir: Path) -> str:
    from hilsim.core.bundle import write_bundle

    path = _bundle_path(n, workdir)
    if not path.exists():
        write_bundle(full_bundle(n, 1000), path)
    return f"{sum(f.stat().st_size for f in path.iterdir()) / 1e9:.2f} GB bundle"


def run_read(path: Path) -> list[str]:
    from hilsim.core.bundle import _read_manifest, _verify_files, read_bundle

    bundle = read_bundle(path)
    launches = bundle.n_launches
    del bundle
    t0 = time.perf_counter()
    _verify_files(path, _read_manifest(path))
    return [
        f"{launches:,} launches; sha256 verification alone {time.perf_counter() - t0:.2f} s (after)"
    ]


def _nsys_path(n: int, workdir: Path) -> Path:
    return workdir / f"nsys-{n}_cuda_gpu_trace.csv"


def prepare_nsys(n: int, workdir: Path) -> str:
    path = _nsys_path(n, workdir)
    return "exists" if path.exists() else write_nsys_csv(path, n)


def _kineto_path(n: int, workdir: Path) -> Path:
    return workdir / f"kineto-{n}.pt.trace.json"


def prepare_kineto(n: int, workdir: Path) -> str:
    path = _kineto_path(n, workdir)
    return "exists" if path.exists() else write_kineto_json(path, n)


def skip_kineto(n: int) -> str | None:
    from hilsim.formats.kineto import MAX_TRACE_BYTES

    size = kineto_bytes_estimate(n)
    if size > MAX_TRACE_BYTES:
        return (
            f"trace would be ~{size / 1e9:.1f} GB, above the importer's MAX_TRACE_BYTES "
            f"({MAX_TRACE_BYTES / 1e9:.1f} GB): refused by design"
        )
    return None


def run_import(path: Path) -> list[str]:
    from hilsim.formats.read import load_profile

    bundle = load_profile(path)
    attrs = bundle.launches.attrs
    return [
        f"{bundle.n_launches:,} launches, {len(bundle.launches['name'].cat.categories)} "
        f"names, dropped {attrs.get('dropped_non_kernel_rows', 0):,} non-kernel rows"
        + (f", {len(bundle.regions):,} regions" if bundle.regions is not None else "")
    ]


PATHS: dict[str, BenchPath] = {
    p.name: p
    for p in (
        BenchPath("portability", setup_portability, run_portability),
        BenchPath("portability-nerf", setup_portability_nerf, run_portability),
        BenchPath("dse", setup_dse, run_dse),
        BenchPath("evaluate", setup_full, run_evaluate),
        BenchPath("compare", setup_full, run_compare),
        BenchPath("bundle-write", setup_write, run_write),
        BenchPath("bundle-read", _bundle_path, run_read, prepare_read),
        BenchPath("import-nsys", _nsys_path, run_import, prepare_nsys),
        BenchPath("import-kineto", _kineto_path, run_import, prepare_kineto, skip_kineto),
    )
}


# ----------------------------------------------------------------------------- driver


def _prepare_child(name: str, n: int, workdir: str, conn: Any) -> None:
    try:
        t0 = time.perf_counter()
        note = PATHS[name].prepare(n, Path(workdir))  # type: ignore[misc]
        conn.send({"note": f"{note} (made in {time.perf_counter() - t0:.1f} s)"})
    except BaseException:  # noqa: BLE001 - reported to the parent
        conn.send({"error": traceback.format_exc()})


def _measure_child(name: str, n: int, workdir: str, edits: int, conn: Any) -> None:
    try:
        EDITS["portability"] = edits
        path = PATHS[name]
        state = path.setup(n, Path(workdir))
        gc.collect()
        inputs_kb = _status_kb("VmRSS") or 0
        resettable = _reset_peak()
        sampler = TreeSampler()
        sampler.start()
        t0 = time.perf_counter()
        detail = path.run(state)
        seconds = time.perf_counter() - t0
        sampler.stop()
        peak_kb = max(_peak_kb(), sampler.peak_kb)
        if not resettable:
            detail.append("peak includes building the inputs (VmHWM could not be reset)")
        if sampler.max_children:
            detail.append(
                f"peak sums this process and up to {sampler.max_children} "
                "worker processes (sampled every 50 ms)"
            )
        conn.send(
            {"seconds": seconds, "peak_kb": peak_kb, "inputs_kb": inputs_kb, "detail": detail}
        )
    except BaseException:  # noqa: BLE001 - reported to the parent
        conn.send({"error": traceback.format_exc()})


def _in_child(target: Callable[..., None], args: tuple, timeout: float) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(*args, sender))
    process.start()
    sender.close()
    result: dict[str, Any] | None = None
    if receiver.poll(timeout):
        try:
            result = receiver.recv()
        except EOFError:
            result = None
    if result is None and process.is_alive():
        process.kill()
        process.join()
        return {"error": f"timed out after {timeout:.0f} s"}
    process.join()
    if result is None:
        return {"error": f"process died (exit code {process.exitcode}; killed for memory?)"}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--only", choices=list(PATHS), help="run one path")
    parser.add_argument(
        "--workdir", type=Path, help="keep generated files here (default: a temporary folder)"
    )
    parser.add_argument(
        "--edits",
        type=int,
        default=300,
        help="portability: launches deleted from (and inserted into) B",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per path")
    args = parser.parse_args()
    names = [args.only] if args.only else list(PATHS)
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_scale-")
        workdir = Path(tmp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    n = args.launches
    print(f"{n:,} launches, {os.cpu_count()} CPUs; each path in a fresh process")
    print(f"{'path':<14} {'seconds':>9} {'peak GB':>8} {'inputs GB':>9}")
    try:
        for name in names:
            path = PATHS[name]
            reason = path.skip(n) if path.skip else None
            if reason:
                print(f"{name:<14} {'skipped':>9}  {reason}", flush=True)
                continue
            notes = []
            if path.prepare is not None:
                made = _in_child(_prepare_child, (name, n, str(workdir)), args.timeout)
                if "error" in made:
                    print(f"{name:<14} {'failed':>9}  input: {made['error'].strip()}", flush=True)
                    continue
                notes.append(f"input: {made['note']}")
            r = _in_child(_measure_child, (name, n, str(workdir), args.edits), args.timeout)
            if "error" in r:
                print(f"{name:<14} {'failed':>9}  {r['error'].strip()}", flush=True)
                continue
            print(
                f"{name:<14} {r['seconds']:>9.2f} {r['peak_kb'] * 1024 / GB:>8.2f} "
                f"{r['inputs_kb'] * 1024 / GB:>9.2f}",
                flush=True,
            )
            for line in notes + r["detail"]:
                print(f"{'':<16}{line}", flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
