"""The simulated program dies with the process that started it, even when that process
is killed by SIGKILL (no handler runs then): ``spawn_dying_with_parent`` in
``simmodel/gpgpusim/run.py``, through ``setpriv --pdeathsig`` and through ``prctl``. A
plain ``sleep`` stands in for the simulator (the mechanism is the same; no build needed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = """
import shutil, sys, time
if sys.argv[1] == "prctl":
    shutil.which = lambda name: None  # as on a system without util-linux's setpriv
from hilsim.simmodel.gpgpusim.run import spawn_dying_with_parent
child = spawn_dying_with_parent(["sleep", "120"])
print(child.pid, flush=True)
time.sleep(120)
"""


def _dead(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (a container's PID 1 may not reap)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X")


@pytest.mark.parametrize("how", ["setpriv", "prctl"])
def test_the_program_dies_with_a_parent_killed_by_sigkill(how: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(parent.stdout.readline())
        assert not _dead(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not _dead(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _dead(child), f"the program ({how}) outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if "child" in locals() and not _dead(child):
            os.kill(child, signal.SIGKILL)


POOL = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from hilsim.simmodel.gpgpusim.run import (
    simulations_interruptible, spawn_dying_with_parent, tracked)

def simulate(_):
    proc = spawn_dying_with_parent(["sleep", "120"], start_new_session=True)
    with tracked(proc):
        return proc.wait()

try:
    with ThreadPoolExecutor(max_workers=2) as pool, simulations_interruptible():
        futures = [pool.submit(simulate, i) for i in range(2)]
        time.sleep(0.5)
        print("running", flush=True)
        [f.result() for f in futures]
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_simulations_run_from_pool_threads(signum: int) -> None:
    """As ``tune --on-simulator`` runs them: the signal kills every running simulation, so
    the pool's threads return and the command ends at once (it once waited for them)."""
    parent = subprocess.Popen([sys.executable, "-c", POOL], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout.readline().strip() == "running"
        began = time.monotonic()
        parent.send_signal(signum)
        out, _ = parent.communicate(timeout=20)
        assert "interrupted" in out and time.monotonic() - began < 10
    finally:
        parent.kill()
        parent.wait()
