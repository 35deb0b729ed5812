"""Run a workload (or a profiler wrapping it) with a timeout and clean stopping.

The child runs in its own session (process group), so Ctrl-C at the terminal reaches
only hilsim, which forwards it. On a timeout or Ctrl-C the group gets SIGINT first (the
profilers and the in-process launchers then flush what they captured), SIGTERM after
``grace_s`` seconds, SIGKILL after another ``grace_s``. Only the process group hilsim
started is signalled, by its id. The child starts with SIGINT's default action even where
hilsim ignores it (:func:`sigint_default_in_children`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from hilsim.core.errors import HilsimError

GRACE_S = 30.0


@dataclass
class RunResult:
    """How a run ended: exit code (negative = killed by that signal), wall seconds, why."""

    argv: list[str]
    exit_code: int | None
    wall_s: float
    timed_out: bool = False
    interrupted: bool = False
    stopped_with: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.interrupted

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def sigint_default_in_children() -> Iterator[None]:
    """While the block spawns children: SIGINT caught (by a no-op) where this process
    ignores it, so a child starts with SIGINT's default action (exec resets a caught
    signal to its default, an ignored one stays ignored). A shell starts background jobs
    with SIGINT ignored (``nohup ... &``, ``&`` in a batch script); without this their
    workload would ignore the SIGINT a timeout sends first, and run on until SIGTERM.
    Only from the main thread (where Python sets handlers); elsewhere a no-op."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
        yield
        return
    signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _stop(process: subprocess.Popen[bytes], grace_s: float) -> str:
    """SIGINT, then SIGTERM, then SIGKILL to the child's group; the signal that ended it."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        _signal_group(process, signum)
        try:
            process.wait(timeout=grace_s if signum != signal.SIGKILL else None)
            return signal.Signals(signum).name
        except subprocess.TimeoutExpired:
            continue
    return "SIGKILL"


def run_workload(
    argv: list[str],
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    grace_s: float = GRACE_S,
    cwd: str | None = None,
) -> RunResult:
    """Run ``argv`` (no shell); stdout/stderr go to ``log`` when given, else inherited."""
    handle: IO[bytes] | None = open(log, "wb") if log is not None else None  # noqa: SIM115
    start = time.perf_counter()
    try:
        try:
            with sigint_default_in_children():
                process = subprocess.Popen(
                    argv, env=env, cwd=cwd, start_new_session=True,
                    stdout=handle, stderr=subprocess.STDOUT if handle else None,
                )
        except FileNotFoundError as exc:
            raise HilsimError(f"cannot run {argv[0]!r}: no such program") from exc
        except PermissionError as exc:
            raise HilsimError(f"cannot run {argv[0]!r}: permission denied") from exc
        timed_out = interrupted = False
        stopped: str | None = None
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            stopped = _stop(process, grace_s)
        except KeyboardInterrupt:
            interrupted = True
            stopped = _stop(process, grace_s)
        wall = time.perf_counter() - start
        return RunResult(list(argv), process.returncode, wall, timed_out, interrupted, stopped)
    finally:
        if handle is not None:
            handle.close()
