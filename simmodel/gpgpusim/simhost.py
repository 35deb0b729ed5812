"""Host programs that run the suite's kernels on GPGPU-Sim: how the GPGPU-Sim device
(:mod:`hilsim.simmodel.gpgpusim.simdevice`) runs a
:class:`~hilsim.microbench.program.Program`.

CuPy cannot drive the simulator (its driver-API entry points are stubs), so the *same*
kernel source text as on a GPU (:func:`hilsim.microbench.sources.all_sources`; unchanged
but for the ``red`` rewrite below) is compiled by nvcc 11.8 together with one generic
host driver (``gpgpusim_host.cu``, written once) into a small program per source module.
The program carries out a *plan*, the program's steps as text (buffers, pointer chains,
uploads, launches, dumps; see the driver's header and :func:`render_plan`), so one
compiled program serves every benchmark of its module.

``%clock`` instead of ``clock64()``: the simulator aborts on ``%clock64``
(``ptx_sim.cc:205``), so on this backend only the program text puts one define after the
CUDA headers, ``#define clock64 hilsim_clock64``, and ``hilsim_clock64()`` reads the
32-bit ``%clock`` register (the simulated core cycle) with inline PTX. The kernel text
itself is untouched. Likewise ``#define __shfl_xor_sync hilsim_shfl_xor_sync``: nvcc
emits ``shfl.sync.bfly.b32 d|p, ...`` for it, GPGPU-Sim's parser takes ``d|p`` for a
vector operand and ``d`` reads 0 (measured: the ``grid_read_*`` warp reductions summed
lane 0 only); the shim's inline PTX is the same shuffle without the predicate
destination, and re-assembles 64-bit values without ``bfi.b64`` (which GPGPU-Sim
computes on 32 bits, ``instructions.cc`` ``bfi_impl``). Kernel text that writes the
shuffle in that ``d`` form itself (the unit probes' ``shfl.sync.bfly.b32 x, x, 1, 31,
-1``, :mod:`hilsim.microbench.unit_ops`) runs unchanged: GPGPU-Sim executes it exactly and
times it by the SHFL entry of ``-ptx_opcode_latency_int`` / ``_initiation_int``. ``%clock`` is
``gpu_sim_cycle + gpu_tot_sim_cycle`` of a fresh process (it starts at 0);
:func:`run_plan` refuses a log whose total cycle count reached 2^32, so every
difference of two reads is exact (no wrap).

``red`` -> ``atom``: GPGPU-Sim's PTX front end does not implement ``red`` ("instruction
red not (yet) implemented"), so on this backend only :func:`sim_kernel_text` rewrites
every ``red.<space>.<op>.<type> [addr], b;`` of the kernel text into
``atom.<space>.<op>.<type> _, [addr], b;`` (PTX's sink ``_`` as destination): the same
memory update. Timing caveat: GPGPU-Sim times an ``atom`` as a load that returns a value,
so the issuing warp keeps a register reservation until the reply comes back from L2,
whereas hardware ``red`` is fire and forget. Throughput kernels with independent updates
are little affected (the warp does not read the result); a rate limited by per-warp
outstanding replies would read lower than hardware's ``red``. The families' kernel text
stays the one source of truth; the rewrite is applied to a copy when the program is
generated, and the generated ``prog.cu`` in the cache shows it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
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
from hilsim.microbench.sources import all_sources, kernel_names
from hilsim.simmodel.gpgpusim import unitprobe
from hilsim.simmodel.gpgpusim.compile import compile_cuda
from hilsim.simmodel.gpgpusim.run import run_program
from hilsim.simmodel.gpgpusim.simlog import parse_simlog

from hilsim.core.errors import HilsimError
from hilsim.core.files import cache_root

CLOCK_SHIM = r"""
// hilsim: GPGPU-Sim backend only. clock64()/clock() become %clock64, which the
// simulator aborts on; %clock (32 bit, simulated core cycles) is read instead.
__device__ __forceinline__ long long hilsim_clock64()
{
    unsigned int c;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c) :: "memory");
    return (long long)c;
}
#define clock64 hilsim_clock64

