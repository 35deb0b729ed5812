"""The SASS tier: every CUDA source of the suite, compiled as CuPy compiles it (NVRTC,
``-arch=sm_XX``, CuPy's options) for sm_70/75/86/90, disassembled and checked against a
per-kernel table of what the measurement needs (control bits decoded as in Jia et al.
2018, Section 2.3).

Needs the ``sass`` extra (``pip install -e '.[test,sass]'``: NVRTC 12 and nvdisasm) and,
for sm_70, an nvdisasm from a CUDA toolkit <= 12 (CUDA 13 dropped Volta). Without them
the tests skip, unless ``HILSIM_REQUIRE_SASS=1`` (set by ``.ci/run``), where a missing
tool is a failure.
"""

from __future__ import annotations

import functools
import os
import re

import pytest
from hilsim.microbench import sass
from hilsim.microbench.sources import all_sources, kernel_names
from hilsim.simmodel.presets import all_presets

from hilsim.core.errors import HilsimError

REQUIRE = os.environ.get("HILSIM_REQUIRE_SASS") == "1"


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"HILSIM_REQUIRE_SASS=1: {reason}")
    pytest.skip(reason)


@functools.cache
def _compiled(source: str, arch: int) -> tuple[bytes, dict[str, sass.Kernel]]:
    cubin = sass.compile_cubin(all_sources()[source], arch, f"{source}.cu")
    return cubin, sass.disassemble(cubin, arch)


def _kernels(source: str, arch: int) -> dict[str, sass.Kernel]:
    try:
        sass.nvrtc_version()
    except HilsimError as exc:
        _unavailable(str(exc))
    if sass.nvrtc_version()[0] >= 13 and arch < 75:
        _unavailable(f"NVRTC {sass.nvrtc_version()} has no sm_{arch}: need nvidia-cuda-nvrtc-cu12")
    if sass.find_nvdisasm(arch) is None:
        _unavailable(f"no nvdisasm for sm_{arch} (sm_70 needs CUDA <= 12: set HILSIM_NVDISASM)")
    return _compiled(source, arch)[1]


def _kernel(source: str, name: str, arch: int) -> sass.Kernel:
    return _kernels(source, arch)[name]


def _clock_reads(k: sass.Kernel) -> list[int]:
    return [i for i, ins in enumerate(k.instrs) if any("SR_CLOCKLO" in o for o in ins.operands)]


def _is_load(ins: sass.Instr) -> bool:
    return ins.base in ("LDG", "LDS", "LD")


def _loops(k: sass.Kernel, lo: int, hi: int) -> list[tuple[int, int]]:
    """(first, last) positions of every backward branch's body inside [lo, hi]."""
    out = []
    for j in range(lo, hi + 1):
        target = k.instrs[j].branch_target()
        if target is None or target not in k.labels:
            continue
        t = k.index_of(k.labels[target])
        if lo <= t <= j:
            out.append((t, j))
    return out


def chain_violations(k: sass.Kernel) -> list[str]:
    """Instructions of a loop in the timed region (between the 2nd and 3rd clock read) that
    wait on a chain load's scoreboard without being a load of the chain (a checksum add
inside the timed loop, as ``sum += p`` once was, adds its latency to every step)."""
    clocks = _clock_reads(k)
    assert len(clocks) == 3, f"{k.name}: expected 3 clock reads, found {len(clocks)}"
    lo, hi = clocks[1] + 1, clocks[2] - 1
    loops = _loops(k, lo, hi)
    assert loops, f"{k.name}: no loop in the timed region"
    chain_regs = {r for i in k.instrs[lo : hi + 1] if _is_load(i) for r in i.regs("dst")}
    bad = []
    for j in range(lo, hi + 1):
        ins = k.instrs[j]
        body = next(((s, e) for s, e in loops if s <= j <= e), None)
        if body is None:  # once per launch (between the unrolled and remainder loops)
            continue
        for b in ins.wait_mask:
            s, e = body  # the previous iteration's setters, wrapping around
            order = list(range(j - 1, s - 1, -1)) + list(range(e, j, -1))
            owner = next((k.instrs[i] for i in order if k.instrs[i].write_barrier == b), None)
            if owner is None or not _is_load(owner):
                continue
            # loads are serial along the chain, so a chain load may wait on any earlier one
            # (scoreboards count: several loads share one); nothing else may
            if not (_is_load(ins) and ins.address_reg() in chain_regs):
                bad.append(f"{ins.addr:04x} {ins.text} waits on {owner.addr:04x} {owner.text}")
    return bad


