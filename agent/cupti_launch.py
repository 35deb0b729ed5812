"""In-process CUPTI light profiler.

``python -m hilsim.agent.cupti_launch --out R.jsonl [--nvtx MODULE:FUNCTION]... -- script.py ARGS``

Enables CUPTI activity tracing (``CONCURRENT_KERNEL``, which does not serialise kernels,
plus ``RUNTIME`` and ``DRIVER`` for the launching call of each kernel: CuPy launches
through the driver API, PyTorch through the runtime API) through cupti-python, then runs
the workload unmodified (:func:`hilsim.agent.launch.run_target`). Records are copied out of the
CUPTI buffers in the completion callback and written with
:func:`hilsim.formats.cupti_format.write_cupti_records` (atomic JSON Lines):

* at normal exit and at ``SystemExit`` (``atexit`` as a last resort);
* from SIGINT / SIGTERM handlers, flushing CUPTI first, so Ctrl-C or a timeout still
  leaves every launch captured so far (header ``complete: false``). SIGKILL cannot be
  caught: the orchestrator sends SIGINT first and waits before escalating.

``agent.annotate`` / ``--nvtx`` ranges are recorded as ``range`` records with CUPTI
timestamps (``cupti.get_timestamp()``), on the calling thread.

NVTX ranges the workload emits itself (``torch.cuda.nvtx.range``, ``cupy.cuda.nvtx``,
the ``nvtx`` package, C++ libraries) reach CUPTI through NVTX's injection mechanism:
the NVTX library loads the tool named by ``NVTX_INJECTION64_PATH`` at its first call,
and libcupti is such a tool (CUPTI guide, "NVTX" under the Activity API). The launcher
sets that variable to the libcupti this process loaded, unless the user set it, before
the workload runs, and enables ``CUPTI_ACTIVITY_KIND_MARKER``: start/end marker records
(flags ``MARKER_START`` = 2, ``MARKER_END`` = 4, paired by ``id``) become ``range``
records with ``source: "marker"`` and the CUPTI thread id. A ``range`` from
``agent.annotate`` that CUPTI also reported as a marker (same name, both ends within
50 us) is written once, as the marker. Ranges still open when the run stops end at the
stop time.

A forced flush (``activity_flush_all(1)``) also hands over records of work still in
flight, whose missing timestamps are ``CUPTI_TIMESTAMP_UNKNOWN`` (0): such kernel and
API records are dropped (counted in the header's ``dropped_incomplete``) instead of
being written with ``end < start``, which the importer rejects. After a normal return
the current CUDA context is synchronised first (driver ``cuCtxSynchronize`` through
cuda-bindings, a cupti-python dependency), so trailing kernels are complete.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import os
import sys
import threading
from typing import Any

from hilsim.agent.cupti_api import api_enumerations, launch_cbids, restrict_to_launches
from hilsim.agent.launch import install_stop_handlers, run_recorded, split_argv
from hilsim.agent.nvtx import add_range_hook

from hilsim.formats.cupti_format import write_cupti_records

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
MARKER_START = 2  # CUPTI_ACTIVITY_FLAG_MARKER_START
MARKER_END = 4  # CUPTI_ACTIVITY_FLAG_MARKER_END
DUPLICATE_NS = 50_000  # an annotate range within this of a marker range is the same range


def loaded_library(fragment: str, maps: str = "/proc/self/maps") -> str | None:
    """Path of the first shared object mapped in this process whose name has ``fragment``."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.startswith("/") and fragment in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


def _read(activity: Any, name: str, default: Any) -> Any:
    """A field of a CUPTI record, ``default`` when the binding cannot produce it (a NULL
    string, a union member this record does not hold, bytes that do not decode)."""
    try:
        return getattr(activity, name, default)
    except Exception:  # noqa: BLE001 - a property of a C struct may raise anything
        return default


def _marker_thread(activity: Any) -> int | None:
    try:
        return int(activity.object_id.pt.thread_id)
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None