// hilsim: GPGPU-Sim backend only. __shfl_xor_sync compiles to
// "shfl.sync.bfly.b32 d|p, ...": GPGPU-Sim's parser takes "d|p" for a vector operand and
// d reads 0 (measured); the same shuffle without the predicate destination is exact.
// 64-bit values: two 32-bit shuffles, re-assembled without bfi.b64 (GPGPU-Sim's bfi
// works on the low 32 bits only, instructions.cc bfi_impl).
__device__ __forceinline__ unsigned int hilsim_shfl_xor32(unsigned int mask, unsigned int v,
                                                          int lane_mask)
{
    unsigned int r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 31, %3;"
                 : "=r"(r) : "r"(v), "r"(lane_mask), "r"(mask));
    return r;
}
__device__ __forceinline__ unsigned long long hilsim_shfl_xor_sync(
    unsigned int mask, unsigned long long v, int lane_mask)
{
    unsigned int lo = hilsim_shfl_xor32(mask, (unsigned int)v, lane_mask);
    unsigned int hi = hilsim_shfl_xor32(mask, (unsigned int)(v >> 32), lane_mask);
    unsigned long long h;  // opaque shift: nvcc would fuse "hi << 32 | lo" into bfi.b64
    asm volatile("shl.b64 %0, %1, 32;" : "=l"(h) : "l"((unsigned long long)hi));
    return h | lo;
}
__device__ __forceinline__ unsigned int hilsim_shfl_xor_sync(unsigned int mask, unsigned int v,
                                                             int lane_mask)
{
    return hilsim_shfl_xor32(mask, v, lane_mask);
}
#define __shfl_xor_sync hilsim_shfl_xor_sync
"""

_CLOCK_LIMIT = 1 << 32

#: ``red.<space>.<op>.<type> [`` (inline PTX in the kernel text; ``%%`` operands allowed)
_RED = re.compile(r"\bred\.((?:global|shared)\.[a-z]+\.[a-z0-9]+)\s+\[")


def sim_kernel_text(text: str) -> str:
    """Kernel text as this backend compiles it: ``red.X [a], b`` -> ``atom.X _, [a], b``.

    See the module docstring (GPGPU-Sim does not implement ``red``; timing caveat).
    """
    return _RED.sub(r"atom.\1 _, [", text)


def driver_source() -> str:
    """The generic host driver's text (``simmodel/gpgpusim/gpgpusim_host.cu``)."""
    return resources.files("hilsim.simmodel.gpgpusim").joinpath("gpgpusim_host.cu").read_text()


def program_source(module: str) -> str:
    """The whole ``.cu`` of one module: headers, clock shim, kernel text, table, driver.

    The modules are the suite's sources and the simulator-only one-warp probes of every
    latency/initiation list entry (:mod:`hilsim.simmodel.gpgpusim.unitprobe`).
    """
    sources = {**all_sources(), **unitprobe.SOURCES}
    if module not in sources:
        raise HilsimError(f"no kernel source {module!r} (have {', '.join(sorted(sources))})")
    names = {**kernel_names(), **unitprobe.KERNELS}[module]
    table = ",\n".join(f'    {{"{n}", (const void*){n}}}' for n in names)
    return (
        f"// generated by hilsim.simmodel.gpgpusim.simhost for source {module!r}\n"
        "#include <cuda_runtime.h>\n"
        + CLOCK_SHIM
        + f"// ---- kernel source {module} (hilsim.microbench.sources) ----\n"
        + sim_kernel_text(sources[module])
        + "\n// ---- kernel table ----\n"
        + "struct HilsimKernel { const char* name; const void* fn; };\n"
        + f"static const HilsimKernel HILSIM_KERNELS[] = {{\n{table}\n}};\n"
        + "// ---- host driver (simmodel/gpgpusim/gpgpusim_host.cu) ----\n"
        + driver_source()
    )


