"""Run a CUDA program on a simulated card: run folder, environment, timeout, kept log.

The run folder gets the card's ``gpgpusim.config`` (plus overrides) and the files it
references; the program runs there (GPGPU-Sim reads ``gpgpusim.config`` from the working
folder) in its own process group, with the build's environment
(:meth:`~hilsim.simmodel.gpgpusim.build.SimBuild.env`). Its stdout and stderr go to
``sim.log``, line-buffered through ``stdbuf`` where present: GPGPU-Sim prints with C stdio,
which is block-buffered into a file, and an ``abort()`` would otherwise lose its last
message. A timeout kills the whole group, and the program dies with the process that started it
(even one killed by SIGKILL); a timeout, crash, abort or non-zero exit is one
:class:`HilsimError` line that names the log. While the program runs, ``progress`` (when
given) is called about once a second with the number of kernels finished so far and the
simulated cycles (``gpu_tot_sim_cycle``) read from the growing log.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.build import SimBuild, find_build
from hilsim.simmodel.gpgpusim.cards import CardConfig, card_config
from hilsim.simmodel.gpgpusim.simlog import parse_simlog

from hilsim.core.errors import HilsimError

LOG_NAME = "sim.log"
# a line of the log that says why the simulator stopped
_WHY = re.compile(
    r"(\bERROR\b|\bError\b|\berror:|\babort(ed)?\b|Assertion|not implemented|Segmentation"
    r"|terminate called|Execution error|cudaError|\bfailed\b)"
)


@dataclass(frozen=True)
class SimRun:
    """A finished simulated run."""

    run_dir: Path
    log_path: Path
    returncode: int
    wall_s: float
    stdout: str  # the whole log: the program's output interleaved with the simulator's
    #: (log bytes written, simulator CPU seconds) every ``TRACE_INTERVAL_S`` while it ran, and
    #: once at its end (:func:`cpu_trace_point`): which part of the log cost what
    cpu_trace: tuple[tuple[int, float], ...] = ()
    #: the simulator process's user + system CPU seconds (``wait4``: this child only,
    #: whatever else runs in this process), its children (ptxas, cuobjdump) included
    cpu_s: float = 0.0
    #: True when ``stop`` ended the run once it had what it was run for (killed, not failed)
    stopped: bool = False

    def kernel_cycles(self) -> list[tuple[str, int]]:
        """(kernel name, ``gpu_sim_cycle``) of every kernel the log reports, in order."""
        return kernel_cycles(self.stdout)

    def kernel_stats(self, counters: str = "cumulative") -> Any:
        """Per-kernel statistics of the log
        (:func:`hilsim.simmodel.gpgpusim.simlog.parse_simlog`)."""
        return parse_simlog(self.stdout, str(self.log_path), counters)


_KERNEL = re.compile(r"^kernel_name = (\S+)\s*$", re.M)
_TOT_CYCLES = re.compile(rb"^gpu_tot_sim_cycle = (\d+)\s*$", re.M)
_DONE = re.compile(rb"^kernel_name = ", re.M)
#: seconds between two looks at the growing log
PROGRESS_INTERVAL_S = 1.0
#: seconds between two points of a run's CPU trace (a /proc read and a file size: the
#: finer, the better short launches' CPU is told apart, :func:`fastforward.cpu_per_launch`)
TRACE_INTERVAL_S = 0.2
#: seconds between two checks of a run's ``stop`` condition, and of its exit
STOP_POLL_S = 0.2
REAP_POLL_S = 0.05
#: seconds a killed simulator gets to die
KILL_WAIT_S = 30.0


class AppendedLines:
    """The whole lines appended to a growing file since the last call (a line cut at the
    end of a read is kept for the next call); a missing file reads as nothing yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.tail = b""

    def poll(self) -> bytes:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except OSError:
            return b""
        self.offset += len(chunk)
        data = self.tail + chunk
        cut = data.rfind(b"\n") + 1
        self.tail = data[cut:]
        return data[:cut]


class LogFollower:
    """Counts finished kernels and reads the simulated cycles of a growing log.

    Reads only what was appended since the last call (the log of a full run is ~100 MB).
    """

    def __init__(self, path: Path) -> None:
        self.lines = AppendedLines(path)
        self.kernels = 0
        self.cycles = 0.0

    def poll(self) -> tuple[int, float]:
        """(kernels finished, simulated cycles so far) after reading the new bytes."""
        whole = self.lines.poll()
        self.kernels += len(_DONE.findall(whole))
        found = _TOT_CYCLES.findall(whole)
        if found:
            self.cycles = float(found[-1])
        return self.kernels, self.cycles


_CYCLES = re.compile(r"^gpu_sim_cycle = (\d+)\s*$", re.M)