CHASES = [("latency.chase", "chase_ca"), ("latency.chase", "chase_cg"),
          ("latency.shared_chase", "chase_shared")]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("source", "kernel"), CHASES)
def test_timed_chase_loop_is_a_pure_chain(source: str, kernel: str, arch: int) -> None:
    k = _kernel(source, kernel, arch)
    assert chain_violations(k) == []
    clocks = _clock_reads(k)
    loads = [i for i in k.instrs[clocks[1]:clocks[2]] if _is_load(i)]
    # every chain load's address is a chain load's result: the chain is dependent
    dsts = {r for i in loads for r in i.regs("dst")}
    assert loads and sum(i.address_reg() in dsts for i in loads) >= len(loads) - 2


def test_chain_check_flags_an_accumulating_chase() -> None:
    """The check fails on the pre-fix kernel (``sum += p`` inside the timed loop)."""
    old = all_sources()["latency.chase"].replace(
        'asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n    }\n    long long t2',
        'asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n        sum += p;\n    }\n'
        "    long long t2",
    )
    assert old != all_sources()["latency.chase"]
    _kernels("latency.chase", 90)
    k = sass.disassemble(sass.compile_cubin(old, 90), 90)["chase_ca"]
    assert chain_violations(k)


_GPU_ADD = r"\.ADD.*\.STRONG\.GPU"  # device-scope atomic add

# the cache operator each measured level needs (each checked against the SASS by hand once)
CACHE_OPS = [
    ("latency.chase", "chase_ca", "LDG", {70: r"\.STRONG\.CTA", 75: r"\.STRONG\.CTA",
                                          86: r"\.STRONG\.SM", 90: r"\.STRONG\.SM"}),
    ("latency.chase", "chase_cg", "LDG", dict.fromkeys(sass.TARGETS, r"\.STRONG\.GPU")),
    ("bandwidth.grid", "grid_read_cg", "LDG", dict.fromkeys(sass.TARGETS, r"\.128\.STRONG\.GPU")),
    ("bandwidth.onchip", "l1_read", "LDG", {70: r"\.128\.STRONG\.CTA", 75: r"\.128\.STRONG\.CTA",
                                            86: r"\.128\.STRONG\.SM", 90: r"\.128\.STRONG\.SM"}),
    ("bandwidth.onchip", "shared_read", "LDS", dict.fromkeys(sass.TARGETS, r"\.128")),
    ("atomics.atomic", "atomic_lat", "ATOMG", dict.fromkeys(sass.TARGETS, _GPU_ADD)),
    ("atomics.atomic", "atomic_tput", "REDG?", dict.fromkeys(sass.TARGETS, _GPU_ADD)),
]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("source", "kernel", "base", "modifier"), CACHE_OPS,
                         ids=[c[1] for c in CACHE_OPS])
def test_cache_operator_and_scope(source, kernel, base, modifier, arch) -> None:
    k = _kernel(source, kernel, arch)
    ops = [i.op for i in k.instrs if re.fullmatch(base, i.base)]
    assert ops, f"{kernel} sm_{arch}: no {base}"
    timed = ops[-1:] if base == "LDG" and kernel.startswith("chase") else ops
    assert all(re.search(modifier[arch], op) for op in timed), (kernel, arch, sorted(set(ops)))