def cache_dir() -> Path:
    """Where compiled programs are kept (``$HILSIM_CACHE``/microbench-sim, else ~/.cache)."""
    return cache_root("microbench-sim")


def compiled_program(module: str, arch: str) -> Path:
    """The program for ``module`` compiled for ``arch`` (cached by text + arch)."""
    text = program_source(module)
    digest = hashlib.sha256(f"{arch}\n{text}".encode()).hexdigest()[:16]
    folder = cache_dir() / f"{module}-{arch}-{digest}"
    prog = folder / "prog"
    if prog.is_file():
        return prog
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "prog.cu"
    src.write_text(text)
    return compile_cuda([src], prog, arch=arch, extra_flags=("-O3", "--std=c++14"))


def card_arch(card: Any) -> str:
    """``sm_NN`` from the card's ``-gpgpu_compute_capability_major/minor``."""
    major = card.option("-gpgpu_compute_capability_major", "7")
    minor = card.option("-gpgpu_compute_capability_minor", "0")
    return f"sm_{int(float(major))}{int(float(minor))}"


# --- plans ---------------------------------------------------------------------------


def _arg(kind: str, value: Any) -> str:
    if kind == "buf":
        return f"buf:{value}"
    if kind == "f32":
        return f"f32:{struct.unpack('<I', struct.pack('<f', float(value)))[0]}"
    if kind == "f64":
        return f"f64:{struct.unpack('<Q', struct.pack('<d', float(value)))[0]}"
    if kind in ("i32", "u32", "i64", "u64"):
        return f"{kind}:{int(value)}"
    raise HilsimError(f"plan: unknown argument type {kind!r}")


def render_plan(program: Program) -> tuple[list[str], dict[str, bytes]]:
    """The plan text of ``program`` (one command per line, ``gpgpusim_host.cu``'s format)
    and the input files it names. Every launch is synchronized by the driver, so a
    ``sync`` step needs no line; a ``host`` step cannot run inside a simulated program."""
    lines: list[str] = []
    files: dict[str, bytes] = {}

    def input_file(payload: bytes) -> str:
        name = f"in_{len(files)}.bin"
        files[name] = payload
        return name

    for step in program.steps:
        if isinstance(step, Alloc):
            lines.append(f"buf {step.name} {step.nbytes}")
        elif isinstance(step, Upload | Iota):
            values = step.values if isinstance(step, Upload) else step.values()
            lines.append(f"buf {step.name} {values.nbytes}")
            lines.append(f"u32s {step.name} {input_file(values.tobytes())}")
        elif isinstance(step, Chain):
            lines.append(f"buf {step.name} {step.nbytes}")
            lines.append(f"chain {step.name} {step.stride} {input_file(step.next.tobytes())}")
        elif isinstance(step, Fill32):
            lines.append(f"fill32 {step.name} {step.value}")
        elif isinstance(step, Launch):
            parts = ["launch", step.kernel, *map(str, step.grid), *map(str, step.block)]
            parts += [str(step.smem), *(_arg(kind, value) for kind, value in step.args)]
            lines.append(" ".join(parts))
        elif isinstance(step, Read):
            lines.append(f"dump {step.name} out_{step.name}.bin")
        elif isinstance(step, Host):
            raise HilsimError(f"{program.module}: a host step cannot run in a simulated program")
        elif not isinstance(step, Sync):
            raise HilsimError(f"{program.module}: unknown program step {step!r}")
    return lines, files


