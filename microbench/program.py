"""A kernel program: the buffers, launches and read-backs of one benchmark run, written
once for every device (:class:`hilsim.microbench.device.Device`).

A family builds a :class:`Program` over the kernels of one of its sources (``SOURCES`` in
the family module, named ``family.source``) and a device runs it: the CuPy device step
by step on the GPU (:mod:`hilsim.microbench.cupy_device`), the GPGPU-Sim device as one
simulated host program whose plan lists the same steps
(``hilsim.simmodel.gpgpusim.simhost``). Every run starts from freshly allocated,
zeroed buffers; a run's :class:`ProgramResult` holds what its ``read`` steps read back.

Kernel arguments are ``(kind, value)`` pairs: ``("buf", name)`` for a buffer of the
program, or a scalar kind of :data:`ARG_KINDS` (``f32``/``f64`` values are floats, the
others integers); :func:`scalar_arg` turns a numpy scalar into one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hilsim.core.errors import HilsimError

#: kinds of a kernel argument: a buffer of the program, or a scalar of that C type
ARG_KINDS = ("buf", "i32", "u32", "i64", "u64", "f32", "f64")

Arg = tuple[str, Any]


def scalar_arg(value: Any) -> Arg:
    """A numpy scalar as a kernel argument: float32 -> f32, float64 -> f64, uint32 -> u32,
    int64 -> i64, anything else i32."""
    if isinstance(value, np.float32):
        return ("f32", float(value))
    if isinstance(value, np.float64):
        return ("f64", float(value))
    if isinstance(value, np.uint32):
        return ("u32", int(value))
    if isinstance(value, np.int64):
        return ("i64", int(value))
    return ("i32", int(value))


@dataclass(frozen=True)
class Alloc:
    """A zeroed buffer of ``nbytes`` bytes."""

    name: str
    nbytes: int


@dataclass(frozen=True)
class Upload:
    """A buffer holding ``values`` (their bytes, little endian)."""

    name: str
    values: np.ndarray


@dataclass(frozen=True)
class Iota:
    """A buffer of ``count`` 32-bit words ``0, 1, 2, ...`` (modulo ``modulo`` when given)."""

    name: str
    count: int
    modulo: int | None = None

    def values(self) -> np.ndarray:
        """The words, as the host computes them."""
        words = np.arange(self.count, dtype=np.uint32)
        if self.modulo is not None:
            words = words % np.uint32(self.modulo)
        return words.astype("<u4")


@dataclass(frozen=True)
class Chain:
    """A pointer chain: node ``i`` at byte ``i * stride`` holds the device address of node
    ``next[i]`` (a buffer of ``len(next) * stride`` bytes)."""

    name: str
    stride: int
    next: np.ndarray

    @property
    def nbytes(self) -> int:
        """Size of the chain's buffer."""
        return len(self.next) * self.stride


@dataclass(frozen=True)
class Fill32:
    """Every 32-bit word of a buffer set to ``value`` (the CuPy device fills on the GPU)."""

    name: str
    value: int


@dataclass(frozen=True)
class Launch:
    """One kernel launch.

    ``timing`` says how a device that times launches from the host times this one:
    ``None`` (not timed), ``"event"`` (CUDA events around it), ``"batch"`` (enough
    back-to-back launches between one event pair; the buffers in ``reset`` are zeroed
    before every window, outside it) or ``"roundtrip"`` (host clock around the launch
    and a stream synchronize). A simulator counts every launch's cycles instead.
    """

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    smem: int = 0
    timing: str | None = None
    reset: tuple[str, ...] = ()


@dataclass(frozen=True)
class Read:
    """Read a buffer back after every step before it ran."""

    name: str


@dataclass(frozen=True)
class Host:
    """Call ``call`` on the host at this point (kernels launched before may still run);
    its result is kept. Only a device that runs the steps one by one supports it."""

    call: Callable[[], Any]


@dataclass(frozen=True)
class Sync:
    """Wait until every launched kernel has finished."""


Step = Alloc | Upload | Iota | Chain | Fill32 | Launch | Read | Host | Sync
TIMINGS = (None, "event", "batch", "roundtrip")


