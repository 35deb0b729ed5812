"""The workload runner's stop sequence (agent/runner.py) where hilsim itself ignores SIGINT,
as a shell starts background jobs (``nohup hilsim agent profile ... &``, ``&`` in a batch
script): the workload must still start with SIGINT's default action, else the timeout's
first signal is lost and the workload runs on until SIGTERM."""

from __future__ import annotations

import signal
import sys

from hilsim.agent.runner import run_workload

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


def test_a_background_jobs_workload_still_stops_at_the_first_signal() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = run_workload(SLEEPER, timeout_s=1.0, grace_s=20.0)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # hilsim's own, restored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.timed_out and result.stopped_with == "SIGINT", result
    assert result.exit_code != 0 and result.wall_s < 15


def test_a_foreground_workload_stops_at_the_first_signal() -> None:
    result = run_workload(SLEEPER, timeout_s=1.0, grace_s=20.0)
    assert result.timed_out and result.stopped_with == "SIGINT" and result.wall_s < 15
