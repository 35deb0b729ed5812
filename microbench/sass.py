"""Compile the suite's CUDA sources as CuPy does and read the machine code (no GPU needed).

CuPy's ``RawModule`` compiles with NVRTC straight to a cubin: the options the suite passes
(:data:`hilsim.microbench.gpu.NVRTC_OPTIONS`) plus the ones CuPy adds,
``-ftz=true``, ``-arch=sm_XX`` and ``--device-as-default-execution-space``
(``cupy/cuda/compiler.py``: ``_compile_with_cache_cuda``, ``_get_arch_for_options_for_nvrtc``;
the ``--pch`` it adds on NVRTC >= 12.8 only caches headers). :func:`compile_cubin` does the
same through the NVRTC shared library (``ctypes``; CuPy's own ``nvrtc.getCUBIN`` drops the
cubin's last byte, which disassemblers reject as a truncated ELF).

:func:`disassemble` runs ``nvdisasm -hex`` and decodes each instruction's control bits
(Volta and later: 128-bit instructions, the scheduling control in the upper 64 bits; Jia
et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018,
Section 2.3): stall cycles bits 41-44, yield bit 45, write barrier bits 46-48 (7 = none),
read barrier bits 49-51, wait mask bits 52-57, register reuse bits 58-61.
:func:`resource_usage` reads registers and static shared memory per kernel from the
cubin's ELF (``.nv.info`` attribute ``EIATTR_REGCOUNT``, ``.nv.shared.<kernel>``).

Tools: NVRTC from ``nvidia-cuda-nvrtc-cu12`` (12.x compiles sm_70 ... sm_90), nvdisasm
from ``nvidia-cuda-nvdisasm`` (13.x: sm_75 and newer) or a CUDA toolkit <= 12
(``$HILSIM_NVDISASM``, ``$CUDA_HOME/bin``, ``/usr/local/cuda/bin``, ``/usr/bin``, PATH),
which sm_70 needs: CUDA 13 dropped Volta (``.ci/sass-tools`` finds or fetches one).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hilsim.microbench.gpu import NVRTC_OPTIONS

from hilsim.core.errors import HilsimError

TARGETS = (70, 75, 86, 90)

_NO_BARRIER = 7
#: opcodes without a register or predicate destination
_NO_DESTINATION = frozenset({
    "ST", "STG", "STS", "STL", "RED", "REDG", "BRA", "BRX", "JMP", "EXIT", "BAR", "CALL", "RET",
    "BSSY", "BSYNC", "NOP", "MEMBAR", "WARPSYNC", "YIELD", "ERRBAR", "DEPBAR", "CCTL", "BREAK",
})
_FP64 = frozenset({"DFMA", "DADD", "DMUL", "DSETP", "DMNMX"})
_MEMORY = frozenset({"LDG", "LDS", "LD", "LDL", "LDC", "STG", "STS", "ST", "STL", "ATOMG", "ATOMS",
                     "ATOM", "RED", "REDG"})
_PREDICATE = re.compile(r"!?U?P(?:T|\d)")
_NAME = re.compile(r"(?<![\w.])(U?R\d+|U?P\d)\b")


def _names(operand: str) -> list[str]:
    return _NAME.findall(operand)


def _access_width(op: str) -> int:
    return 4 if ".128" in op else 2 if ".64" in op else 1


def _expand(names: list[str], width: int) -> list[str]:
    """``R4`` of a 64-bit (``width`` 2) or 128-bit (4) value: ``R4, R5(, R6, R7)``."""
    out = []
    for name in names:
        m = re.fullmatch(r"(U?R)(\d+)", name)
        if m and width > 1:
            out += [f"{m.group(1)}{int(m.group(2)) + i}" for i in range(width)]
        else:
            out.append(name)
    return out


def cupy_options(arch: int) -> list[str]:
    """The NVRTC options CuPy's ``RawModule`` compiles the suite's sources with."""
    return [*NVRTC_OPTIONS, "-ftz=true", f"-arch=sm_{arch}", "--device-as-default-execution-space"]


def _site_dirs() -> list[Path]:
    try:
        import nvidia  # noqa: PLC0415  (namespace package of NVIDIA's PyPI wheels)
    except ImportError:
        return []
    return [Path(p) for p in nvidia.__path__]


@functools.lru_cache(maxsize=1)
def _nvrtc() -> ctypes.CDLL:
    candidates = [os.environ.get("HILSIM_NVRTC", "")]
    for base in _site_dirs():
        candidates += [str(p) for p in sorted(base.glob("cuda_nvrtc/lib/libnvrtc.so.*"))]
        candidates += [str(p) for p in sorted(base.glob("cu1*/lib/libnvrtc.so.*"))]
    found = ctypes.util.find_library("nvrtc")
    candidates.append(found or "")
    for path in candidates:
        if not path or "builtins" in path or ".alt." in path:
            continue
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise HilsimError("NVRTC not found: pip install 'hilsim[sass]' (nvidia-cuda-nvrtc-cu12)")


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use."""
    lib = _nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def compile_cubin(source: str, arch: int, name: str = "kernel.cu") -> bytes:
    """The cubin NVRTC produces for ``source`` with CuPy's options for ``sm_{arch}``."""
    return nvrtc_compile(source, cupy_options(arch), name, "CUBIN")