def _dims(value: int | Sequence[int]) -> tuple[int, int, int]:
    dims = [*(value if isinstance(value, Sequence) else [value]), 1, 1][:3]
    return int(dims[0]), int(dims[1]), int(dims[2])


@dataclass
class Program:
    """The steps of one run over the kernels of source ``module`` (``family.source``)."""

    module: str
    steps: list[Step] = field(default_factory=list)

    def buf(self, name: str, nbytes: int) -> Program:
        """A zeroed buffer."""
        self.steps.append(Alloc(name, int(nbytes)))
        return self

    def data(self, name: str, values: np.ndarray) -> Program:
        """A buffer holding ``values``."""
        self.steps.append(Upload(name, np.ascontiguousarray(values)))
        return self

    def iota(self, name: str, count: int, modulo: int | None = None) -> Program:
        """A buffer of ``count`` 32-bit words ``0, 1, 2, ...`` (modulo ``modulo``)."""
        self.steps.append(Iota(name, int(count), None if modulo is None else int(modulo)))
        return self

    def chain(self, name: str, stride: int, nxt: np.ndarray) -> Program:
        """A pointer chain buffer: node i holds the device address of node ``nxt[i]``."""
        self.steps.append(Chain(name, int(stride), np.ascontiguousarray(nxt, dtype="<i8")))
        return self

    def fill32(self, name: str, value: int) -> Program:
        """Every 32-bit word of the buffer = ``value``."""
        self.steps.append(Fill32(name, int(value) & 0xFFFFFFFF))
        return self

    def launch(
        self,
        kernel: str,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Arg],
        smem: int = 0,
        timing: str | None = None,
        reset: Sequence[str] = (),
    ) -> int:
        """Launch ``kernel``; returns the launch's index in this program."""
        for kind, _value in args:
            if kind not in ARG_KINDS:
                raise HilsimError(f"program: unknown argument type {kind!r}")
        if timing not in TIMINGS:
            raise HilsimError(f"program: unknown timing {timing!r}")
        step = Launch(kernel, _dims(grid), _dims(block), tuple(args), int(smem), timing,
                      tuple(reset))
        self.steps.append(step)
        return len(self.launches) - 1

    def read(self, name: str) -> Program:
        """Read the buffer back after everything before it ran."""
        self.steps.append(Read(name))
        return self

    def host(self, call: Callable[[], Any]) -> int:
        """Call ``call`` on the host at this point; returns its index among host steps."""
        self.steps.append(Host(call))
        return sum(isinstance(s, Host) for s in self.steps) - 1

    def sync(self) -> Program:
        """Wait for every launched kernel."""
        self.steps.append(Sync())
        return self

    @property
    def launches(self) -> list[str]:
        """Kernel names, in launch order."""
        return [s.kernel for s in self.steps if isinstance(s, Launch)]

    @property
    def reads(self) -> list[str]:
        """Buffers read back, in order."""
        return [s.name for s in self.steps if isinstance(s, Read)]


class ProgramResult(Protocol):
    """What one run of a :class:`Program` gave back."""

    #: simulated cycles of every launch (empty where launches are timed from the host)
    kernel_cycles: list[float]
    #: CUDA-event milliseconds per launch, by launch index (``event`` and ``batch`` timing)
    ms: dict[int, float]
    #: back-to-back launches in the window, by launch index (``batch`` timing)
    batch: dict[int, int]
    #: host nanoseconds of launch + synchronize, by launch index (``roundtrip`` timing)
    roundtrip_ns: dict[int, int]
    #: results of the ``host`` steps, in order
    host: list[Any]

    def array(self, name: str, dtype: Any) -> np.ndarray:
        """A read-back buffer as a host numpy array."""
        ...

    def buffer(self, name: str, dtype: Any) -> Any:
        """A buffer's contents after the run where they live (CuPy: on the GPU, no copy;
        a simulator: what was read back, or an input buffer's uploaded data), for checks
        of large buffers with :attr:`xp`."""
        ...

    def address(self, name: str) -> int | None:
        """The device address of a chain's first node, where the device knows it."""
        ...

    @property
    def xp(self) -> Any:
        """The array module of :meth:`buffer` (``cupy`` or ``numpy``)."""
        ...
