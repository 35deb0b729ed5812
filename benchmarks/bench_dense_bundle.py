"""Memory of whole commands on the densest bundle a file can hold: launches that delta-
encode to almost nothing (one kernel, constant duration, starts a constant stride apart),
signed as ``hilsim import`` signs them, so every check passes and only
``max_rows_per_byte`` bounds the rows.

Prints, per command, the bundle's size on disk, rows per byte, the process tree's peak RSS
and that peak per launch and per byte of the file: the figures ``docs/limits.md`` states.

    python benchmarks/bench_dense_bundle.py --launches 10000000 --workdir W
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_50m import TreePeak  # noqa: E402

COMMANDS = {
    "plan-random": ["plan", "{b}", "-m", "random", "-o", "{w}/plan.json"],
    "evaluate-stem": ["evaluate", "{b}", "-m", "stem", "--seeds", "2", "-o", "{w}/e.json"],
    "evaluate-plan": ["evaluate", "{b}", "--plan", "{w}/plan.json", "-o", "{w}/e2.json"],
}


def write_dense_bundle(path: Path, n: int, chunk: int = 5_000_000) -> int:
    """A signed bundle of ``n`` identical launches; returns the launches.parquet size."""
    from hilsim.core.bundle import LAUNCHES, MANIFEST, default_manifest, manifest_digest
    from hilsim.core.files import atomic_directory
    from hilsim.core.schema import LAUNCH_COLUMNS, normalize_launches

    name = "void denseKernel(float*, int)"

    def frame(lo: int, hi: int) -> pd.DataFrame:
        raw = pd.DataFrame({
            "name": pd.Categorical.from_codes(np.zeros(hi - lo, dtype=np.int8), [name]),
            "duration_ns": np.full(hi - lo, 1000, dtype=np.int64),
            "start_ns": 1_000_000 + 2000 * np.arange(lo, hi, dtype=np.int64),
            "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1,
            "block_z": 1, "regs": 32, "smem_static": 0, "smem_dynamic": 0, "stream": 7,
            "device": 0, "correlation_id": np.arange(lo, hi, dtype=np.int64),
        })
        out = normalize_launches(raw, "generated")
        out["launch_id"] += lo
        return out[list(LAUNCH_COLUMNS)]

    with atomic_directory(path, overwrite=True) as tmp:
        first = pa.Table.from_pandas(frame(0, min(n, 1000)), preserve_index=False)
        # integers delta-encoded (a constant stride costs a few bits per row), text by
        # dictionary: the densest layout parquet offers for such a trace
        ints = [f.name for f in first.schema if pa.types.is_integer(f.type)]
        with pq.ParquetWriter(tmp / LAUNCHES, first.schema, compression="zstd",
                              use_dictionary=[c for c in first.schema.names if c not in ints],
                              column_encoding={c: "DELTA_BINARY_PACKED" for c in ints},
                              ) as writer:
            for lo in range(0, n, chunk):
                table = pa.Table.from_pandas(frame(lo, min(n, lo + chunk)), preserve_index=False)
                writer.write_table(table.cast(first.schema), row_group_size=1 << 20)
        manifest = default_manifest(
            profilers=[{"name": "nsys stats", "format": "nsys-gpu-trace-csv", "file": "gen"}]
        )
        size = (tmp / LAUNCHES).stat().st_size
        digest = hashlib.sha256((tmp / LAUNCHES).read_bytes()).hexdigest()
        manifest["files"] = {LAUNCHES: {"sha256": digest, "bytes": size}}
        manifest["n_launches"] = n
        manifest["digest"] = manifest_digest(manifest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launches", type=int, default=10_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("bench-dense"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    bundle = args.workdir / "dense.bundle"
    size = write_dense_bundle(bundle, args.launches)
    total = size + (bundle / "manifest.json").stat().st_size
    print(f"{args.launches:,} launches, launches.parquet {size:,} bytes "
          f"({args.launches / size:.2f} rows/byte), bundle {total:,} bytes")
    for label, template in COMMANDS.items():
        argv = [a.format(b=bundle, w=args.workdir) for a in template]
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "hilsim.cli.main", *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        peak = TreePeak(proc.pid)
        peak.start()
        _, err = proc.communicate()
        rss = peak.stop()
        line = err.strip().splitlines()[-1] if err.strip() else ""
        print(f"{label}: exit {proc.returncode}, {time.monotonic() - started:.1f} s wall, peak "
              f"RSS {rss / 2**20:,.0f} MiB = {rss / args.launches:.0f} B per launch = "
              f"{rss / total:,.0f}x the bundle's bytes {line[:120]}")


if __name__ == "__main__":
    main()