def compile_ptx(source: str, arch: int, name: str = "kernel.cu") -> str:
    """PTX for ``compute_{arch}`` (the suite's options, ``-arch=compute_XX``)."""
    opts = [*NVRTC_OPTIONS, f"-arch=compute_{arch}"]
    return nvrtc_compile(source, opts, name, "PTX").rstrip(b"\0").decode()


def nvrtc_compile(source: str, options: list[str], name: str, output: str) -> bytes:
    """Run NVRTC; ``output`` is ``"CUBIN"`` or ``"PTX"``. One-line ``HilsimError`` on failure."""
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
    if rc:
        raise HilsimError(f"NVRTC: creating {name} failed (code {rc})")
    try:
        opts = [o.encode() for o in options]
        rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        if rc:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise HilsimError(
                f"NVRTC: {name} ({' '.join(options)}) failed: "
                + log.value.decode(errors="replace").strip().replace("\n", " | ")
            )
        size = ctypes.c_size_t()
        getattr(lib, f"nvrtcGet{output}Size")(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        getattr(lib, f"nvrtcGet{output}")(prog, buf)
        return buf.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@functools.cache
def _tool_version(path: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except OSError:
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _nvdisasm_candidates() -> list[str]:
    out = []
    for base in _site_dirs():  # the sass extra's wheel first (sm_75+), then any toolkit
        out += [str(p) for p in sorted(base.glob("*/bin/nvdisasm"))]
    out.append(os.environ.get("HILSIM_NVDISASM", ""))
    for home in (os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""),
                 "/usr/local/cuda", "/usr"):
        if home:
            out.append(str(Path(home) / "bin" / "nvdisasm"))
    out.append(shutil.which("nvdisasm") or "")
    seen: list[str] = []
    for path in out:
        if path and os.access(path, os.X_OK) and path not in seen:
            seen.append(path)
    return seen


def find_nvdisasm(arch: int) -> str | None:
    """An nvdisasm that knows ``sm_{arch}`` (CUDA 13 dropped sm_70/72), or None."""
    for path in _nvdisasm_candidates():
        version = _tool_version(path)
        if version is None:
            continue
        if arch < 75 and version[0] >= 13:
            continue
        if arch >= 90 and version < (11, 8):
            continue
        return path
    return None


@dataclass(frozen=True)
class Instr:
    """One decoded SASS instruction."""

    addr: int
    pred: str
    op: str  # opcode with modifiers, e.g. "LDG.E.64.STRONG.SM"
    operands: tuple[str, ...]
    lo: int
    hi: int

    @property
    def base(self) -> str:
        """Opcode without modifiers (``LDG``)."""
        return self.op.split(".")[0]

    @property
    def stall(self) -> int:
        """Stall cycles before the next instruction issues (bits 41-44)."""
        return (self.hi >> 41) & 0xF

    @property
    def yield_flag(self) -> int:
        """Yield hint (bit 45)."""
        return (self.hi >> 45) & 1

    @property
    def write_barrier(self) -> int | None:
        """Scoreboard set when the result is written (bits 46-48), None for 7."""
        b = (self.hi >> 46) & 7
        return None if b == _NO_BARRIER else b

    @property
    def read_barrier(self) -> int | None:
        """Scoreboard set when the sources are read (bits 49-51), None for 7."""
        b = (self.hi >> 49) & 7
        return None if b == _NO_BARRIER else b

    @property
    def wait_mask(self) -> frozenset[int]:
        """Scoreboards this instruction waits on (bits 52-57)."""
        mask = (self.hi >> 52) & 0x3F
        return frozenset(i for i in range(6) if mask >> i & 1)

    @property
    def text(self) -> str:
        """The instruction as nvdisasm prints it."""
        pred = f"{self.pred} " if self.pred else ""
        return f"{pred}{self.op} {', '.join(self.operands)}".strip()

    def regs(self, which: str = "all") -> list[str]:
        """General registers named by the operands (``dst``: first operand, ``src``: others)."""
        ops = self.operands
        if which == "dst":
            ops = ops[:1]
        elif which == "src":
            ops = ops[1:]
        return [m for o in ops for m in re.findall(r"\bR\d+\b", o)]

    def writes(self) -> list[str]:
        """Registers and predicates the instruction writes (64/128-bit results expanded to
        their register pairs/quads; ``PT``/``RZ`` left out): the operands of
        :meth:`writes_operands`."""
        out: list[str] = []
        for k, operand in enumerate(self.writes_operands()):
            out += _expand(_names(operand), self._dst_width() if k == 0 else 1)
        return out

    def reads(self) -> list[str]:
        """Registers and predicates the instruction reads: its sources, its guard
        predicate, and (under a guard) its own destinations, which keep their value when
        the guard is false."""
        skip = 0 if self.base in _NO_DESTINATION else len(self.writes_operands())
        out: list[str] = []
        sources = self.operands[skip:]
        for k, operand in enumerate(sources):
            width = self._src_width(k, len(sources), operand)
            out += _expand(_names(operand), width)
        if self.pred:
            out += _names(self.pred)
            out += self.writes()
        return out

    def writes_operands(self) -> tuple[str, ...]:
        """The destination operands: the first, followed by any predicate outputs
        (``IADD3 R1, P0, ...`` carry, ``ISETP P0, PT, ...``); ``SHFL`` writes its predicate
        and its register; stores, branches and barriers write nothing."""
        if self.base in _NO_DESTINATION or not self.operands:
            return ()
        count = 2 if self.base == "SHFL" else 1
        while count < len(self.operands) and _PREDICATE.fullmatch(self.operands[count]):
            count += 1
        return self.operands[:count]

    def _dst_width(self) -> int:
        if self.base in _FP64 or ".WIDE" in self.op:
            return 2
        return _access_width(self.op) if self.base in _MEMORY else 1

    def _src_width(self, k: int, n: int, operand: str) -> int:
        if self.base in _FP64:
            return 2
        if ".WIDE" in self.op and k == n - 1:
            return 2
        if self.base in _MEMORY and "[" in operand:
            return 2 if ".64]" in operand or "64" in operand.split("]")[0] else 1
        if self.base in _MEMORY:
            return _access_width(self.op)
        return 1

    def immediate(self) -> int | None:
        """The last hexadecimal immediate operand as a signed 32-bit integer, or None."""
        for operand in reversed(self.operands):
            m = re.fullmatch(r"(-?)0x([0-9a-f]+)", operand)
            if m:
                value = int(m.group(2), 16)
                value = value - (1 << 32) if value >= 1 << 31 else value
                return -value if m.group(1) else value
        return None

    def address_reg(self) -> str | None:
        """The base register of the memory operand (``[R4.64]``, ``desc[UR4][R4.64+0x8]``)."""
        for o in self.operands:
            m = re.search(r"\[(R\d+)(?:\.64|\.U32|\.X4|\.X8|\.X16)?(?:\+[^\]]*)?\]\s*$", o)
            if m:
                return m.group(1)
        return None

    def branch_target(self) -> str | None:
        """The label a ``BRA`` jumps to."""
        if self.base != "BRA":
            return None
        m = re.search(r"\(?(\.L_\w+)\)?", " ".join(self.operands))
        return m.group(1) if m else None


@dataclass
class Kernel:
    """One kernel's decoded instructions and labels."""

    name: str
    instrs: list[Instr]
    labels: dict[str, int]  # label -> address

    def index_of(self, addr: int) -> int:
        """Position of the instruction at ``addr``."""
        for i, ins in enumerate(self.instrs):
            if ins.addr == addr:
                return i
        raise KeyError(addr)


_INS = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\*\s*0x([0-9a-f]{16})\s*\*/")
_HI = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
_LABEL = re.compile(r"^(\.L_\w+|[A-Za-z_]\w*):\s*$")
_SECTION = re.compile(r"\.section\s+\.text\.(\w+),")


def _split_operands(text: str) -> tuple[str, ...]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return tuple(p.strip("` ") for p in parts)


def parse_nvdisasm(text: str) -> dict[str, Kernel]:
    """Kernels of ``nvdisasm -hex -c`` output, instructions decoded."""
    kernels: dict[str, Kernel] = {}
    current: Kernel | None = None
    pending_labels: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        sec = _SECTION.search(line)
        if sec:
            current = Kernel(sec.group(1), [], {})
            kernels[current.name] = current
            pending_labels = []
        elif current is not None and (lab := _LABEL.match(line.strip())):
            pending_labels.append(lab.group(1))
        elif current is not None and (m := _INS.search(line)):
            hi_m = _HI.match(lines[i + 1]) if i + 1 < len(lines) else None
            if hi_m is None:
                raise HilsimError(f"nvdisasm output: no control word after {line.strip()!r}")
            i += 1
            body = m.group(2).strip()
            pred = ""
            pm = re.match(r"^(@!?U?P(?:T|\d+))\s+(.*)$", body)
            if pm:
                pred, body = pm.group(1), pm.group(2)
            op, _, rest = body.partition(" ")
            addr = int(m.group(1), 16)
            for lab in pending_labels:
                current.labels[lab] = addr
            pending_labels = []
            current.instrs.append(
                Instr(addr, pred, op, _split_operands(rest), int(m.group(3), 16),
                      int(hi_m.group(1), 16))
            )
        i += 1
    return kernels


def disassemble(cubin: bytes, arch: int) -> dict[str, Kernel]:
    """Decoded SASS of every kernel in ``cubin`` (``HilsimError`` without a usable nvdisasm)."""
    tool = find_nvdisasm(arch)
    if tool is None:
        raise HilsimError(
            f"no nvdisasm for sm_{arch}: pip install 'hilsim[sass]' (nvidia-cuda-nvdisasm); "
            "sm_70 needs a CUDA toolkit <= 12 (set HILSIM_NVDISASM)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"k.sm_{arch}.cubin"
        path.write_bytes(cubin)
        res = subprocess.run(
            [tool, "-hex", "-c", str(path)], capture_output=True, text=True, timeout=120,
            check=False,
        )
    if res.returncode != 0:
        raise HilsimError(f"{tool} failed on sm_{arch}: {res.stderr.strip().splitlines()[-1]}")
    return parse_nvdisasm(res.stdout)


@dataclass(frozen=True)
class Resources:
    """Per-kernel resources from the cubin."""

    registers: int
    static_shared_bytes: int


def resource_usage(cubin: bytes) -> dict[str, Resources]:
    """Registers per thread and static shared memory of every kernel in an ELF cubin."""
    if cubin[:4] != b"\x7fELF":
        raise HilsimError("not an ELF cubin")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def cstr(off: int) -> str:
        return cubin[off : cubin.index(b"\0", off)].decode()

    names = [cstr(secs[shstrndx][4] + s[0]) for s in secs]
    by_name = dict(zip(names, secs, strict=True))
    symtab, strtab = by_name[".symtab"], by_name[".strtab"]
    symbols = []
    for j in range(symtab[5] // 24):
        st_name = struct.unpack_from("<I", cubin, symtab[4] + 24 * j)[0]
        symbols.append(cstr(strtab[4] + st_name))
    regs: dict[str, int] = {}
    info = by_name.get(".nv.info")
    if info is not None:
        pos, end = info[4], info[4] + info[5]
        while pos < end:
            fmt, attr = cubin[pos], cubin[pos + 1]
            if fmt == 4:  # EIFMT_SVAL: u16 size, payload
                size = struct.unpack_from("<H", cubin, pos + 2)[0]
                if attr == 0x2F:  # EIATTR_REGCOUNT: (symbol index, count)
                    sym, count = struct.unpack_from("<II", cubin, pos + 4)
                    regs[symbols[sym]] = count
                pos += 4 + size
            else:
                pos += 4
    out = {}
    for name in names:
        if name.startswith(".text."):
            kernel = name[len(".text."):]
            shared = by_name.get(f".nv.shared.{kernel}")
            out[kernel] = Resources(regs.get(kernel, 0), int(shared[5]) if shared else 0)
    return out


def blocks_per_sm(
    registers: int,
    threads_per_block: int,
    shared_bytes: int,
    *,
    regs_per_sm: int,
    max_threads_per_sm: int,
    shared_per_sm: int,
    max_blocks_per_sm: int,
) -> int:
    """Resident blocks per SM (CUDA occupancy calculator: registers per warp rounded up to
    256, warps per block; CUDA C Programming Guide, "Occupancy Calculator")."""
    warps = -(-threads_per_block // 32)
    regs_per_warp = -(-max(registers, 1) * 32 // 256) * 256
    by_regs = regs_per_sm // (regs_per_warp * warps)
    by_threads = max_threads_per_sm // (warps * 32)
    by_shared = shared_per_sm // shared_bytes if shared_bytes else max_blocks_per_sm
    return max(0, min(by_regs, by_threads, by_shared, max_blocks_per_sm))


@dataclass(frozen=True)
class ChainReport:
    """The loop-carried dependence chains of one loop body (:func:`loop_chains`)."""

    #: marker instructions in the body (the operation whose latency is measured)
    markers: int
    #: most markers on one loop-carried dependence path through the body
    depth: int
    #: loop-carried registers whose value passes through a marker
    chains: int
    #: markers that read no loop-carried value (hoistable, or an operation beside the chain)
    off_chain: tuple[Instr, ...]
    #: every instruction on a loop-carried path through a marker
    chain_ops: tuple[Instr, ...]


def _chain_pass(
    body: list[Instr],
    start: set[str],
    is_marker: Callable[[Instr], bool],
    labels: Mapping[str, int],
) -> tuple[dict[str, int], list[Instr], list[Instr]]:
    depth = dict.fromkeys(start, 0)
    off_chain: list[Instr] = []
    on_chain: list[Instr] = []
    skipped_until = -1  # instructions a guarded forward branch may jump over
    for ins in body:
        conditional = bool(ins.pred) or ins.addr < skipped_until
        target = ins.branch_target()
        if target is not None and ins.pred and labels.get(target, -1) > ins.addr:
            skipped_until = max(skipped_until, labels[target])
        reads = [r for r in ins.reads() if r in depth]
        marker = int(is_marker(ins))
        writes = ins.writes()
        if not reads:
            if marker:
                off_chain.append(ins)
            if not conditional:
                for w in writes:
                    depth.pop(w, None)
            continue
        on_chain.append(ins)
        out = max(depth[r] for r in reads) + marker
        for w in writes:
            depth[w] = max(out, depth.get(w, 0)) if conditional else out
    return depth, off_chain, on_chain


def loop_chains(
    body: list[Instr],
    is_marker: Callable[[Instr], bool],
    labels: Mapping[str, int] | None = None,
) -> ChainReport:
    """Follow the values a loop carries from one iteration to the next through ``body``
    (instructions in program order). Code a guarded forward branch may skip (``labels``:
    the kernel's label addresses), like a guarded instruction, merges its results with
    the values it would leave unchanged (the deeper dependence path of the two wins).

    The loop-carried values are the registers read before they are written in the body
    and written in it; those that pass through a marker are the chains (the loop counter
    is not one). A latency kernel's body is one chain (``depth == markers``); an
    initiation kernel's is ``K`` chains of ``markers / K`` each (the dependence structure
    Jia et al. 2018, Section 2.3, read through the control bits' scoreboards)."""
    labels = labels or {}
    written: set[str] = set()
    carried: set[str] = set()
    for ins in body:
        carried |= {r for r in ins.reads() if r not in written}
        written |= set(ins.writes())
    carried &= written
    first, _, _ = _chain_pass(body, carried, is_marker, labels)
    chains = {r for r in carried if first.get(r, 0) > 0}
    depth, off_chain, on_chain = _chain_pass(body, chains, is_marker, labels)
    # the upper halves of 64-bit values (R3 of an R2:R3 pair) are not chains of their own
    named = {n for ins in body for o in ins.writes_operands() for n in _names(o)}
    tails = {r for ins in body for r in ins.writes()} - named
    return ChainReport(
        markers=sum(bool(is_marker(i)) for i in body),
        depth=max([depth.get(r, 0) for r in chains], default=0),
        chains=len(chains - tails),
        off_chain=tuple(off_chain),
        chain_ops=tuple(on_chain),
    )


def counter_step(body: list[Instr]) -> int | None:
    """The step of a loop's counter: the one ``IADD3``/``VIADD``/``UIADD3`` in ``body``
    that adds an immediate to its own source register (None when there is none or more
    than one)."""
    steps = []
    for ins in body:
        if ins.base not in ("IADD3", "VIADD", "UIADD3") and not ins.op.startswith("IMAD.IADD"):
            continue
        dst = ins.operands[0] if ins.operands else ""
        if dst in ins.operands[1:] or any(o.startswith(dst + ".") for o in ins.operands[1:]):
            value = ins.immediate()
            if value is not None:
                steps.append(abs(value))
    return steps[0] if len(steps) == 1 else None


@dataclass(frozen=True)
class ScoreboardWait:
    """An instruction of a loop body waiting on a scoreboard, and that scoreboard's last
    setter before it (the loop wrapped around): ``cycles`` is the static issue distance
    between them (the setter's and every later instruction's stall counts)."""

    setter: Instr
    waiter: Instr
    scoreboard: int
    cycles: int


def scoreboard_waits(body: list[Instr]) -> list[ScoreboardWait]:
    """Every wait of a loop body on a scoreboard a write barrier set, with the wait-to-setter
    distance (Jia et al. 2018, Section 2.3: a variable-latency instruction sets a write
    barrier when it issues and clears it when its result is written; an instruction that
    waits on it issues no earlier). A result the unit returns later than the distance
    stalls the warp for the difference."""
    out = []
    n = len(body)
    for j, ins in enumerate(body):
        for board in sorted(ins.wait_mask):
            cycles = 0
            for back in range(1, n + 1):
                setter = body[(j - back) % n]
                cycles += setter.stall
                if setter.write_barrier == board:
                    out.append(ScoreboardWait(setter, ins, board, cycles))
                    break
    return out


def issue_cycles(
    body: list[Instr],
    is_unit: Callable[[Instr], bool],
    latency: int,
    warps: int,
    iterations: int,
    interval: int | None = None,
) -> int:
    """Cycles for ``warps`` warps on one scheduler to run ``iterations`` passes of a loop
    body, replayed from its control bits: an instruction issues no sooner than its
    predecessor's stall count, than every scoreboard it waits on clears, and, when it is
    a unit instruction (``is_unit``), than the unit's ``interval`` (default: the unit
    instructions' largest stall count, ptxas's own spacing) after the unit's last issue;
    one instruction per cycle, the last warp to issue again first, else the oldest ready
    (greedy-then-oldest, the policy least kind to a latency-bound warp). A write barrier
    clears ``latency`` cycles after its setter issues, a read barrier 2. A model of the
    issue, not of the machine: the SASS tier compares the same kernel at two latencies."""
    stream = body * iterations
    if interval is None:
        interval = max((i.stall for i in body if is_unit(i)), default=1)
    pc = [0] * warps
    ready = [0] * warps
    boards = [[0] * 6 for _ in range(warps)]
    unit_free = now = end = 0
    last = -1
    while True:
        best: tuple[tuple[int, bool, int], int] | None = None
        for w in range(warps):
            if pc[w] >= len(stream):
                continue
            ins = stream[pc[w]]
            start = max([now, ready[w], *(boards[w][b] for b in ins.wait_mask)])
            if is_unit(ins):
                start = max(start, unit_free)
            key = (start, w != last, w)
            if best is None or key < best[0]:
                best = (key, w)
        if best is None:
            return end
        (now, _, w) = best[0]
        ins = stream[pc[w]]
        ready[w] = now + max(1, ins.stall)
        if ins.write_barrier is not None:
            boards[w][ins.write_barrier] = max(boards[w][ins.write_barrier], now + latency)
        if ins.read_barrier is not None:
            boards[w][ins.read_barrier] = max(boards[w][ins.read_barrier], now + 2)
        if is_unit(ins):
            unit_free = now + interval
        pc[w] += 1
        last = w
        end = max(end, ready[w])
        now += 1


def issue_cycles_per_op(
    body: list[Instr], is_unit: Callable[[Instr], bool], latency: int, warps: int
) -> float:
    """Cycles per unit instruction of :func:`issue_cycles`, as the suite reads a probe: the
    slope between 2 and 4 passes of the body (what one launch pays once cancels)."""
    ops = sum(bool(is_unit(i)) for i in body) * warps
    short, long_ = (issue_cycles(body, is_unit, latency, warps, k) for k in (2, 4))
    return (long_ - short) / (2 * ops) if ops else math.nan
