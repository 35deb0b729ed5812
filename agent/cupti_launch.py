"""In-process CUPTI light profiler.

``python -m agent.cupti_launch --out R.jsonl [--nvtx MODULE:FUNCTION]... -- script.py ARGS``

Enables CUPTI activity tracing (``CONCURRENT_KERNEL``, which does not serialise kernels,
plus ``RUNTIME`` and ``DRIVER`` for the launching call of each kernel: CuPy launches
through the driver API, PyTorch through the runtime API) through cupti-python, then runs
the workload unmodified (:func:`agent.launch.run_target`). Records are copied out of the
CUPTI buffers in the completion callback and written with
:func:`analyzer.importers.cupti_records.write_cupti_records` (atomic JSON Lines):

* at normal exit and at ``SystemExit`` (``atexit`` as a last resort);
* from SIGINT / SIGTERM handlers, flushing CUPTI first, so Ctrl-C or a timeout still
  leaves every launch captured so far (header ``complete: false``). SIGKILL cannot be
  caught: the orchestrator sends SIGINT first and waits before escalating.

``agent.annotate`` / ``--nvtx`` ranges are recorded as ``range`` records with CUPTI
timestamps (``cupti.get_timestamp()``), on the calling thread.

A forced flush (``activity_flush_all(1)``) also hands over records of work still in
flight, whose missing timestamps are ``CUPTI_TIMESTAMP_UNKNOWN`` (0): such kernel and
API records are dropped (counted in the header's ``dropped_incomplete``) instead of
being written with ``end < start``, which the importer rejects. After a normal return
the current CUDA context is synchronised first (driver ``cuCtxSynchronize`` through
cuda-bindings, a cupti-python dependency), so trailing kernels are complete.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any

from agent.launch import install_stop_handlers, run_recorded, split_argv

BUFFER_BYTES = 8 * 1024 * 1024
_KERNEL_FIELDS = (
    "name",
    "start",
    "end",
    "correlation_id",
    "device_id",
    "stream_id",
    "context_id",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "static_shared_memory",
    "dynamic_shared_memory",
)
_CALL_FIELDS = ("start", "end", "correlation_id", "thread_id", "process_id", "cbid")


def _complete(record: dict[str, Any]) -> bool:
    """Both timestamps known (CUPTI_TIMESTAMP_UNKNOWN is 0) and ``end >= start``."""
    start, end = record.get("start"), record.get("end")
    return (
        isinstance(start, int) and isinstance(end, int) and start > 0 and end > 0
        and end >= start
    )


def _synchronize_context() -> None:
    """Best effort: wait for the current CUDA context's work (no context is created)."""
    try:
        from cuda.bindings import driver  # lazy: installed with cupti-python

        driver.cuCtxSynchronize()  # returns (error,) without raising; no context: ignored
    except Exception:  # noqa: BLE001, S110 - optional: no driver, no bindings, no context
        pass


