"""One entry point for every profile hilsim reads.

``load_profile(path)`` returns a :class:`~hilsim.core.bundle.Bundle` from a bundle
folder or from a foreign file (format sniffed by :mod:`hilsim.formats.detect`, read by
the reader the format registry :data:`hilsim.formats.FORMATS` names); ``import_profile``
also joins Nsight Compute metrics.

Formats (``docs/formats.md``): ``nsys stats`` CSV (``cuda_gpu_trace``,
``cuda_kern_exec_trace``), wide per-kernel duration tables, Nsight Systems SQLite exports
(and ``.nsys-rep`` reports, exported with ``nsys export`` when nsys is installed),
PyTorch-profiler (Kineto) traces, CUPTI activity records written by ``hilsim agent profile
--backend cupti``, GPGPU-Sim logs; plus Nsight Compute CSV metrics (``--ncu``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from hilsim.core.bundle import Bundle, read_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import recover
from hilsim.core.inputs import check_file, input_kind
from hilsim.formats import FORMATS, IMPORTABLE, load
from hilsim.formats.tracewarnings import trace_warnings

# Each format's reader is imported when its format is read (the registry names it by
# path): `hilsim plan BUNDLE` then loads no reader, and `hilsim import FILE` only its own
# (sqlite3 for Nsight Systems exports, msgspec for Kineto traces, the GPGPU-Sim log parser,
# the CSV readers), which keeps both commands' start-up as short as a bundle read needs.


def read_format(path: Path, fmt: str, columns: Iterable[str] | None = None) -> Bundle:
    """``path`` read as format ``fmt`` by the reader the registry names (``columns``: the
    launch columns the caller reads, for a reader that can skip the others)."""
    entry = FORMATS.get(fmt)
    if entry is None:
        raise HilsimError(
            f"{path}: format {fmt!r} is not importable; known: {', '.join(IMPORTABLE)}"
        )
    if entry.refusal is not None:
        raise HilsimError(f"{path}: {entry.refusal}")
    reader = load(entry.reader)
    return reader(path, columns=columns) if entry.columns else reader(path)


def _read_report(report: Path) -> Bundle:
    """An Nsight Systems report, exported by ``nsys export`` into a private temporary
    folder (mode 0700, removed after reading): nothing is written beside the input and
    no existing file or symlink is overwritten or followed."""
    from hilsim.formats.nsys_rep import export_nsys_rep  # lazy: see above

    with tempfile.TemporaryDirectory(prefix="hilsim-nsys-export-") as private:
        bundle = read_format(export_nsys_rep(report, out_dir=private), "sqlite")
    bundle.manifest.setdefault("source", {})["files"] = [str(report)]
    for profiler in bundle.manifest.get("profilers", [])[:1]:
        profiler["file"] = report.name
    return bundle


def resolve_format(source: Path, fmt: str) -> str:
    """``fmt``, or the sniffed format of ``source`` when ``fmt`` is ``auto``."""
    if fmt != "auto":
        return fmt
    # lazy: the sniffs (and the nsys header rule they use) load only to guess
    from hilsim.formats.detect import sniff_format

    return sniff_format(source)


def import_profile(
    path: str | Path,
    fmt: str = "auto",
    ncu: str | Path | None = None,
    ncu_join: str = "order",
    ncu_first_launch: int = 0,
    columns: Iterable[str] | None = None,
) -> Bundle:
    """Import a foreign profile (and optional ncu CSV) into an in-memory bundle.

    ``columns``: the launch columns the caller reads (default: all); a reader that can
    skip the others (the nsys stats CSV) leaves them null.
    """
    source = Path(path)
    if source.is_dir():
        raise HilsimError(
            f"{source}: is a directory, expected a profile file (a bundle folder is "
            "already imported)"
        )
    check_file(source, "a profile file")  # regular files only (no FIFO, no device)
    if source.suffix in (".nsys-rep", ".qdrep"):
        bundle = _read_report(source)
    else:
        bundle = read_format(source, resolve_format(source, fmt), columns)
    warnings = list(bundle.launches.attrs.get("warnings") or [])
    if warnings:
        bundle.manifest["warnings"] = [*bundle.manifest.get("warnings", []), *warnings]
    if ncu is not None:
        from hilsim.formats.ncu_csv import read_ncu_metrics_for_bundle  # lazy: see above

        if bundle.metrics is not None:
            raise HilsimError(f"{source}: already carries metrics; --ncu would replace them")
        bundle.metrics = read_ncu_metrics_for_bundle(
            Path(ncu), bundle.launches, by=ncu_join, first_launch=ncu_first_launch
        )
        bundle.manifest.setdefault("profilers", []).append(
            {
                "name": "nsight-compute",
                "file": Path(ncu).name,
                "join": ncu_join,
                "first_launch": ncu_first_launch,
                "launches_with_metrics": int(len(bundle.metrics)),
            }
        )
        bundle.manifest.setdefault("source", {}).setdefault("files", []).append(str(ncu))
    # the importer's own warnings (duplicates dropped, ...) first, then the trace's
    bundle.manifest["warnings"] = [
        *bundle.manifest.get("warnings", []),
        *trace_warnings(bundle.launches, bundle.manifest),
    ]
    return bundle


def load_profile(path: str | Path, columns: Iterable[str] | None = None) -> Bundle:
    """A bundle folder, or any importable profile file, as a Bundle.

    ``columns``: read only these launch columns (of a bundle folder, see
    :func:`~hilsim.core.bundle.read_bundle`; of a profile file, where its reader can
    skip the others).
    """
    source = Path(path)
    # a bundle whose --force replacement was interrupted between its two renames (no
    # RENAME_EXCHANGE) is moved back before the path is looked at
    recover(source)
    if input_kind(source, "a bundle folder or a profile file") == "folder":
        return read_bundle(source, columns=columns)
    bundle = import_profile(source, columns=columns)
    bundle.path = source
    return bundle
