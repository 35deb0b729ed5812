"""The profile formats hilsim reads: one registry, name -> :class:`Format`.

The data layer of the project: the readers here (and the GPGPU-Sim log reader in
``simmodel/gpgpusim/logprofile.py``) turn profiler output into a
:class:`~hilsim.core.bundle.Bundle`; they import only :mod:`hilsim.core`, so the GPU host
(``agent/``) and the analyses both stand on them. ``docs/formats.md`` states, per format,
what is read and the facts each reader relies on.

As :data:`hilsim.analyzer.methods.BUILTIN` is for sampling methods, :data:`BUILTIN` is the
one place a format is declared: its sniff, its reader, whether it streams. Functions are
named by ``"module:function"`` and imported on first use (:func:`load`), so this module
imports nothing heavy: the CLI reads the ``--format`` choices (:data:`IMPORTABLE`) without
pandas, and ``hilsim import`` of one format loads only that format's reader. The formats
layer never imports ``hilsim.simmodel``: the simulator-log entry names its functions by
path only.

:func:`hilsim.formats.detect.sniff_format` asks each format's sniff in :data:`BUILTIN`'s
order and takes the first that accepts the file's head; :func:`hilsim.formats.read.read_format`
calls the reader of the format found (or named with ``--format``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class Format:
    """One profile format: how it is recognised and read.

    ``sniff`` and ``reader`` are ``"module:function"`` paths, imported when first called.
    A sniff takes a :class:`hilsim.formats.detect.Head` (the file's first 64 KiB, with
    views) and returns whether the file is this format; it runs for every file whose format
    is guessed, so it lives in a module that loads fast. A reader takes the file's path
    (and ``columns=`` when :attr:`columns` is set) and returns a
    :class:`~hilsim.core.bundle.Bundle`.
    """

    #: the ``--format`` name, also written into the bundle manifest's ``source.format``
    name: str
    #: what the file is, in a few words (``docs/formats.md``, ``hilsim import --help``)
    title: str
    #: ``"module:function"`` of the sniff (``None``: only chosen with ``--format``)
    sniff: str | None
    #: ``"module:function"`` of the reader
    reader: str
    #: the reader takes ``columns=`` and may leave launch columns the caller does not read
    #: null
    columns: bool = False
    #: large files of this format are imported chunk by chunk
    #: (:mod:`hilsim.formats.streaming`)
    streams: bool = False
    #: sniffed but not imported on its own: ``hilsim import`` refuses the file with this
    #: text (``None``: an importable timeline of launches)
    refusal: str | None = None


_NCU_REFUSAL = (
    "is Nsight Compute CSV (metrics, not a timeline of every launch); import the light "
    "profile and pass this file with --ncu"
)
_DETECT = "hilsim.formats.detect"

#: every format hilsim recognises, in the order ``--format auto`` asks their sniffs
BUILTIN: tuple[Format, ...] = (
    Format("cupti-records", "CUPTI activity records (hilsim agent profile --backend cupti)",
           "hilsim.formats.cupti_format:is_cupti_records_head",
           "hilsim.formats.cupti_records:bundle_from_cupti_records"),
    Format("sqlite", "Nsight Systems SQLite export (nsys export --type sqlite)",
           f"{_DETECT}:is_sqlite", "hilsim.formats.nsys_sqlite:bundle_from_nsys_sqlite",
           streams=True),
    Format("kineto-json", "PyTorch profiler (Kineto) trace, .json or .json.gz",
           f"{_DETECT}:is_kineto_json", "hilsim.formats.kineto:bundle_from_kineto"),
    Format("gpgpusim-log", "GPGPU-Sim log (the simulator's stdout)",
           "hilsim.simmodel.gpgpusim.logprofile:is_gpgpusim_log",
           "hilsim.simmodel.gpgpusim.logprofile:bundle_from_gpgpusim_log"),
    Format("nsys-gpu-trace-csv", "nsys stats --format csv, report cuda_gpu_trace",
           f"{_DETECT}:is_nsys_gpu_trace_csv", "hilsim.formats.nsys_stats:bundle_from_gpu_trace",
           columns=True, streams=True),
    Format("nsys-kern-exec-csv", "nsys stats --format csv, report cuda_kern_exec_trace",
           f"{_DETECT}:is_nsys_kern_exec_csv",
           "hilsim.formats.nsys_stats:bundle_from_kern_exec", columns=True, streams=True),
    Format("ncu-csv-long", "Nsight Compute --csv, details page",
           f"{_DETECT}:is_ncu_csv_long", "hilsim.formats.ncu_csv:read_ncu_csv",
           refusal=_NCU_REFUSAL),
    Format("ncu-csv-raw", "Nsight Compute --csv --page raw",
           f"{_DETECT}:is_ncu_csv_raw", "hilsim.formats.ncu_csv:read_ncu_csv",
           refusal=_NCU_REFUSAL),
    Format("wide-durations-csv", "wide table of per-kernel durations (one column per kernel)",
           f"{_DETECT}:is_wide_durations_csv",
           "hilsim.formats.wide_durations:bundle_from_wide_durations"),
)


def _by_name(formats: tuple[Format, ...]) -> dict[str, Format]:
    """``formats`` by name; a name declared twice is a declaration error."""
    table: dict[str, Format] = {}
    for entry in formats:
        if entry.name in table:
            raise ValueError(f"format {entry.name!r} is declared twice in the registry")
        table[entry.name] = entry
    return table


#: format name -> its record, in sniff order
FORMATS: dict[str, Format] = _by_name(BUILTIN)
#: the formats ``hilsim import`` reads (``--format``'s choices besides ``auto``)
IMPORTABLE: tuple[str, ...] = tuple(f.name for f in BUILTIN if f.refusal is None)


def load(path: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` path names (its module imported now)."""
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


__all__ = ["BUILTIN", "FORMATS", "IMPORTABLE", "Format", "load"]