@dataclass
class PlanResult:
    """A finished plan: buffers read back and the simulator's per-launch cycles (a
    :class:`~hilsim.microbench.program.ProgramResult`)."""

    dumps: dict[str, bytes]
    kernel_cycles: list[float]
    total_cycles: float
    wall_s: float
    log_path: Path
    uploads: dict[str, bytes] = field(default_factory=dict)
    ms: dict[int, float] = field(default_factory=dict)
    batch: dict[int, int] = field(default_factory=dict)
    roundtrip_ns: dict[int, int] = field(default_factory=dict)
    host: list[Any] = field(default_factory=list)

    def array(self, name: str, dtype: Any) -> np.ndarray:
        """A dumped buffer as a numpy array."""
        return np.frombuffer(self.dumps[name], dtype=dtype)

    def buffer(self, name: str, dtype: Any) -> np.ndarray:
        """A dumped buffer, or an input buffer that was not dumped: its uploaded data."""
        if name in self.dumps:
            return self.array(name, dtype)
        return np.frombuffer(self.uploads[name], dtype=dtype)

    def address(self, name: str) -> int | None:
        """Unknown: the driver does not report buffer addresses."""
        return None

    @property
    def xp(self) -> Any:
        """numpy (what was read back)."""
        return np


def _uploads(program: Program) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for step in program.steps:
        if isinstance(step, Upload):
            out[step.name] = step.values.tobytes()
        elif isinstance(step, Iota):
            out[step.name] = step.values().tobytes()
    return out


def run_plan(
    plan: Program,
    card: Any,
    *,
    options: Mapping[str, Any] | None = None,
    build: Any = None,
    keep_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 1800,
) -> PlanResult:
    """Compile (cached) and run ``plan`` on the simulated ``card`` with ``options``.

    Returns the dumped buffers and the simulated cycles of every launch (from the
    simulator's statistics in the log). The run folder is temporary unless
    ``keep_dir`` is given. A simulator failure is one :class:`HilsimError` line.
    """
    lines, files = render_plan(plan)
    cfg = card.with_options(options)
    prog = compiled_program(plan.module, card_arch(cfg))
    tmp = None
    if keep_dir is not None:
        run_dir = Path(keep_dir)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
    else:
        tmp = tempfile.mkdtemp(prefix="hilsim-sim-")
        run_dir = Path(tmp)
    try:
        for fname, payload in files.items():
            (run_dir / fname).write_bytes(payload)
        (run_dir / "plan.txt").write_text("\n".join(lines) + "\n")
        run = run_program([prog, "plan.txt"], cfg, run_dir, timeout_s=timeout_s, build=build)
        if "HILSIM_DONE" not in run.stdout:
            raise HilsimError(
                f"{plan.module} on {cfg.name}: plan did not finish: log {run.log_path}"
            )
        dumps = {name: (run_dir / f"out_{name}.bin").read_bytes() for name in plan.reads}
        cycles: list[float] = []
        total = 0.0
        if plan.launches:
            stats = parse_simlog(run.stdout, str(run.log_path), counters="per-kernel")
            if len(stats) != len(plan.launches):
                raise HilsimError(
                    f"{plan.module} on {cfg.name}: {len(plan.launches)} launches but "
                    f"{len(stats)} kernel statistics blocks: log {run.log_path}"
                )
            cycles = [float(c) for c in stats["cycles"]]
            total = float(stats["tot_cycles"].iloc[-1]) if "tot_cycles" in stats else sum(cycles)
        if total >= _CLOCK_LIMIT:
            raise HilsimError(
                f"{plan.module} on {cfg.name}: {total:.0f} simulated cycles reach 2^32: "
                f"%clock wrapped: log {run.log_path}"
            )
        log_path = run.log_path
        if tmp is not None:  # keep only the log when the folder is temporary
            kept = cache_dir() / "last-logs"
            kept.mkdir(parents=True, exist_ok=True)
            log_path = kept / f"{plan.module}.{cfg.name}.log"
            shutil.copyfile(run.log_path, log_path)
    except BaseException:
        tmp = None  # a failed run keeps its folder: the error names its log
        raise
    else:
        return PlanResult(dumps, cycles, total, run.wall_s, log_path, _uploads(plan))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
