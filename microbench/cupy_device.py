"""The CuPy device: a CUDA GPU running the suite's programs (Accel-Sim Section II-C; the
:class:`~hilsim.microbench.device.Device` a family measures on).

A :class:`~hilsim.microbench.program.Program` runs step by step: buffers are CuPy arrays
(a chain is built on the GPU from the node order), kernels come from CuPy ``RawModule``s of
the sources (``hilsim.microbench.sources``, compiled on first use with
:data:`~hilsim.microbench.gpu.NVRTC_OPTIONS`), launches are timed by CUDA events as each
launch step asks, and ``read`` steps copy to the host. The GPU is noisy, so
:meth:`CupyDevice.sample` repeats until stable.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from hilsim.microbench.device import Setup
from hilsim.microbench.gpu import EXTRA_HINT, NVRTC_OPTIONS, first_line
from hilsim.microbench.program import (
    Alloc,
    Chain,
    Fill32,
    Host,
    Iota,
    Launch,
    Program,
    Read,
    Sync,
    Upload,
)
from hilsim.microbench.sources import all_sources

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Stability, repeat_until_stable

_SCALARS: dict[str, Callable[[Any], Any]] = {
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "u64": lambda v: np.uint64(int(v) % (1 << 64)),
    "f32": np.float32,
    "f64": np.float64,
}


@dataclass
class CupyRun:
    """One program run on the GPU (a :class:`~hilsim.microbench.program.ProgramResult`)."""

    cp: Any
    buffers: dict[str, Any] = field(default_factory=dict)
    reads: dict[str, np.ndarray] = field(default_factory=dict)
    addresses: dict[str, int] = field(default_factory=dict)
    kernel_cycles: list[float] = field(default_factory=list)
    ms: dict[int, float] = field(default_factory=dict)
    batch: dict[int, int] = field(default_factory=dict)
    roundtrip_ns: dict[int, int] = field(default_factory=dict)
    host: list[Any] = field(default_factory=list)

    def array(self, name: str, dtype: Any) -> np.ndarray:
        """What the ``read`` step of ``name`` copied to the host."""
        return self.reads[name].view(dtype)

    def buffer(self, name: str, dtype: Any) -> Any:
        """The buffer on the GPU after the run (a CuPy array, no copy)."""
        return self.buffers[name].view(dtype)

    def address(self, name: str) -> int | None:
        """The device address of a chain's first node."""
        return self.addresses.get(name)

    @property
    def xp(self) -> Any:
        """CuPy."""
        return self.cp


