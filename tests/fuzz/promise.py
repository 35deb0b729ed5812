"""The promise every fuzz case checks, through the real CLI entry.

For one ``hilsim`` invocation (in-process ``main([...])``, stdout/stderr captured):

* exit code 0 or 2; no traceback; on 2 exactly one stderr line ``hilsim: error: ...``;
  on 0 only ``hilsim: warning: ...`` lines on stderr;
* a time bound (:data:`TIME_LIMIT_S` per case, enforced by ``SIGALRM``);
* a memory bound: the peak resident memory of the case (``VmHWM`` after resetting it
  through ``/proc/self/clear_refs``) stays below :data:`MEMORY_FACTOR` x the input's
  size + :data:`MEMORY_CONSTANT`;
* no partial output: on 2 the output path does not exist and no temporary sibling is
  left; on 0 the bundle reads back (:func:`check_bundle`).
"""

from __future__ import annotations

import contextlib
import io
import re
import signal
from pathlib import Path

import numpy as np
import pandas as pd

from hilsim.cli.main import main
from hilsim.core.bundle import Bundle, read_bundle

TIME_LIMIT_S = 30
MEMORY_FACTOR = 20
MEMORY_CONSTANT = 400 << 20  # pandas/pyarrow working sets and arenas of a small import


class CaseTimeout(BaseException):
    """Raised by SIGALRM: a case ran past :data:`TIME_LIMIT_S` (not caught by ``main``)."""


def _on_alarm(signum, frame):  # noqa: ARG001
    raise CaseTimeout(f"case ran past {TIME_LIMIT_S} s")


def _hwm_bytes() -> int | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found.group(1)) * 1024 if found else None


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def run_cli(argv: list[str], input_bytes: int) -> tuple[int, list[str], int | None]:
    """Run ``hilsim ARGV``: (exit code, stderr lines, peak memory above the start or None)."""
    err, out = io.StringIO(), io.StringIO()
    measured = _reset_hwm()
    start = _hwm_bytes() if measured else None
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(TIME_LIMIT_S)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main([str(a) for a in argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    peak = _hwm_bytes() if measured else None
    grown = None if peak is None or start is None else peak - start
    if grown is not None:
        limit = MEMORY_FACTOR * input_bytes + MEMORY_CONSTANT
        assert grown <= limit, f"{argv}: peak memory grew {grown} bytes (limit {limit})"
    lines = err.getvalue().splitlines()
    text = err.getvalue() + out.getvalue()
    assert "Traceback" not in text, text[-2000:]
    assert code in (0, 2), (argv, code, lines)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("hilsim: error: "), lines
    else:
        assert all(line.startswith("hilsim: warning: ") for line in lines), lines
    return code, lines, grown


def check_no_output(output: Path) -> None:
    """Exit 2 wrote nothing: no output and no temporary sibling of it."""
    assert not output.exists(), output
    leftovers = [p.name for p in output.parent.glob(f".{output.name}.*")]
    assert leftovers == [], leftovers


def check_bundle(output: Path) -> Bundle:
    """Exit 0: the bundle reads back and keeps the contract."""
    bundle = read_bundle(output)
    launches = bundle.launches
    n = len(launches)
    assert n >= 1
    assert launches["launch_id"].dtype == np.int64
    assert np.array_equal(launches["launch_id"].to_numpy(), np.arange(n))
    assert launches["duration_ns"].dtype == np.int64
    assert (launches["duration_ns"].to_numpy() >= 0).all()
    assert not launches["name"].isna().any()
    if launches["start_ns"].notna().all():
        start = launches["start_ns"].to_numpy(dtype=np.int64)
        assert (np.diff(start) >= 0).all()
    if bundle.metrics is not None:
        values = bundle.metrics.drop(columns="launch_id").to_numpy(dtype=np.float64)
        assert not np.isinf(values).any()
        assert pd.Index(bundle.metrics["launch_id"]).is_unique
    return bundle


def check_import(source: Path, folder: Path, *extra: str) -> int:
    """``hilsim import SOURCE -o FOLDER/out``, checked against the whole promise."""
    output = folder / "out"
    size = source.stat().st_size if source.exists() else 0
    code, _, _ = run_cli(["import", str(source), "-o", str(output), *extra], size)
    if code == 2:
        check_no_output(output)
    else:
        check_bundle(output)
    return code