def _fields(activity: Any, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        try:
            value = getattr(activity, name)
        except (AttributeError, RuntimeError, ValueError):
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        elif not isinstance(value, int | float | str | type(None)):
            try:
                value = int(value)
            except (TypeError, ValueError):
                value = str(value)
        out[name] = value
    return out


class CuptiRecorder:
    """Collects CUPTI activity records and annotate ranges; :meth:`finish` writes them."""

    def __init__(self, out: str, argv: list[str]) -> None:
        self.out = out
        self.argv = argv
        self.kernels: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.ranges: list[dict[str, Any]] = []
        self._open = threading.local()
        self._cupti: Any = None
        self._kinds: list[Any] = []
        # re-entrant: a SIGINT/SIGTERM handler (same thread) may call finish() -> flush ->
        # the completion callback while this thread is inside push/pop/finish
        self._lock = threading.RLock()
        self.dropped_incomplete = 0
        self.finished = False
        self.version: str | None = None

    # -- CUPTI ------------------------------------------------------------------
    def start(self) -> None:
        from cupti import cupti  # lazy: GPU extra

        self._cupti = cupti
        try:
            from importlib.metadata import version

            self.version = version("cupti-python")
        except Exception:  # noqa: BLE001 - version is informative only
            self.version = None
        kernel_kind = cupti.ActivityKind.CONCURRENT_KERNEL
        call_kinds = {int(cupti.ActivityKind.RUNTIME), int(cupti.ActivityKind.DRIVER)}

        def requested() -> tuple[int, int]:
            return BUFFER_BYTES, 0

        def completed(activities: Any) -> None:
            kernels, calls, dropped = [], [], 0
            for activity in activities:
                kind = int(activity.kind)
                if kind == int(kernel_kind):
                    record = _fields(activity, _KERNEL_FIELDS) | {"kind": "kernel"}
                    target = kernels
                elif kind in call_kinds:
                    record = _fields(activity, _CALL_FIELDS) | {"kind": "runtime"}
                    target = calls
                else:
                    continue
                if _complete(record):
                    target.append(record)
                else:
                    dropped += 1
            with self._lock:
                self.kernels.extend(kernels)
                self.calls.extend(calls)
                self.dropped_incomplete += dropped

        cupti.activity_register_callbacks(requested, completed)
        for kind in (kernel_kind, cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
            cupti.activity_enable(kind)
            self._kinds.append(kind)

    def flush(self) -> None:
        if self._cupti is not None:
            try:
                self._cupti.activity_flush_all(1)
            except Exception as exc:  # noqa: BLE001 - never lose the records over a flush
                print(f"agent.cupti_launch: CUPTI flush failed: {exc}", file=sys.stderr)

    # -- ranges (agent.nvtx hook) ---------------------------------------------------
    def _now(self) -> int:
        return int(self._cupti.get_timestamp()) if self._cupti is not None else 0

    def push(self, name: str) -> None:
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        stack.append((name, self._now()))

    def pop(self) -> None:
        stack = getattr(self._open, "stack", None)
        if not stack:
            return
        name, start = stack.pop()
        record = {
            "kind": "range",
            "name": name,
            "start": start,
            "end": self._now(),
            "thread_id": threading.get_native_id(),
            "thread_ident": threading.get_ident(),
            "source": "annotate",
        }
        with self._lock:
            self.ranges.append(record)

    # -- output ---------------------------------------------------------------------
    def finish(self, complete: bool, reason: str | None = None) -> None:
        """Flush CUPTI and (re)write the records file; later calls only downgrade."""
        from analyzer.importers.cupti_records import write_cupti_records

        if complete and self._cupti is not None:
            _synchronize_context()  # never from a signal handler: a hung kernel would block
        self.flush()
        with self._lock:
            if self.finished and complete:
                complete = self._complete
                reason = self._reason
            self._complete, self._reason, self.finished = complete, reason, True
            kernels = list(self.kernels)
            corr = {k.get("correlation_id") for k in kernels}
            calls = [c for c in self.calls if c.get("correlation_id") in corr]
            ranges = list(self.ranges)
        header = {
            "tool": {"name": "cupti-python", "version": self.version},
            "argv": self.argv,
            "pid": os.getpid(),
            "complete": complete,
            "reason": reason,
            "counts": {"kernel": len(kernels), "runtime": len(calls), "range": len(ranges)},
            "dropped_incomplete": self.dropped_incomplete,
        }
        write_cupti_records(self.out, header, [*kernels, *calls, *ranges])


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    options, target = split_argv(args, "agent.cupti_launch", out_required=True)
    recorder = CuptiRecorder(options.out, target)
    try:
        recorder.start()
    except ImportError as exc:
        print(
            "agent.cupti_launch: error: cupti-python is not installed "
            f"(pip install cupti-python): {exc}",
            file=sys.stderr,
        )
        raise SystemExit(2) from exc
    except Exception as exc:  # cuptiError, a libcupti that does not load or match
        line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        print(
            f"agent.cupti_launch: error: CUPTI activity tracing could not start "
            f"({type(exc).__name__}: {line}); cupti-python needs a matching libcupti "
            "(nvidia-cuda-cupti) and a CUDA driver",
            file=sys.stderr,
        )
        raise SystemExit(2) from exc
    from agent.nvtx import add_range_hook

    add_range_hook(recorder)
    atexit.register(
        lambda: (
            recorder.finish(False, "interpreter exited before the workload returned")
            if not recorder.finished
            else None
        )
    )
    install_stop_handlers(recorder.finish)
    run_recorded(target, options.nvtx, "agent.cupti_launch", recorder.finish)


if __name__ == "__main__":
    main()