@dataclass
class CupyDevice:
    """A CUDA GPU through CuPy: its facts, compiled modules and the runs of programs."""

    cp: Any
    device: int
    facts: dict[str, Any]
    seed: int = 0
    sm_clock_mhz_measured: float | None = None
    simulated: bool = field(default=False, init=False)
    unsupported: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), init=False)
    backend_params: dict[str, Any] = field(default_factory=dict, init=False)
    kernel_clock_params: dict[str, Any] = field(default_factory=dict, init=False)
    cold_l2_note: str = field(default="a 2 x L2 buffer read through L2 first (flush_l2)",
                              init=False)
    memory_scale_note: str = field(default="the whole GPU (no slice)", init=False)
    memory_slice_channels: int = field(default=1, init=False)
    _modules: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _functions: dict[tuple[str, str], Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def sm_count(self) -> int:
        """Number of SMs."""
        return int(self.facts["sm_count"])

    @property
    def active_sms(self) -> int:
        """Every SM: grids fill the whole GPU."""
        return self.sm_count

    @property
    def memory_scale(self) -> int:
        """1: bandwidth is measured on the whole GPU."""
        return 1

    @property
    def cc(self) -> tuple[int, int]:
        """Compute capability (major, minor)."""
        return int(self.facts.get("cc_major", 0)), int(self.facts.get("cc_minor", 0))

    @property
    def threads_per_sm(self) -> int:
        """Resident threads per SM (2048 on sm_70/80/90, 1024 on sm_75, 1536 on sm_86)."""
        return int(self.facts.get("max_threads_per_sm") or 1024)

    def supports(self, feature: str) -> bool:
        """Everything the suite uses runs on a GPU."""
        return feature not in self.unsupported

    def sm_clock_mhz(self) -> tuple[float | None, str]:
        """SM clock for cycle conversions and where it came from."""
        if self.sm_clock_mhz_measured:
            return self.sm_clock_mhz_measured, "measured (clock.sm_clock)"
        if self.facts.get("max_sm_clock_mhz"):
            return float(self.facts["max_sm_clock_mhz"]), "max SM clock (NVML/properties)"
        return None, "unknown"

    def use_measured_clock(self, mhz: float) -> None:
        """Convert with the clock family's measured clock from now on."""
        self.sm_clock_mhz_measured = float(mhz)

    def rng(self, salt: int) -> np.random.Generator:
        """A deterministic generator per benchmark."""
        return np.random.default_rng([self.seed, salt])

    def sample(
        self, fn: Callable[[], float], max_reps: int, rel_spread_bound: float, min_reps: int
    ) -> Stability:
        """Repeat ``fn`` until stable (:func:`~hilsim.core.measurement.repeat_until_stable`)."""
        return repeat_until_stable(fn, max_reps, rel_spread_bound, min_reps)

    def executed_as(self, instruction: str) -> str:
        """A GPU runs every instruction as written."""
        return instruction

    def slice_params(self) -> dict[str, Any]:
        """No slice: grids run on the whole GPU."""
        return {}

    def module(self, name: str) -> Any:
        """The compiled CuPy ``RawModule`` for source ``name`` (see ``sources.py``)."""
        if name not in self._modules:
            code = all_sources()[name]
            self._modules[name] = self.cp.RawModule(code=code, options=NVRTC_OPTIONS)
        return self._modules[name]

    def kernel(self, module: str, name: str) -> Any:
        """A kernel of a compiled module (compiles on first use; one line on failure)."""
        key = (module, name)
        if key not in self._functions:
            try:
                self._functions[key] = self.module(module).get_function(name)
            except Exception as exc:
                hint = ""
                runtime = int(self.facts.get("cuda_runtime_version") or 0)
                text = str(exc).lower()
                if "libnvrtc" in text or ("nvrtc" in text and "not found" in text):
                    hint = f" (NVRTC is missing: the GPU extras install it; {EXTRA_HINT})"
                elif self.cc < (7, 5) and runtime >= 13000:
                    hint = (
                        f" (CUDA 13 cannot compile for sm_{self.cc[0]}{self.cc[1]}: {EXTRA_HINT})"
                    )
                raise HilsimError(
                    f"compiling {module}:{name} failed: {first_line(exc)}{hint}"
                ) from None
        return self._functions[key]

    def prefer_max_l1(self, module: str, kernel: str) -> int | None:
        """Ask for the smallest shared-memory carveout on ``kernel`` (the largest L1).
        Returns the percent set, or None when the CuPy kernel object does not support it."""
        try:
            self.kernel(module, kernel).preferred_shared_memory_carveout = 0
        except Exception:  # older CuPy, or a stand-in without the attribute
            return None
        return 0

    def time_ms(self, launch: Callable[[], None]) -> float:
        """GPU time of ``launch()`` on the current stream, by CUDA events (ms)."""
        cp = self.cp
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        return float(cp.cuda.get_elapsed_time(start, stop))

    def time_batch_ms(
        self,
        launch: Callable[[], None],
        reset: Callable[[], None] | None = None,
        min_ms: float = 10.0,
        min_launches: int = 4,
        max_launches: int = 256,
    ) -> tuple[float, int]:
        """GPU time per launch of ``k`` back-to-back launches between one event pair (ms, k).

        ``reset`` (fills, zeroing) runs before the events, never inside them; ``k`` is
        chosen from one timed launch so the window lasts >= ``min_ms`` (the first launch's
        Python gap and the last launch's dirty lines still in L2 then weigh < 1/k).
        Accumulating kernels see ``k`` launches after the last ``reset``.
        """
        if reset is not None:
            reset()
        one = self.time_ms(launch)
        k = int(min(max_launches, max(min_launches, math.ceil(min_ms / max(one, 1e-4)))))
        if reset is not None:
            reset()

        def batch() -> None:
            for _ in range(k):
                launch()

        return self.time_ms(batch) / k, k

    def free_bytes(self) -> int:
        """Free device memory now (after CuPy's pool has released what it holds)."""
        self.cp.get_default_memory_pool().free_all_blocks()
        free, _total = self.cp.cuda.runtime.memGetInfo()
        return int(free)

    def run(
        self, bench: str, program: Program, setup: Setup, *, timed: bool = True
    ) -> CupyRun:
        """Run ``program`` once, step by step, on the whole GPU (``setup`` places runs on
        a simulator only). ``timed=False`` launches without events (a warm-up)."""
        cp = self.cp
        result = CupyRun(cp)
        bufs = result.buffers
        launches = 0
        for step in program.steps:
            if isinstance(step, Alloc):
                bufs[step.name] = cp.zeros(step.nbytes, dtype=cp.uint8)
            elif isinstance(step, Upload):
                bufs[step.name] = cp.asarray(step.values)
            elif isinstance(step, Iota):
                words = cp.arange(step.count, dtype=cp.uint32)
                bufs[step.name] = words if step.modulo is None else words % np.uint32(step.modulo)
            elif isinstance(step, Chain):
                bufs[step.name] = _chain(cp, step)
                result.addresses[step.name] = int(bufs[step.name].data.ptr)
            elif isinstance(step, Fill32):
                bufs[step.name].view(cp.uint32).fill(step.value)
            elif isinstance(step, Launch):
                self._launch(program.module, step, launches, bufs, result, timed)
                launches += 1
            elif isinstance(step, Read):
                result.reads[step.name] = bufs[step.name].get()
            elif isinstance(step, Host):
                result.host.append(step.call())
            elif isinstance(step, Sync):
                cp.cuda.get_current_stream().synchronize()
        return result

    def _launch(
        self,
        module: str,
        step: Launch,
        index: int,
        bufs: dict[str, Any],
        result: CupyRun,
        timed: bool,
    ) -> None:
        kern = self.kernel(module, step.kernel)
        args = tuple(bufs[v] if kind == "buf" else _SCALARS[kind](v) for kind, v in step.args)

        def launch() -> None:
            kern(step.grid, step.block, args, shared_mem=step.smem)

        timing = step.timing if timed else None
        if timing is None:
            launch()
        elif timing == "event":
            result.ms[index] = self.time_ms(launch)
        elif timing == "batch":
            names = step.reset

            def reset() -> None:
                for name in names:
                    bufs[name].fill(0)

            result.ms[index], result.batch[index] = self.time_batch_ms(
                launch, reset if names else None
            )
        else:  # roundtrip
            stream = self.cp.cuda.get_current_stream()
            t0 = time.perf_counter_ns()
            launch()
            stream.synchronize()
            result.roundtrip_ns[index] = time.perf_counter_ns() - t0


def _chain(cp: Any, step: Chain) -> Any:
    """The chain's buffer on the GPU: node i (byte i*stride) = address of node next[i]."""
    n = len(step.next)
    buf = cp.zeros(step.nbytes // 8, dtype=cp.uint64)
    base = int(buf.data.ptr)
    slots = np.arange(n, dtype=np.int64) * (step.stride // 8)
    values = (base + slots[step.next] * 8).astype(np.uint64)
    buf[cp.asarray(slots)] = cp.asarray(values)
    return buf