def drop_duplicate_ranges(annotated: list[dict[str, Any]], markers: list[dict[str, Any]]
                          ) -> list[dict[str, Any]]:
    """``annotated`` ranges that no marker range repeats (same name, ends within 50 us)."""
    by_name: dict[str, list[tuple[int, int]]] = {}
    for record in markers:
        by_name.setdefault(record["name"], []).append((record["start"], record["end"]))
    kept = []
    for record in annotated:
        twins = by_name.get(record["name"], ())
        if not any(abs(start - record["start"]) <= DUPLICATE_NS
                   and abs(end - record["end"]) <= DUPLICATE_NS for start, end in twins):
            kept.append(record)
    return kept


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
    """Collects CUPTI activity records and annotate ranges; :meth:`finish` writes them.

    ``replaces_nvtx``: ``agent.annotate`` / ``--nvtx-module`` ranges are recorded here
    (``source: "annotate"``) and not also emitted through the ``nvtx`` package. On an
    H100 (cupti-python 13.0.1, nvtx 0.2.17, torch 2.11) a training loop whose steps were
    ``torch.cuda.nvtx.range`` markers, with its step function wrapped by ``--nvtx-module``
    as well, came back with no marker END matching any step START (every step open until
    the run stopped, each nested in the last); the same loop without the wrapper paired
    all 30. The ``nvtx`` package pushes through a domain with a registered-string message,
    which CUPTI did not report as a marker of its own.
    """

    replaces_nvtx = True

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
        self.markers: list[dict[str, Any]] = []
        self._marker_open: dict[int, dict[str, Any]] = {}
        self.nvtx_injection: str | None = None
        self.finished = False
        self.version: str | None = None
        self.api_filter: str | None = None
        self.api_skipped = 0
        self.unreadable = 0

    # -- CUPTI ------------------------------------------------------------------
    def start(self) -> None:
        from cupti import cupti  # lazy: GPU extra

        self._cupti = cupti
        try:
            self.version = importlib.metadata.version("cupti-python")
        except Exception:  # noqa: BLE001 - version is informative only
            self.version = None
        kernel_kind = cupti.ActivityKind.CONCURRENT_KERNEL
        runtime_kind, driver_kind = int(cupti.ActivityKind.RUNTIME), int(cupti.ActivityKind.DRIVER)
        call_kinds = {runtime_kind: "runtime", driver_kind: "driver"}
        marker = getattr(cupti.ActivityKind, "MARKER", None)
        marker_kind = int(marker) if marker is not None else -1
        # launch APIs only (hilsim.agent.cupti_api): None keeps every call of that API
        apis = api_enumerations(cupti)
        launches: dict[int, frozenset[int] | None] = {
            kind: launch_cbids(apis[api]) if api in apis else None
            for kind, api in call_kinds.items()
        }

        def requested() -> tuple[int, int]:
            return BUFFER_BYTES, 0

        def completed(activities: Any) -> None:
            kernels, calls, dropped, skipped, unreadable = [], [], 0, 0, 0
            for activity in activities:
                try:
                    kind = int(activity.kind)
                    if kind == marker_kind:
                        self._marker(activity)
                        continue
                except Exception:  # noqa: BLE001 - one bad record must not lose the buffer
                    unreadable += 1
                    continue
                if kind == int(kernel_kind):
                    record = _fields(activity, _KERNEL_FIELDS) | {"kind": "kernel"}
                    target = kernels
                elif kind in call_kinds:
                    keep = launches[kind]
                    if keep is not None and int(activity.cbid) not in keep:
                        skipped += 1  # not a launch: read no further
                        continue
                    record = _fields(activity, _CALL_FIELDS) | {
                        "kind": "runtime", "api": call_kinds[kind]}
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
                self.api_skipped += skipped
                self.unreadable += unreadable

        cupti.activity_register_callbacks(requested, completed)
        for kind in (kernel_kind, cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
            cupti.activity_enable(kind)
            self._kinds.append(kind)
        self.api_filter = restrict_to_launches(cupti, apis)
        if marker is not None:
            self._enable_markers(marker)

    def _enable_markers(self, marker: Any) -> None:
        """Route the workload's NVTX calls to libcupti and record them (best effort)."""
        path = os.environ.get("NVTX_INJECTION64_PATH") or loaded_library("libcupti.so")
        if path is None:
            print("hilsim.agent.cupti_launch: libcupti not found among the loaded libraries; "
                  "the workload's own NVTX ranges are not recorded", file=sys.stderr)
            return
        try:
            self._cupti.activity_enable(marker)
        except Exception as exc:  # noqa: BLE001 - kernels matter more than ranges
            print(f"hilsim.agent.cupti_launch: NVTX marker records unavailable ({exc}); the "
                  "workload's own NVTX ranges are not recorded", file=sys.stderr)
            return
        os.environ.setdefault("NVTX_INJECTION64_PATH", path)
        self.nvtx_injection = os.environ["NVTX_INJECTION64_PATH"]
        self._kinds.append(marker)

    def _marker(self, activity: Any) -> None:
        """Pair START/END marker records by id into ``range`` records."""
        flags = int(_read(activity, "flags_", None) or _read(activity, "flags", 0) or 0)
        try:
            ident, stamp = int(activity.id), int(activity.timestamp)
        except (AttributeError, RuntimeError, TypeError, ValueError):
            return
        with self._lock:
            if flags & MARKER_START:
                name = _read(activity, "name", None)
                if isinstance(name, bytes):
                    name = name.decode("utf-8", errors="replace")
                thread = _marker_thread(activity)
                domain = _read(activity, "domain", None)
                self._marker_open[ident] = {
                    "kind": "range", "name": str(name or ""), "start": stamp,
                    "thread_id": thread, "thread_ident": thread, "source": "marker",
                    "domain": domain if isinstance(domain, str) and domain else None,
                }
            elif flags & MARKER_END:
                record = self._marker_open.pop(ident, None)
                if record is not None and stamp >= record["start"] > 0:
                    self.markers.append(record | {"end": stamp})

    def flush(self) -> None:
        if self._cupti is not None:
            try:
                self._cupti.activity_flush_all(1)
            except Exception as exc:  # noqa: BLE001 - never lose the records over a flush
                print(f"hilsim.agent.cupti_launch: CUPTI flush failed: {exc}", file=sys.stderr)

    # -- ranges (hilsim.agent.nvtx hook) ---------------------------------------------------
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
            now = self._now()
            still_open = [r | {"end": max(now, r["start"])} for r in self._marker_open.values()
                          if r["start"] > 0]
            markers = [*self.markers, *still_open]
            ranges = [*drop_duplicate_ranges(list(self.ranges), markers), *markers]
        header = {
            "tool": {"name": "cupti-python", "version": self.version},
            "argv": self.argv,
            "pid": os.getpid(),
            "complete": complete,
            "reason": reason,
            "counts": {"kernel": len(kernels), "runtime": len(calls), "range": len(ranges)},
            "dropped_incomplete": self.dropped_incomplete,
            "api_filter": self.api_filter,
            "api_records_skipped": self.api_skipped,
            "unreadable_records": self.unreadable,
            "unclosed_ranges": len(still_open),
            "nvtx_injection": self.nvtx_injection,
        }
        write_cupti_records(self.out, header, [*kernels, *calls, *ranges])


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    options, target = split_argv(args, "hilsim.agent.cupti_launch", out_required=True)
    recorder = CuptiRecorder(options.out, target)
    try:
        recorder.start()
    except ImportError as exc:
        print(
            "hilsim.agent.cupti_launch: error: cupti-python is not installed "
            f"(pip install cupti-python): {exc}",
            file=sys.stderr,
        )
        raise SystemExit(2) from exc
    except Exception as exc:  # cuptiError, a libcupti that does not load or match
        line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        print(
            f"hilsim.agent.cupti_launch: error: CUPTI activity tracing could not start "
            f"({type(exc).__name__}: {line}); cupti-python needs a matching libcupti "
            "(nvidia-cuda-cupti) and a CUDA driver",
            file=sys.stderr,
        )
        raise SystemExit(2) from exc
    add_range_hook(recorder)
    atexit.register(
        lambda: (
            recorder.finish(False, "interpreter exited before the workload returned")
            if not recorder.finished
            else None
        )
    )
    install_stop_handlers(recorder.finish)
    run_recorded(target, options.nvtx, "hilsim.agent.cupti_launch", recorder.finish)


if __name__ == "__main__":
    main()
