"""One entry point for every profile the analyzer reads.

``load_profile(path)`` returns a :class:`~analyzer.bundle.Bundle` from a bundle
folder or from a foreign file (format sniffed by :mod:`analyzer.importers.detect`);
``import_profile`` also joins Nsight Compute metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analyzer.bundle import Bundle, default_manifest, read_bundle
from analyzer.errors import HilsimError


def _read_launches(path: Path, fmt: str):
    from analyzer.importers import nsys_stats, wide_durations

    if fmt in ("nsys-gpu-trace-csv", "nsys-kern-exec-csv"):
        return nsys_stats.read_nsys_stats_csv(path), "nsys stats"
    if fmt == "wide-durations-csv":
        return wide_durations.read_wide_durations(path), "wide duration table"
    raise HilsimError(
        f"{path}: format {fmt!r} cannot be imported as launches here "
        "(supported: nsys stats CSV cuda_gpu_trace / cuda_kern_exec_trace, "
        "wide per-kernel duration CSV)"
    )


def import_profile(
    path: str | Path,
    fmt: str = "auto",
    ncu: str | Path | None = None,
    ncu_join: str = "order",
    ncu_first_launch: int = 0,
) -> Bundle:
    """Import a foreign profile (and optional ncu CSV) into an in-memory bundle."""
    from analyzer.importers.detect import sniff_format

    source = Path(path)
    if not source.is_file():
        raise HilsimError(f"{source}: no such file")
    if fmt == "auto":
        fmt = sniff_format(source)
    launches, tool = _read_launches(source, fmt)
    profilers: list[dict[str, Any]] = [{"name": tool, "format": fmt, "file": source.name}]
    metrics = None
    if ncu is not None:
        from analyzer.importers.ncu_csv import read_ncu_metrics_for_bundle

        metrics = read_ncu_metrics_for_bundle(
            Path(ncu), launches, by=ncu_join, first_launch=ncu_first_launch
        )
        profilers.append(
            {
                "name": "nsight-compute",
                "file": Path(ncu).name,
                "join": ncu_join,
                "first_launch": ncu_first_launch,
            }
        )
    manifest = default_manifest(
        profilers=profilers,
        source={"files": [str(source)] + ([str(ncu)] if ncu else []), "format": fmt},
    )
    dropped = launches.attrs.get("dropped_non_kernel_rows")
    if dropped:
        manifest["source"]["dropped_non_kernel_rows"] = int(dropped)
    return Bundle(launches=launches, metrics=metrics, manifest=manifest)


def load_profile(path: str | Path) -> Bundle:
    """A bundle folder, or any importable profile file, as a Bundle."""
    source = Path(path)
    if source.is_dir():
        return read_bundle(source)
    if not source.exists():
        raise HilsimError(f"{source}: no such file or bundle folder")
    bundle = import_profile(source)
    bundle.path = source
    return bundle
