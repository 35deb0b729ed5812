"""The nsys CSV readers compared on one file: same launches, or the same refusal.

``hilsim import`` reads an nsys stats CSV with one of four readers: Arrow's columnar
reader (:func:`~hilsim.formats.nsys_stats.read_arrow`), pandas' C parser
(``_read_fast``), the exact reader (:func:`~hilsim.formats.nsys_stats.read_exact`: every
cell a string, line-numbered errors) and, for large files, the block-by-block streaming
import (:mod:`hilsim.formats.streaming`). A reader may decline a file (``None``: the next
one reads it) but never read it differently: the tests and the fuzz tier share
:func:`assert_readers_agree`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from hilsim.core.bundle import read_bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches
from hilsim.formats import nsys_stats
from hilsim.formats.read import import_profile
from hilsim.formats.streaming import stream_import

Outcome = tuple[str, object]  # ("launches", frame) or ("refused", message)


def _outcome(read, path: Path) -> Outcome | None:
    try:
        parsed = read(path)
        if parsed is None:
            return None
        out, report, dropped = parsed
        return "launches", (normalize_launches(out, str(path)), report, dropped)
    except HilsimError as exc:
        return "refused", str(exc)


def _same(a: Outcome, b: Outcome, what: str) -> None:
    assert a[0] == b[0], (
        f"{what}: {a[0]} where the exact reader gave {b[0]}: {a[1]!s:.300} / {b[1]!s:.300}")
    if a[0] == "refused":
        assert a[1] == b[1], what
        return
    frame_a, *facts_a = a[1]
    frame_b, *facts_b = b[1]
    assert facts_a == facts_b, what
    pd.testing.assert_frame_equal(frame_a, frame_b, obj=what)


def reader_outcomes(path: Path) -> dict[str, Outcome | None]:
    """What each in-memory reader makes of ``path`` (``None``: declined)."""
    return {
        "arrow": _outcome(nsys_stats.read_arrow, path),
        "fast": _outcome(nsys_stats._read_fast, path),
        "exact": _outcome(nsys_stats.read_exact, path),
    }


def assert_readers_agree(path: Path, block_bytes: int | None = None) -> Outcome:
    """Every reader that reads ``path`` gives the exact reader's launches or refusal; with
    ``block_bytes`` the streaming import (blocks of that size) gives the in-memory
    import's bundle or refusal. Returns the exact reader's outcome."""
    outcomes = reader_outcomes(path)
    exact = outcomes.pop("exact")
    assert exact is not None
    for name, got in outcomes.items():
        if got is not None:
            _same(got, exact, f"{path.name}: {name} reader")
    if block_bytes is not None:
        _assert_stream_agrees(path, block_bytes)
    return exact


def _import(run) -> tuple[str, object]:
    try:
        return "launches", run()
    except HilsimError as exc:
        return "refused", str(exc)


def _assert_stream_agrees(path: Path, block_bytes: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hilsim-agree-") as folder:
        streamed = _import(lambda: stream_import(path, "nsys-gpu-trace-csv",
                                                 Path(folder) / "s", block_bytes=block_bytes))
        if streamed == ("launches", None):
            return  # declined: imported in memory instead
        whole = _import(lambda: write_bundle(import_profile(path), Path(folder) / "m"))
        assert streamed[0] == whole[0], (
            f"{path.name}: streaming {streamed[0]} where in memory {whole[0]}: "
            f"{streamed[1]!s:.300} / {whole[1]!s:.300}")
        if streamed[0] == "refused":
            assert streamed[1] == whole[1], path.name
            return
        a, b = read_bundle(Path(folder) / "s"), read_bundle(Path(folder) / "m")
        pd.testing.assert_frame_equal(a.launches, b.launches, obj=f"{path.name}: streaming")


def assert_line_breaks_agree(path: Path, text: str) -> None:
    """``text`` written to ``path`` with ``\\n``, ``\\r\\n`` and lone ``\\r`` line breaks
    imports the same (launches or refusal, worded alike) whichever it holds."""
    from hilsim.formats.nsys_stats import read_nsys_stats_csv

    outcomes = []
    for newline in ("\n", "\r\n", "\r"):
        path.write_bytes(text.replace("\r\n", "\n").replace("\n", newline).encode("utf-8"))
        try:
            outcomes.append(("launches", read_nsys_stats_csv(path)))
        except HilsimError as exc:
            outcomes.append(("refused", str(exc)))
    first = outcomes[0]
    for newline, got in zip(("\\r\\n", "\\r"), outcomes[1:], strict=True):
        assert got[0] == first[0], (
            f"{newline}: {got[0]} where \\n gave {first[0]}: {got[1]!s:.300} / {first[1]!s:.300}")
        if got[0] == "refused":
            assert got[1] == first[1], newline
        else:
            pd.testing.assert_frame_equal(got[1], first[1], obj=newline)
