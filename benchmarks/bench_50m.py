"""The user's path at GPT-scale launch counts: whole commands, from disk.

Usage: python benchmarks/bench_50m.py [--launches 50000000] [--workdir DIR]
       [--steps gen-csv,gen-sqlite,import-csv,import-sqlite,plan,evaluate,compare]

Inputs (generated once into ``--workdir``, not timed):

* ``nsys-N_cuda_gpu_trace.csv``: ``nsys stats --report cuda_gpu_trace`` CSV in the exact
  layout of ``tests/data/nsys/*.csv`` (``bench_scale.write_nsys_csv``): N kernel rows
  with the CASIO kernels and durations (``casio_scaled.py``) plus a memcpy row per 8.
* ``nsys-N.sqlite``: an ``nsys export --type sqlite`` database with the tables and
  columns the importer reads (``CUPTI_ACTIVITY_KIND_KERNEL``, ``StringIds``,
  ``TARGET_INFO_GPU``): the same N launches.

Each step is the ``hilsim`` command a user runs (``import``, ``plan -m stem``,
``evaluate -m stem --seeds 20``, ``compare`` with the default methods) in its own
process on the files on disk; the figures are its wall time and the peak of the summed
RSS of its process tree (sampled every 50 ms), and the largest single process's peak
(``ru_maxrss`` of the children). Goals: import <= 8 GB (the SQLite import <= 300 s on
2 cores); plan and evaluate <= 60 s and <= 8 GB; compare <= 8 GB.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import NSYS_FIXTURE, _casio_sequence  # noqa: E402

GB = 1024**3
STEPS = (
    "gen-csv",
    "gen-sqlite",
    "gen-bundle",
    "import-csv",
    "import-sqlite",
    "plan",
    "evaluate",
    "compare",
)


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def write_nsys_csv(path: Path, n: int, chunk: int = 1_000_000) -> str:
    """``bench_scale.write_nsys_csv``'s file (byte for byte), rows formatted by numpy.

    n kernel rows with the CASIO kernels and durations plus one memcpy row before every
    8th kernel, in the fixture's exact layout.
    """
    lines = NSYS_FIXTURE.read_text().splitlines()
    kernel_row = next(ln for ln in lines[1:] if "saxpyKernel" in ln)
    memcpy_row = next(ln for ln in lines[1:] if "memcpy" in ln)
    k_tail = kernel_row.split(",", 3)[3]
    m_tail = memcpy_row.split(",", 3)[3]
    codes, durations, names = _casio_sequence(n)
    tails = np.array([k_tail.replace("saxpyKernel", f"{name}Kernel") for name in names])
    gap, s0, mdur = 1500, 268525307, 15424
    i = np.arange(n, dtype=np.int64)
    n_memcpy = i // 8 + 1  # memcpy rows up to and including kernel i's
    starts = s0 + np.concatenate(([0], np.cumsum(durations[:-1] + gap))) + n_memcpy * (mdur + gap)
    corrs = 123 + 2 * i + n_memcpy
    tmp = path.with_suffix(".tmp")
    rows = 0
    text = pa.array(tails)
    with open(tmp, "wb") as out:
        out.write((lines[0] + "\n").encode())
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            k = pc.binary_join_element_wise(
                _text(starts[lo:hi]),
                _text(durations[lo:hi]),
                _text(corrs[lo:hi]),
                text.take(pa.array(codes[lo:hi])),
                ",",
            )
            first = np.flatnonzero(i[lo:hi] % 8 == 0)
            m = pc.binary_join_element_wise(
                _text(starts[lo:hi][first] - (mdur + gap)),
                pa.scalar(str(mdur)),
                _text(corrs[lo:hi][first] - 1),
                pa.scalar(m_tail),
                ",",
            )
            # row order: a memcpy row before every kernel row it precedes
            position_k = np.arange(hi - lo) + np.searchsorted(first, np.arange(hi - lo), "right")
            position_m = first + np.arange(len(first))
            order = np.empty(len(k) + len(m), dtype=np.int64)
            order[position_k] = np.arange(len(k))
            order[position_m] = len(k) + np.arange(len(m))
            merged = pa.concat_arrays([k, m]).take(pa.array(order))
            merged = pc.binary_join_element_wise(merged, pa.scalar(""), "\n")
            offsets = np.frombuffer(merged.buffers()[1], dtype=np.int32)
            offsets = offsets[merged.offset : merged.offset + len(merged) + 1]
            out.write(memoryview(merged.buffers()[2])[offsets[0] : offsets[-1]])
            rows += len(merged)
    os.replace(tmp, path)
    return f"{rows:,} rows ({n:,} kernels), {path.stat().st_size / 1e9:.2f} GB"


def write_nsys_sqlite(path: Path, n: int, chunk: int = 1_000_000) -> str:
    """An nsys SQLite export of ``n`` launches (CASIO kernels and durations)."""
    codes, durations, names = _casio_sequence(n)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    conn.executescript(
        """
        PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
            start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
            contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,
            gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
            blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
            staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
            registersPerThread INTEGER NOT NULL);
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, busLocation TEXT,
            smCount INTEGER, totalMemory INTEGER, computeMajor INTEGER, computeMinor INTEGER);
        """
    )
    conn.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [(i + 1, f"void {name}Kernel(float*, int)") for i, name in enumerate(names)],
    )
    conn.execute(
        "INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA A100-PCIE-40GB', '0000:17:00.0', "
        "108, 42505273344, 8, 0)"
    )
    starts = 268525307 + np.concatenate([[0], np.cumsum(durations[:-1] + 1500)])
    grid = np.array([1024, 512, 256, 2048, 128, 64], dtype=np.int64)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        c = codes[lo:hi]
        s = starts[lo:hi]
        rows = zip(
            s.tolist(),
            (s + durations[lo:hi]).tolist(),
            ((np.arange(lo, hi) * 2 + 123).tolist()),
            (c + 1).tolist(),
            grid[c % len(grid)].tolist(),
            strict=True,
        )
        conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
            "(?, ?, 0, 1, 7, ?, 281474976710656, ?4, ?4, ?, 1, 1, 256, 1, 1, 0, 0, 32)",
            rows,
        )
        conn.commit()
    conn.close()
    os.replace(tmp, path)
    return f"{n:,} launches, {path.stat().st_size / 1e9:.2f} GB"


def write_bundle_direct(path: Path, n: int, chunk: int = 2_000_000) -> str:
    """The bundle ``hilsim import`` makes of the nsys CSV (same columns, types, pandas
    metadata and manifest), written row group by row group: the input of ``plan``,
    ``evaluate`` and ``compare`` without importing N launches first.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    from hilsim.core.bundle import LAUNCHES, default_manifest, finish_manifest
    from hilsim.core.files import atomic_directory
    from hilsim.core.schema import LAUNCH_COLUMNS, normalize_launches

    codes, durations, names = _casio_sequence(n)
    full = [f"void {name}Kernel(float*, int)" for name in names]
    grid = np.array([1024, 512, 256, 2048, 128, 64], dtype=np.int64)
    starts = 268525307 + np.concatenate([[0], np.cumsum(durations[:-1] + 1500)])

    def frame(lo: int, hi: int) -> pd.DataFrame:
        c = codes[lo:hi]
        raw = pd.DataFrame(
            {
                "name": pd.Categorical.from_codes(c, categories=full),
                "duration_ns": durations[lo:hi],
                "start_ns": starts[lo:hi],
                "grid_x": grid[c % len(grid)],
                "grid_y": 1,
                "grid_z": 1,
                "block_x": 256,
                "block_y": 1,
                "block_z": 1,
                "regs": 32,
                "smem_static": 0,
                "smem_dynamic": 0,
                "stream": 7,
                "device": 0,
                "correlation_id": np.arange(lo, hi) * 2 + 123,
            }
        )
        out = normalize_launches(raw, "generated")
        out["launch_id"] += lo
        # every chunk with every name (one dictionary for the whole column)
        for column in ("name", "kernel"):
            out[column] = out[column].cat.set_categories(
                sorted(set(full)) if column == "name" else sorted({f"{x}Kernel" for x in names})
            )
        return out[list(LAUNCH_COLUMNS)]

    with atomic_directory(path, overwrite=True) as tmp:
        first = pa.Table.from_pandas(frame(0, min(n, 1000)), preserve_index=False)
        with pq.ParquetWriter(tmp / LAUNCHES, first.schema, compression="zstd") as writer:
            for lo in range(0, n, chunk):
                table = pa.Table.from_pandas(frame(lo, min(n, lo + chunk)), preserve_index=False)
                writer.write_table(table.cast(first.schema))
        manifest = default_manifest(
            profilers=[{"name": "nsys stats", "format": "nsys-gpu-trace-csv", "file": "gen"}]
        )
        finish_manifest(tmp, manifest, n)  # files' sha256, n_launches and the digest
    return f"{n:,} launches, {(path / LAUNCHES).stat().st_size / 1e9:.2f} GB launches.parquet"


