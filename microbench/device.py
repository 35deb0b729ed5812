"""The device a microbenchmark family measures on (Accel-Sim, Khairy et al., ISCA 2020,
Section II-C: one suite of targeted microbenchmarks, run on a GPU and, to check the
tuner, on a simulated card).

A family is written once, against this protocol: its kernel sources, its measurement
names and functions that take a :class:`Device`, build a
:class:`~hilsim.microbench.program.Program` and read the :class:`ProgramResult`. Two devices
implement it:

* :class:`hilsim.microbench.cupy_device.CupyDevice`: a CUDA GPU through CuPy. Noisy, so
  every measurement repeats until stable; launches are timed by CUDA events.
* ``hilsim.simmodel.gpgpusim.simdevice.GpgpusimDevice``: a card simulated by GPGPU-Sim.
  Deterministic and slow (:attr:`Device.simulated`): one short run per measurement,
  several measurements per program, throughput on a slice of the card (:class:`Setup`),
  launches timed by simulated cycles.

What a device cannot do is a property of the device: :attr:`Device.unsupported` maps a
feature (:data:`FEATURES`) to the reason, and a family records a measurement that needs
it as skipped with that reason (:func:`skipped`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np
from hilsim.microbench.program import Program, ProgramResult

from hilsim.core.measurement import Measurement, Stability

#: ``%globaltimer`` readable (the clock family; launch latency from kernel time stamps)
GLOBALTIMER = "globaltimer"
#: ``mma.sync`` tensor-core instructions execute
MMA = "mma"
#: address translation is modelled (the page-stride DRAM chase means something)
TLB = "tlb"
#: chases of 10^5 or more dependent loads are affordable (the stride sweep)
LONG_CHASES = "long_chases"
#: ``red`` executes as itself (without it, :meth:`Device.executed_as` says what ran)
RED = "red"
FEATURES = (GLOBALTIMER, MMA, TLB, LONG_CHASES, RED)


class Setup(enum.Enum):
    """Where a program's launches run. A GPU runs every program on the whole device; a
    simulator runs a reduced card for each, so a simulation takes seconds."""

    #: one thread or warp timing itself: one SM, no launch latency, uploads leave L2 cold
    ONE_SM = "one_sm"
    #: as ``ONE_SM``, but uploads go through L2 as the card is configured
    ONE_SM_CACHED_UPLOADS = "one_sm_cached_uploads"
    #: one warp timing itself with no memory access between its clock reads (the unit
    #: probes): ``ONE_SM`` on one memory channel, as a simulator's cost per cycle grows
    #: with the channels it ticks
    ONE_SM_ONE_CHANNEL = "one_sm_one_channel"
    #: kernel launches themselves: one SM, the card's own launch latency
    LAUNCH = "launch"
    #: per-SM rates: :attr:`Device.active_sms` SMs, no launch latency, cold uploads
    SM_SLICE = "sm_slice"
    #: L2 and DRAM bandwidth: the SM slice on :attr:`Device.memory_slice_channels` memory
    #: channels (scaled by the device)
    MEMORY_SLICE = "memory_slice"


class Device(Protocol):
    """What a family needs from a backend (see the module docstring)."""

    #: facts in the suite's key names (``sm_count``, ``l2_cache_bytes``, ...): the file's
    #: ``device`` block
    facts: dict[str, Any]
    #: deterministic and slow: one short run per measurement, no repetition
    simulated: bool
    #: feature of :data:`FEATURES` -> why this device lacks it
    unsupported: Mapping[str, str]
    #: params naming the backend, on every measurement it alone takes (none on a GPU)
    backend_params: dict[str, Any]
    #: params every kernel-timed measurement of this device ends with
    kernel_clock_params: dict[str, Any]
    #: what leaves L2 cold when a program starts on this device (the ``cold`` param of the
    #: measurements that rely on it): the device's own setting, named as it names it
    cold_l2_note: str
    #: what :attr:`memory_scale` counts, as this device names it (the ``scaling`` param of
    #: the DRAM bandwidths measured on a slice)
    memory_scale_note: str
    #: memory channels a :attr:`Setup.MEMORY_SLICE` run has: its bandwidth over them is
    #: the bandwidth per channel that :attr:`memory_scale` multiplies (1 where the slice
    #: is the whole device)
    memory_slice_channels: int

    @property
    def sm_count(self) -> int:
        """SMs of the device (the card's, on a simulator)."""
        ...

    @property
    def active_sms(self) -> int:
        """SMs a throughput grid is sized for and runs on (:attr:`Setup.SM_SLICE`)."""
        ...

    @property
    def threads_per_sm(self) -> int:
        """Resident threads per SM."""
        ...

    @property
    def memory_scale(self) -> int:
        """What L2 and DRAM bandwidth measured on :attr:`Setup.MEMORY_SLICE` is scaled by
        to the whole device (1 where the slice is the whole device)."""
        ...

    @property
    def cc(self) -> tuple[int, int]:
        """Compute capability (major, minor)."""
        ...

    def supports(self, feature: str) -> bool:
        """Whether ``feature`` (:data:`FEATURES`) is available."""
        ...

    def rng(self, salt: int) -> np.random.Generator:
        """A deterministic generator per benchmark (seeded by the suite's seed)."""
        ...

    def sm_clock_mhz(self) -> tuple[float | None, str]:
        """SM clock for cycle conversions and where it came from."""
        ...

    def use_measured_clock(self, mhz: float) -> None:
        """Convert with ``mhz`` from now on (the clock family's measurement)."""
        ...

    def sample(
        self, fn: Callable[[], float], max_reps: int, rel_spread_bound: float, min_reps: int
    ) -> Stability:
        """``fn``'s value: repeated until stable on a noisy device, once on a simulator."""
        ...

    def run(
        self, bench: str, program: Program, setup: Setup, *, timed: bool = True
    ) -> ProgramResult:
        """Run ``program`` once (``timed=False``: launches without host timing, a warm-up)."""
        ...

    def free_bytes(self) -> int:
        """Device memory a benchmark may allocate now."""
        ...

    def prefer_max_l1(self, module: str, kernel: str) -> int | None:
        """Ask for the smallest shared-memory carveout (the largest L1) for ``kernel``;
        the percent set, or None when the device cannot."""
        ...

    def executed_as(self, instruction: str) -> str:
        """How ``instruction`` is described when this device runs something else for it."""
        ...

    def slice_params(self) -> dict[str, Any]:
        """Params a throughput measurement starts with: the slice it ran on (or none)."""
        ...


def skipped(name: str, unit: str, why: str, device: Device) -> Measurement:
    """A measurement ``device`` does not take, with the reason."""
    return Measurement(
        name, None, unit, dict(device.backend_params), [], 0.0, False, f"skipped: {why}"
    )


def skip_unless(
    device: Device, feature: str, measurements: list[tuple[str, str]]
) -> list[Measurement] | None:
    """Skipped measurements (name, unit) when ``device`` lacks ``feature``, else None."""
    if device.supports(feature):
        return None
    why = device.unsupported[feature]
    return [skipped(name, unit, why, device) for name, unit in measurements]


Benchmark = tuple[str, Callable[[Device], list[Measurement]]]