HMMA = {70: "HMMA.884.F32.F32", 75: "HMMA.1688.F32", 86: "HMMA.16816.F32", 90: "HMMA.16816.F32"}


@pytest.mark.parametrize("arch", sass.TARGETS)
def test_hmma_shape_per_arch(arch: int) -> None:
    for kernel in ("mma_tput", "mma_lat"):
        ops = {i.op for i in _kernel("compute.mma", kernel, arch).instrs if i.base == "HMMA"}
        assert ops and all(op.startswith(HMMA[arch]) for op in ops), (kernel, arch, ops)


def _timed(k: sass.Kernel) -> list[sass.Instr]:
    clocks = _clock_reads(k)
    return k.instrs[clocks[-2] + 1 : clocks[-1]]


def _loop_body(k: sass.Kernel) -> list[sass.Instr]:
    """The innermost largest loop in the timed region."""
    clocks = _clock_reads(k)
    loops = _loops(k, clocks[-2] + 1, clocks[-1] - 1)
    assert loops, f"{k.name}: no loop between the clock reads"
    s, e = max(loops, key=lambda se: se[1] - se[0])
    return k.instrs[s : e + 1]


# timed loops: (source, kernel, opcode regex, instructions per loop iteration)
WORK = [
    ("compute.arith", "tput_fp32", r"^FFMA", 128),
    ("compute.arith", "tput_fp64", r"^DFMA", 128),
    ("compute.arith", "tput_fp16x2", r"^HFMA2", 128),
    ("compute.arith", "tput_int32", r"^IMAD(?!\.MOV)", 128),
    ("compute.arith", "lat_fp32", r"^FFMA", 64),
    ("compute.arith", "lat_fp64", r"^DFMA", 64),
    ("compute.arith", "lat_fp16x2", r"^HFMA2", 64),
    ("compute.arith", "lat_int32", r"^IMAD(?!\.MOV)", 64),
]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("source", "kernel", "pattern", "count"), WORK, ids=[w[1] for w in WORK])
def test_no_work_eliminated(source, kernel, pattern, count, arch) -> None:
    body = _loop_body(_kernel(source, kernel, arch))
    n = sum(bool(re.match(pattern, i.op)) for i in body)
    assert n >= count, (kernel, arch, n)


@pytest.mark.parametrize("arch", sass.TARGETS)
def test_mma_loop_keeps_every_mma(arch: int) -> None:
    # 16 mma per iteration; sm_70's m8n8k4 is 4 HMMA.884 steps, sm_75's m16n8k8 1 HMMA.1688,
    # sm_80+'s m16n8k16 1 HMMA.16816
    per_mma = 4 if arch == 70 else 1
    body = _loop_body(_kernel("compute.mma", "mma_tput", arch))
    assert sum(i.base == "HMMA" for i in body) >= 16 * per_mma


# kernels whose timed region starts after a block barrier (all warps start together)
BARRIER_TIMED = [("compute.arith", f"tput_{t}") for t in ("fp32", "fp64", "fp16x2", "int32")] + [
    ("compute.mma", "mma_tput"), ("bandwidth.onchip", "l1_read"),
    ("bandwidth.onchip", "shared_read"), ("clock.probe", "clock_probe"),
]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("source", "kernel"), BARRIER_TIMED, ids=[b[1] for b in BARRIER_TIMED])
def test_clock_reads_bracket_the_timed_region(source, kernel, arch) -> None:
    k = _kernel(source, kernel, arch)
    clocks = _clock_reads(k)
    assert len(clocks) >= 2
    first, last = clocks[0], clocks[-1]
    bars = [i for i, ins in enumerate(k.instrs) if ins.base == "BAR"]
    assert any(b < first for b in bars), f"{kernel}: no barrier before the start clock"
    assert any(first < b < last for b in bars), f"{kernel}: no barrier before the stop clock"
    work = {"LDG", "LDS", "FFMA", "DFMA", "HFMA2", "HMMA", "IMAD"}
    loop = _loop_body(k)
    assert all(first < k.instrs.index(i) < last for i in loop if i.base in work)