def kernel_cycles(log_text: str) -> list[tuple[str, int]]:
    """(kernel name, simulated cycles) per kernel statistics block of a GPGPU-Sim log."""
    names = [(m.start(), m.group(1)) for m in _KERNEL.finditer(log_text)]
    out = []
    for i, (pos, name) in enumerate(names):
        end = names[i + 1][0] if i + 1 < len(names) else len(log_text)
        m = _CYCLES.search(log_text, pos, end)
        if m:
            out.append((name, int(m.group(1))))
    return out


def why_failed(log_text: str) -> str:
    """The last of a log's final 50 lines that says what went wrong, else its last line."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    for ln in reversed(lines[-50:]):
        if _WHY.search(ln):
            return ln[:200]
    return f"last line: {lines[-1][:200]}" if lines else "empty log"


def _clock64_hint(run_dir: Path) -> str:
    """Why a SIGABRT probably happened: the PTX reads %clock64 (clock(), clock64())."""
    for ptx in run_dir.glob("*.ptx"):
        with contextlib.suppress(OSError):
            if "%clock64" in ptx.read_text(errors="replace"):
                return (f"{ptx.name} reads %clock64 (clock()/clock64()), which GPGPU-Sim "
                        "aborts on: read %clock with inline PTX; ")
    return ""


def _program(argv0: str) -> str:
    if os.sep in argv0:
        p = Path(argv0).expanduser().resolve()
        if not p.is_file():
            raise HilsimError(f"{argv0}: no such program")
        return str(p)
    found = shutil.which(argv0)
    if found is None:
        raise HilsimError(f"{argv0}: program not found on PATH")
    return found


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


@contextlib.contextmanager
def _terminate_as_interrupt() -> Any:
    """While a simulation runs, SIGTERM (and SIGINT where a background shell ignored it)
    raise KeyboardInterrupt in the main thread, so the simulator's process group, which
    runs in its own session, is killed with it instead of running on, orphaned (only the
    main thread may install handlers: elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: the simulations this process runs now (from any thread), for :func:`kill_running`
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


@contextlib.contextmanager
def tracked(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """``proc`` (the leader of its own process group) known to :func:`kill_running` while
    the block runs."""
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        yield proc
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


def kill_running() -> None:
    """SIGKILL the process group of every simulation this process runs now: the worker
    threads waiting on them see the kill and return."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def simulations_interruptible() -> Iterator[None]:
    """Around a pool of threads that run simulations: Ctrl-C or SIGTERM (raised as
    KeyboardInterrupt in the main thread), or any error, kills every running simulation
    before the pool waits for its threads (which would otherwise wait for each simulation
    to end). Enter it inside the pool's ``with`` so it exits first."""
    with _terminate_as_interrupt():
        try:
            yield
        except BaseException:
            kill_running()
            raise


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_trace_point(pid: int, log: Path) -> tuple[int, float] | None:
    """(bytes in ``log``, user + system CPU seconds of process ``pid``) now, from
    ``/proc/PID/stat`` (fields 14 and 15, in clock ticks); None where either is unreadable
    (no ``/proc``, the process gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        return log.stat().st_size, cpu
    except (OSError, ValueError, IndexError):
        return None


def _reap(proc: subprocess.Popen, within_s: float) -> tuple[int, float] | None:
    """(return code, CPU seconds) of ``proc`` once it exited within ``within_s``, else None.

    ``os.wait4`` reports the CPU time of this child alone (``RUSAGE_CHILDREN`` would mix
    in every other child that this process, or another thread of it, waited for)."""
    end = time.monotonic() + within_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            rc = os.waitstatus_to_exitcode(status)
            proc.returncode = rc  # reaped here: Popen must not wait for it again
            return rc, usage.ru_utime + usage.ru_stime
        left = end - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(REAP_POLL_S, left))


def _wait(proc: subprocess.Popen, timeout_s: float, log: Path,
          progress: Callable[[int, float], None] | None,
          trace: list[tuple[int, float]],
          stop: Callable[[], bool] | None = None) -> tuple[int, float, bool]:
    """Wait for ``proc`` (``TimeoutExpired`` after ``timeout_s``), calling ``progress`` and
    appending a :func:`cpu_trace_point` to ``trace`` every :data:`TRACE_INTERVAL_S`; when
    ``stop()`` turns true the process group is killed. (return code, CPU seconds, stopped)."""
    follower = LogFollower(log) if progress is not None else None
    deadline = time.monotonic() + timeout_s
    interval = min(STOP_POLL_S, TRACE_INTERVAL_S)
    last_point = last_progress = 0.0
    while True:
        now = time.monotonic()
        if now - last_point >= TRACE_INTERVAL_S:
            last_point = now
            point = cpu_trace_point(proc.pid, log)
            if point is not None:
                trace.append(point)
        if now - last_progress >= PROGRESS_INTERVAL_S:
            last_progress = now
            if follower is not None and progress is not None:
                progress(*follower.poll())
        done = _reap(proc, min(interval, max(deadline - time.monotonic(), 0.0)))
        if done is not None:
            if follower is not None and progress is not None:
                progress(*follower.poll())
            return done[0], done[1], False
        if stop is not None and stop():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            done = _reap(proc, KILL_WAIT_S)
            if done is None:
                raise HilsimError(f"{log}: the simulator did not die within {KILL_WAIT_S:g} s")
            return done[0], done[1], True
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)


def _set_parent_death_signal() -> None:
    """In the forked child, before ``exec``: SIGKILL when the thread that started it dies
    (``prctl(PR_SET_PDEATHSIG)``), also by SIGKILL, which no handler sees."""
    import ctypes  # lazy: only where setpriv is missing

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1


def spawn_dying_with_parent(argv: Sequence[str], **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen)`` whose process is killed when this one dies
    (even by SIGKILL, which leaves no handler a chance to kill it): the parent-death
    signal set by ``setpriv --pdeathsig KILL`` (util-linux), which then ``exec``s the
    program (the signal survives ``exec``), or by ``prctl`` before ``exec`` where setpriv
    is missing. The signal is tied to the thread that starts the process, which waits
    for it (:func:`run_program`) and so outlives it."""
    setpriv = shutil.which("setpriv")
    if setpriv:
        return subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *argv], **popen)
    return subprocess.Popen(list(argv), preexec_fn=_set_parent_death_signal,  # noqa: PLW1509
                            **popen)


