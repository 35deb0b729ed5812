"""``python -m hilsim.agent.launch [--nvtx MODULE:FUNCTION]... -- script.py ARGS | -m module ARGS``.

Installs the ``--nvtx`` wrappers (:func:`hilsim.agent.nvtx.wrap_function`) and then runs the
workload in this interpreter exactly as ``python script.py ARGS`` / ``python -m module
ARGS`` would (``runpy``, ``__name__ == "__main__"``, ``sys.argv`` rewritten). The other
launchers (:mod:`hilsim.agent.cupti_launch`, :mod:`hilsim.agent.torch_launch`) reuse
:func:`split_argv` and :func:`run_target`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from hilsim.agent.nvtx import install


def split_argv(
    argv: list[str], prog: str, out_required: bool = False
) -> tuple[argparse.Namespace, list[str]]:
    """Launcher options before ``--``, the workload after it."""
    if "--" not in argv:
        raise SystemExit(f"{prog}: usage: {prog} [options] -- script.py ARGS | -m module ARGS")
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--nvtx", action="append", default=[], metavar="MODULE:FUNCTION")
    parser.add_argument("--out", required=out_required, help="records / trace file to write")
    options = parser.parse_args(argv[:cut])
    target = argv[cut + 1 :]
    if not target or (target[0] == "-m" and len(target) < 2):
        raise SystemExit(f"{prog}: nothing to run after '--'")
    return options, target


def run_target(target: list[str]) -> None:
    """Run ``script.py ARGS`` or ``-m module ARGS`` as ``__main__`` (SystemExit propagates)."""
    if target[0] == "-m":
        module, args = target[1], target[2:]
        sys.argv = [module, *args]
        if "" not in sys.path:
            sys.path.insert(0, "")
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    script, args = target[0], target[1:]
    sys.argv = [script, *args]
    prepare_sys_path(target)
    runpy.run_path(script, run_name="__main__")


def install_stop_handlers(finish: Callable[[bool, str], None]) -> None:
    """On SIGINT/SIGTERM, ``finish(False, reason)`` first (records flushed), then stop.

    SIGINT becomes KeyboardInterrupt (the workload may clean up); SIGTERM is
    re-raised with the default action so the exit status says how it ended.
    """

    def handler(signum: int, frame: Any) -> None:
        finish(False, f"stopped by {signal.Signals(signum).name}")
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)


@contextlib.contextmanager
def deferred_stop_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back while the block runs (e.g. a trace export), then deliver.

    A stop handler that ran in the middle of an export would find the recorder busy
    (its finish() holds a lock: waiting would deadlock the main thread) or would raise
    KeyboardInterrupt into the export and lose the trace. Here the signals are only
    noted and re-sent to this process once the block has finished. Outside the main
    thread (where handlers cannot be changed) the block just runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def note(signum: int, frame: Any) -> None:
        pending.append(signum)

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(pending):
            os.kill(os.getpid(), signum)


def run_recorded(
    target: list[str], nvtx_specs: list[str], prog: str, finish: Callable[[bool, str | None], None]
) -> None:
    """Run the workload under a recorder; ``finish(complete, reason)`` runs however it ends.

    ``complete`` is True for a normal return or exit code 0; ``reason`` says why not.
    Exceptions (SystemExit included) propagate after ``finish``.
    """
    prepare_sys_path(target)
    install_wrappers(nvtx_specs, prog)
    complete, reason = False, None
    try:
        run_target(target)
        complete = True
    except SystemExit as exc:
        complete = exc.code in (0, None)
        reason = None if complete else f"workload exited with code {exc.code}"
        raise
    except KeyboardInterrupt:
        reason = "interrupted (SIGINT)"
        raise
    except BaseException as exc:
        reason = f"workload raised {type(exc).__name__}: {exc}"[:300]
        raise
    finally:
        finish(complete, reason)


def prepare_sys_path(target: list[str]) -> None:
    """Put the script's folder (or the working directory for ``-m``) first on sys.path,
    as ``python script.py`` does; called before the wrappers import the user's modules."""
    folder = "" if target[0] == "-m" else os.path.dirname(os.path.abspath(target[0]))
    if not sys.path or sys.path[0] != folder:
        sys.path.insert(0, folder)


def install_wrappers(specs: list[str], prog: str) -> None:
    """Wrap each ``MODULE:FUNCTION`` of ``specs`` in an NVTX range; a bad spec exits 2."""
    try:
        install(specs)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    options, target = split_argv(args, "hilsim.agent.launch")
    prepare_sys_path(target)
    install_wrappers(options.nvtx, "hilsim.agent.launch")
    run_target(target)


if __name__ == "__main__":
    main()