# full-occupancy launches: (source, kernel, threads per block, dynamic shared bytes)
FULL_GRID = [
    ("compute.arith", "tput_fp32", 256, 0), ("compute.arith", "tput_fp64", 256, 0),
    ("compute.arith", "tput_fp16x2", 256, 0), ("compute.arith", "tput_int32", 256, 0),
    ("compute.mma", "mma_tput", 256, 0),
    ("bandwidth.grid", "grid_read_cg", 256, 0), ("bandwidth.grid", "grid_read_ca", 256, 0),
    ("bandwidth.grid", "grid_write", 256, 0), ("bandwidth.grid", "grid_copy", 256, 0),
    ("atomics.atomic", "atomic_tput", 256, 0), ("clock.probe", "clock_probe", 256, 0),
]


@pytest.mark.parametrize("preset", [p.name for p in all_presets()])
@pytest.mark.parametrize(("source", "kernel", "block", "dyn"), FULL_GRID,
                         ids=[f[1] for f in FULL_GRID])
def test_launched_blocks_fit_per_sm(source, kernel, block, dyn, preset) -> None:
    """The suite launches sm_count x threads_per_sm / block blocks and reads per-SM rates:
    every one must be resident at once on each preset card (mma_tput on sm_70 once was not)."""
    p = next(p for p in all_presets() if p.name == preset)
    arch = int(p.compute_capability.replace(".", ""))
    core = p.timing.core
    _kernels(source, arch)
    res = sass.resource_usage(_compiled(source, arch)[0])[kernel]
    threads = int(core.max_threads_per_sm.value)
    wanted = threads // block
    got = sass.blocks_per_sm(
        res.registers, block, res.static_shared_bytes + dyn,
        regs_per_sm=int(core.registers_per_sm.value), max_threads_per_sm=threads,
        shared_per_sm=int(core.shared_mem_per_sm.value),
        max_blocks_per_sm=int(core.max_ctas_per_sm.value),
    )
    assert got >= wanted, f"{kernel} on {preset}: {res.registers} regs -> {got}/{wanted} blocks"


def test_no_local_memory_in_timed_kernels() -> None:
    for source in all_sources():
        for arch in sass.TARGETS:
            for name, k in _kernels(source, arch).items():
                assert not [i for i in k.instrs if i.base in ("LDL", "STL")], (name, arch)


def test_every_kernel_disassembles() -> None:
    for source, names in kernel_names().items():
        for arch in sass.TARGETS:
            assert set(names) <= set(_kernels(source, arch)), (source, arch)


def test_control_bits_decode_a_known_instruction() -> None:
    """sm_90 chase_ca before the checksum fix, at 0x0790: ``S02 W[2] IADD3`` (waits on
scoreboard 2, the chain load's)."""
    ins = sass.Instr(0x790, "", "IADD3", ("R19", "P4", "P5", "R4", "R12", "R15"), 0,
                     0x004FC40007F9E00F | (2 << 41) | (0b000100 << 52) | (7 << 46) | (7 << 49))
    assert ins.stall == 2 and ins.wait_mask == {2} and ins.write_barrier is None


@pytest.mark.parametrize("arch", sass.TARGETS)
def test_fp16_chain_pipes(arch: int) -> None:
    """sm_90's ptxas alternates HFMA2 and HFMA2.MMA in the dependent fp16 chain, so Hopper's
    fp16_latency is the mean of two pipes (docs/microbench.md); earlier
    architectures use HFMA2 only. A change here changes what fp16_latency means."""
    body = _loop_body(_kernel("compute.arith", "lat_fp16x2", arch))
    ops = {i.op for i in body if i.base == "HFMA2"}
    assert ops == ({"HFMA2", "HFMA2.MMA"} if arch == 90 else {"HFMA2"})