def run_program(
    argv: Sequence[str | os.PathLike[str]],
    card: str | os.PathLike[str] | CardConfig,
    run_dir: str | os.PathLike[str],
    *,
    options: Mapping[str, Any] | None = None,
    timeout_s: float = 600,
    build: SimBuild | None = None,
    env: Mapping[str, str] | None = None,
    progress: Callable[[int, float], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> SimRun:
    """Run ``argv`` on the simulated ``card`` in ``run_dir``; return the finished run.

    ``options`` override the card's (e.g. ``{"-gpgpu_n_clusters": "1",
    "-gpgpu_perf_sim_memcpy": "0"}``); ``env`` adds variables for the program (the
    simulator's own, from :meth:`SimBuild.env`, win). ``stop``, polled about five times a
    second, ends the run early once it holds what it was run for (the run is then
    ``stopped``, not failed). Raises one-line :class:`HilsimError` on a missing build, a
    timeout (the process group is killed), a crash, an abort or a non-zero exit.
    """
    if not argv:
        raise HilsimError("gpgpusim run: no program given")
    build = build or find_build()
    if build is None:
        raise HilsimError(
            "no GPGPU-Sim build found: run `hilsim gpgpusim setup` "
            "(or set HILSIM_GPGPUSIM_HOME to a built source tree)"
        )
    cfg = card if isinstance(card, CardConfig) else card_config(card, build)
    cfg = cfg.with_options(options)
    run = Path(run_dir).expanduser().resolve()
    cmd = [_program(str(argv[0])), *(str(a) for a in argv[1:])]
    cfg.write(run)
    log = run / LOG_NAME
    stdbuf = shutil.which("stdbuf")
    full = [stdbuf, "-oL", "-eL", *cmd] if stdbuf else cmd
    what = f"{Path(cmd[0]).name} on {cfg.name}"
    started = time.monotonic()
    trace: list[tuple[int, float]] = []
    with log.open("wb") as out:
        proc = spawn_dying_with_parent(  # a killed caller takes the simulation with it
            full,
            cwd=run,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=build.env({**os.environ, **(env or {})}),
            start_new_session=True,
        )
        try:
            with _terminate_as_interrupt(), tracked(proc):
                rc, cpu, stopped = _wait(proc, timeout_s, log, progress, trace, stop)
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                _reap(proc, KILL_WAIT_S)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise HilsimError(
                    f"{what}: still running after {timeout_s:g} s, killed: log {log}"
                ) from None
            raise
        finally:
            # the simulator's children (cuobjdump, ptxas) must not outlive the run
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    wall = time.monotonic() - started
    text = log.read_text(encoding="utf-8", errors="replace")
    if stopped:
        return SimRun(run, log, rc, wall, text, tuple(trace), cpu, True)
    if rc < 0:
        hint = _clock64_hint(run) if rc == -signal.SIGABRT else ""
        raise HilsimError(
            f"{what}: simulator killed by {_signal_name(rc)} ({hint}{why_failed(text)}): "
            f"log {log}"
        )
    if rc != 0:
        raise HilsimError(f"{what}: exit {rc} ({why_failed(text)}): log {log}")
    if "GPGPU-Sim" not in text:
        raise HilsimError(
            f"{what}: exited without loading GPGPU-Sim's libcudart (compile with "
            f"`-cudart shared`): log {log}"
        )
    return SimRun(run, log, rc, wall, text, tuple(trace), cpu)
