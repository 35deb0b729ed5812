"""PyTorch-profiler light backend.

``python -m hilsim.agent.torch_launch --out T.json -- script.py ARGS``.

Starts ``torch.profiler.profile(activities=[CPU, CUDA])`` before the workload runs
(unmodified, :func:`hilsim.agent.launch.run_target`) and exports the Chrome (Kineto) trace when
it ends, read back with :func:`hilsim.formats.kineto.bundle_from_kineto`.
``agent.annotate`` / ``--nvtx`` ranges become ``record_function`` ranges (Kineto
``user_annotation`` events, which the importer turns into regions).

The trace is written at normal exit, on ``SystemExit``, and from SIGINT / SIGTERM
handlers (temporary file, then rename); ``T.json.status.json`` says whether the run was
complete. The profiler keeps every event in memory until the export: for very long runs
prefer the nsys or cupti backends.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from typing import Any

from hilsim.agent.launch import (
    deferred_stop_signals,
    install_stop_handlers,
    run_recorded,
    split_argv,
)
from hilsim.agent.nvtx import add_range_hook


class TorchRecorder:
    """Runs torch.profiler around the workload; :meth:`finish` exports once."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.profiler: Any = None
        self.finished = False
        self._open = threading.local()
        self._lock = threading.Lock()

    def start(self) -> None:
        import torch  # lazy: GPU workloads only
        from torch.profiler import ProfilerActivity, profile

        self._torch = torch
        self.profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self.profiler.start()

    def push(self, name: str) -> None:
        context = self._torch.profiler.record_function(name)
        context.__enter__()
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        stack.append(context)

    def pop(self) -> None:
        stack = getattr(self._open, "stack", None)
        if stack:
            stack.pop().__exit__(None, None, None)

    def finish(self, complete: bool, reason: str | None = None) -> None:
        # a stop signal during the (possibly long) export is delivered after it: the
        # handler's own finish() then returns at once instead of deadlocking on the lock
        with deferred_stop_signals(), self._lock:
            if self.finished or self.profiler is None:
                return
            self.finished = True
            # a failed workload may leave CUDA broken: the trace matters more
            with contextlib.suppress(Exception):
                if self._torch.cuda.is_available():
                    self._torch.cuda.synchronize()
            self.profiler.stop()
            tmp = f"{self.out}.tmp"
            self.profiler.export_chrome_trace(tmp)
            os.replace(tmp, self.out)
            status = {
                "complete": complete,
                "reason": reason,
                "torch_version": getattr(self._torch, "__version__", None),
            }
            with open(f"{self.out}.status.json.tmp", "w", encoding="utf-8") as handle:
                json.dump(status, handle)
            os.replace(f"{self.out}.status.json.tmp", f"{self.out}.status.json")


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    options, target = split_argv(args, "hilsim.agent.torch_launch", out_required=True)
    recorder = TorchRecorder(options.out)
    try:
        recorder.start()
    except ImportError as exc:
        print(f"hilsim.agent.torch_launch: error: torch is not installed: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    add_range_hook(recorder)

    install_stop_handlers(recorder.finish)
    run_recorded(target, options.nvtx, "hilsim.agent.torch_launch", recorder.finish)


if __name__ == "__main__":
    main()