class TreePeak(threading.Thread):
    """Peak summed RSS (bytes) of a process and its descendants, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._halt = pid, 0, threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._halt.wait(0.05):
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def timed(
    argv: list[str], log: Path, cwd: Path | None = None
) -> tuple[float, float, float, float, int]:
    """(wall s, CPU s, tree peak GB, largest process GB, exit code) of one command.

    CPU s (user + sys of the command's processes) says how much of the wall time was the
    command's own work on a machine other jobs share.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        sampler = TreePeak(proc.pid)
        sampler.start()
        code = proc.wait()
    wall = time.perf_counter() - t0
    peak = sampler.stop()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    single, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime - cpu0
    single_gb = single * 1024 / GB if single > before else float("nan")
    return wall, cpu, peak / GB, single_gb, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launches", type=int, default=50_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("bench-50m"))
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter whose hilsim runs the commands (e.g. another checkout's venv, "
        "for before/after figures)",
    )
    args = parser.parse_args()
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown step(s) {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}")
    n, work = args.launches, args.workdir
    work.mkdir(parents=True, exist_ok=True)
    csv, db = work / f"nsys-{n}_cuda_gpu_trace.csv", work / f"nsys-{n}.sqlite"
    bundle = work / f"nsys-{n}.bundle"
    hilsim = [args.python, "-m", "hilsim.cli.main"]
    print(f"{n:,} launches, workdir {work}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for step in steps:
        if step == "gen-csv":
            note = "exists" if csv.exists() else write_nsys_csv(csv, n)
            print(f"{'gen-csv':14s} {note}", flush=True)
            continue
        if step == "gen-bundle":
            note = "exists" if bundle.exists() else write_bundle_direct(bundle, n)
            print(f"{'gen-bundle':14s} {note}", flush=True)
            continue
        if step == "gen-sqlite":
            note = "exists" if db.exists() else write_nsys_sqlite(db, n)
            print(f"{'gen-sqlite':14s} {note}", flush=True)
            continue
        if step == "import-csv":
            argv = [*hilsim, "import", str(csv), "-o", str(bundle), "--force"]
        elif step == "import-sqlite":
            argv = [*hilsim, "import", str(db), "-o", str(work / "sqlite.bundle"), "--force"]
        elif step == "plan":
            argv = [*hilsim, "plan", str(bundle), "-m", "stem", "-o", str(work / "stem.json")]
        elif step == "evaluate":
            argv = [*hilsim, "evaluate", str(bundle), "-m", "stem", "--seeds", str(args.seeds)]
        else:
            argv = [*hilsim, "compare", str(bundle), "-o", str(work / "compare")]
        wall, cpu, tree, single, code = timed(argv, work / f"{step}.log")
        tail = (work / f"{step}.log").read_text(errors="replace").strip().splitlines()[-1:]
        print(
            f"{step:14s} {wall:7.1f} s wall {cpu:7.1f} s CPU  peak {tree:5.2f} GB (tree)  "
            f"{single:5.2f} GB (largest process)  exit {code}  | {' '.join(tail)[:90]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
