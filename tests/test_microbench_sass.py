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


def flush_problems(k: sass.Kernel) -> list[str]:
    """The cold-lap flush (``flush_read``) only reads: every loop of it loads, none
    stores (a flush that writes leaves L2 dirty, and the timed misses pay write-backs)."""
    # a one-instruction loop is the kernel's trailing ``BRA`` to itself
    loops = [(s, e) for s, e in _loops(k, 0, len(k.instrs) - 1) if e > s]
    if not loops:
        return [f"{k.name}: no loop"]
    bodies = [k.instrs[s : e + 1] for s, e in loops]
    out = [] if any(i.base == "LDG" for b in bodies for i in b) else [f"{k.name}: no load"]
    for body in bodies:  # sm_70/75: a second loop, the warp's reconvergence (VOTE, YIELD)
        out += [f"{i.addr:04x} {i.text}: a store in the flush loop" for i in body
                if i.base in ("STG", "ST", "RED", "REDG", "ATOMG", "ATOM")]
    return out


@pytest.mark.parametrize("arch", sass.TARGETS)
def test_cold_lap_flush_only_reads(arch: int) -> None:
    assert flush_problems(_kernel("latency.chase", "flush_read", arch)) == []


@pytest.mark.parametrize("arch", [75, 90])
def test_flush_check_rejects_a_writing_flush(arch: int) -> None:
    """The flush as it was: every word written (``fill32``), nothing read."""
    old = 'asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(buf + i));'
    new = "v = (unsigned int)i; ((unsigned int*)buf)[i] = 1u;"
    assert flush_problems(_mutant("latency.chase", old, new, arch)["flush_read"])


_GPU_ADD = r"\.ADD.*\.STRONG\.GPU"  # device-scope atomic add

# the cache operator each measured level needs (each checked against the SASS by hand once)
CACHE_OPS = [
    ("latency.chase", "chase_ca", "LDG", {70: r"\.STRONG\.CTA", 75: r"\.STRONG\.CTA",
                                          86: r"\.STRONG\.SM", 90: r"\.STRONG\.SM"}),
    ("latency.chase", "chase_cg", "LDG", dict.fromkeys(sass.TARGETS, r"\.STRONG\.GPU")),
    ("latency.chase", "flush_read", "LDG", dict.fromkeys(sass.TARGETS, r"\.STRONG\.GPU")),
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
    """Every ``base`` instruction of the kernel (a chase's warm lap and timed loop alike)."""
    assert cache_operator_problems(_kernel(source, kernel, arch), base, modifier[arch]) == []


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


# --- mutation-tested checks -------------------------------------------------------------
# Each check below returns its problems (empty: the kernel is what its measurement needs)
# and is run on the suite's kernels and on a broken copy of the source (a mutant) that it
# must reject.


def _mutant(source: str, old: str, new: str, arch: int, count: int = 1) -> dict[str, sass.Kernel]:
    """The kernels of ``source`` with ``old`` replaced by ``new`` (``count`` times)."""
    text = all_sources()[source]
    assert text.count(old) >= count, f"mutant of {source}: {old!r} not in the source"
    _kernels(source, arch)  # skip/fail like the real kernels when the tools are missing
    broken = text.replace(old, new, count)
    return sass.disassemble(sass.compile_cubin(broken, arch, f"{source}.mutant.cu"), arch)


def _timed_loops(k: sass.Kernel) -> list[list[sass.Instr]]:
    clocks = _clock_reads(k)
    lo, hi = clocks[-2] + 1, clocks[-1] - 1
    return [k.instrs[s : e + 1] for s, e in _loops(k, lo, hi)]


def chase_step_problems(k: sass.Kernel) -> list[str]:
    """Every timed loop of a chase does one dependent load per counted step: the host
    divides the cycles by the step count, so two loads per step would double the
    latency unseen."""
    problems = []
    loops = _timed_loops(k)
    if not loops:
        return [f"{k.name}: no loop in the timed region"]
    for body in loops:
        loads = sum(_is_load(i) for i in body)
        step = sass.counter_step(body)
        if step is None or loads != step:
            problems.append(f"{k.name} loop at {body[0].addr:04x}: {loads} loads per "
                            f"counter step {step}")
    return problems


def shared_chase_problems(k: sass.Kernel) -> list[str]:
    """The shared chase's timed loads are ``LDS`` (a generic ``LD`` to a shared address
    takes the generic path, another latency)."""
    loads = [i for body in _timed_loops(k) for i in body if _is_load(i)]
    if not loads:
        return [f"{k.name}: no load in the timed loops"]
    return [f"{k.name}: {i.addr:04x} {i.text} is not LDS" for i in loads if i.base != "LDS"]


def cache_operator_problems(k: sass.Kernel, base: str, modifier: str) -> list[str]:
    """Every ``base`` load of the kernel (warm lap and timed loop) carries ``modifier``."""
    ops = [i for i in k.instrs if re.fullmatch(base, i.base)]
    if not ops:
        return [f"{k.name}: no {base}"]
    return [f"{k.name}: {i.addr:04x} {i.text}" for i in ops if not re.search(modifier, i.op)]


def arith_chain_problems(k: sass.Kernel, pattern: str, chains: int) -> list[str]:
    """The timed loop of ``lat_*`` is one dependent chain of the measured instruction
    (``chains`` 1), that of ``tput_*`` ``chains`` independent ones of equal length."""
    body = _loop_body(k)
    report = sass.loop_chains(body, lambda i: bool(re.match(pattern, i.op)), k.labels)
    problems = []
    if report.chains != chains:
        problems.append(f"{k.name}: {report.chains} loop-carried chains, expected {chains}")
    if report.markers != chains * report.depth:
        problems.append(f"{k.name}: {report.markers} instructions but the longest chain "
                        f"holds {report.depth} (expected {chains} chains of equal length)")
    if report.off_chain:
        problems.append(f"{k.name}: {len(report.off_chain)} measured instructions off the "
                        "chains")
    return problems


ARITH_CHAINS = [(k, p, 1) for _, k, p, _ in WORK if k.startswith("lat_")] + [
    (k, p, 8) for _, k, p, _ in WORK if k.startswith("tput_")
]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("kernel", "pattern", "chains"), ARITH_CHAINS,
                         ids=[a[0] for a in ARITH_CHAINS])
def test_arith_loops_are_the_chains_they_claim(kernel, pattern, chains, arch) -> None:
    assert arith_chain_problems(_kernel("compute.arith", kernel, arch), pattern, chains) == []


@pytest.mark.parametrize("arch", [70, 90])
def test_chain_check_rejects_a_split_accumulator(arch: int) -> None:
    """``lat_fp32`` with its chain split over two accumulators reads half the latency."""
    old = ('            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(a), "f"(b));\n'
           "        }\n    }\n    long long t2 = clock64();\n    if (x == magic)")
    new = ('            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(a), "f"(b));\n'
           '            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(y) : "f"(a), "f"(b));\n'
           "        }\n    }\n    long long t2 = clock64();\n    x = x + y;\n    if (x == magic)")
    text = all_sources()["compute.arith"]
    assert text.count(old) == 1
    broken = text.replace(old, new).replace(
        "extern \"C\" __global__ void lat_fp32(float a, float b, int n, float magic,\n"
        "                                      float* __restrict__ out, long long* __restrict__ "
        "cyc)\n{\n    float x = (float)(threadIdx.x);",
        "extern \"C\" __global__ void lat_fp32(float a, float b, int n, float magic,\n"
        "                                      float* __restrict__ out, long long* __restrict__ "
        "cyc)\n{\n    float x = (float)(threadIdx.x), y = x + 1.f;")
    assert "y = x + 1.f" in broken
    _kernels("compute.arith", arch)
    k = sass.disassemble(sass.compile_cubin(broken, arch), arch)["lat_fp32"]
    assert arith_chain_problems(k, r"^FFMA", 1)


CHASE_KERNELS = [("latency.chase", "chase_ca"), ("latency.chase", "chase_cg"),
                 ("latency.shared_chase", "chase_shared")]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("source", "kernel"), CHASE_KERNELS, ids=[c[1] for c in CHASE_KERNELS])
def test_one_dependent_load_per_counted_step(source: str, kernel: str, arch: int) -> None:
    assert chase_step_problems(_kernel(source, kernel, arch)) == []


_CA_STEP = 'asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n    }\n    long long t2'


@pytest.mark.parametrize("arch", [70, 90])
def test_step_check_rejects_two_loads_per_step(arch: int) -> None:
    """Two chained loads per timed step while the host still divides by the step count."""
    two = ('asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n'
           '        asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n    }\n    long long t2')
    k = _mutant("latency.chase", _CA_STEP, two, arch)["chase_ca"]
    assert chase_step_problems(k)


@pytest.mark.parametrize("arch", sass.TARGETS)
def test_shared_chase_reads_shared_memory(arch: int) -> None:
    assert shared_chase_problems(_kernel("latency.shared_chase", "chase_shared", arch)) == []


@pytest.mark.parametrize("arch", [70, 90])
def test_shared_check_rejects_a_generic_pointer_chase(arch: int) -> None:
    """The chase through generic 64-bit pointers into shared memory (``LD.E.64``)."""
    text = all_sources()["latency.shared_chase"]
    generic = (
        text.replace("extern __shared__ unsigned int s[];",
                     "extern __shared__ unsigned long long s[];")
        .replace("    for (int i = 0; i < n; ++i) s[i] = base + 4u * next[i];",
                 "    for (int i = 0; i < n; ++i) s[i] = generic + 8ull * next[i];")
        .replace("    unsigned int p = base;", "    unsigned long long p = generic;")
        .replace('asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p) :: "memory");',
                 'asm volatile("ld.u64 %0, [%0];" : "+l"(p) :: "memory");')
        .replace('asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));',
                 'asm volatile("ld.u64 %0, [%0];" : "+l"(p));')
    )
    assert generic.count("ld.u64") == 2 and "ld.shared" not in generic
    _kernels("latency.shared_chase", arch)
    k = sass.disassemble(sass.compile_cubin(generic, arch), arch)["chase_shared"]
    assert {i.base for body in _timed_loops(k) for i in body if _is_load(i)} == {"LD"}
    assert shared_chase_problems(k)


CHASE_OPS = [c for c in CACHE_OPS if c[1].startswith("chase")]


@pytest.mark.parametrize("arch", [70, 90])
@pytest.mark.parametrize("where", ["warm", "timed"])
def test_cache_check_rejects_a_changed_operator(where: str, arch: int) -> None:
    """``.cg`` on one load of ``chase_ca``: in the warm lap, or on every other timed step
    (the last load of the kernel keeps ``.ca``)."""
    if where == "warm":
        old = 'asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n        sum += p;'
        new = 'asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));\n        sum += p;'
    else:
        old = _CA_STEP
        new = ('if (i & 1) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p));\n'
               '        else asm volatile("ld.global.ca.u64 %0, [%0];" : "+l"(p));\n'
               "    }\n    long long t2")
    k = _mutant("latency.chase", old, new, arch)["chase_ca"]
    last = [i for i in k.instrs if i.base == "LDG"][-1]
    ca = dict(CHASE_OPS[0][3])[arch]
    assert re.search(ca, last.op), "the mutant keeps the last load as it was"
    assert cache_operator_problems(k, "LDG", ca)


def launch_stamp_problems(kernels: dict[str, sass.Kernel]) -> list[str]:
    """The launch family's kernels time themselves on the GPU: ``empty_kernel`` stores two
    ``%globaltimer`` reads, ``spin_kernel`` spins on ``%globaltimer`` (a host round trip
    around the launch is not the launch latency)."""
    problems = []
    empty = kernels["empty_kernel"]
    reads = [i for i in empty.instrs if any("SR_GLOBALTIMER" in o for o in i.operands)]
    stored = {r for i in empty.instrs if i.base == "STG" for r in i.reads()}
    if len(reads) < 2 or not all(set(i.writes()) & stored for i in reads):
        problems.append(f"empty_kernel: {len(reads)} %globaltimer reads stored, expected 2")
    spin = kernels["spin_kernel"]
    lo = min((i for i, ins in enumerate(spin.instrs) if ins.branch_target()), default=None)
    in_loop = [body for s, e in _loops(spin, 0, len(spin.instrs) - 1)
               for body in [spin.instrs[s : e + 1]]]
    if lo is None or not any(any("SR_GLOBALTIMER" in o for i in b for o in i.operands)
                             for b in in_loop):
        problems.append("spin_kernel: no %globaltimer read in a loop")
    return problems


@pytest.mark.parametrize("arch", sass.TARGETS)
def test_launch_kernels_stamp_globaltimer(arch: int) -> None:
    assert launch_stamp_problems(_kernels("launch.empty", arch)) == []


@pytest.mark.parametrize("arch", [70, 90])
def test_launch_check_rejects_a_host_timed_empty_kernel(arch: int) -> None:
    """The empty kernel reverted to a plain empty kernel timed by a host round trip."""
    old = ("        stamps[2 * i] = gtimer_();\n        stamps[2 * i + 1] = gtimer_();")
    new = "        stamps[2 * i] = i;"
    assert launch_stamp_problems(_mutant("launch.empty", old, new, arch))


# --- the unit-operation probes (hilsim.microbench.unit_ops) -----------------------------

_INT_MAX = {70: "SEL", 75: "IMNMX", 86: "IMNMX", 90: "VIMNMX"}
#: what ptxas makes of max.f64 / min.f64 on sm_70-90 (the chain's instructions)
_DP_MAX_SEQUENCE = ("DSETP.MAX.AND", "DSETP.MIN.AND", "SEL", "FSEL", "LOP3.LUT",
                    "IMAD.MOV.U32", "MOV")


def _unit_marker(key: str, arch: int) -> tuple[str, set[str] | None]:
    """(opcode counted once per PTX operation, opcodes allowed on the chain or None when
    the operation is a multi-instruction sequence)."""
    if key == "sfu":
        return "MUFU.EX2", {"MUFU.EX2"}
    if key == "fp_add":
        return "FADD", {"FADD"}
    if key == "fp_mul":
        return "FMUL", {"FMUL"}
    if key in ("int_div", "fp_div"):
        return "MUFU.RCP", None
    if key == "shfl":
        return "SHFL.BFLY", {"SHFL.BFLY"}
    if key == "fp_max":
        return "FMNMX", {"FMNMX"}
    if key == "dp_add":
        return "DADD", {"DADD"}
    if key == "dp_mul":
        return "DMUL", {"DMUL"}
    if key == "dp_max":  # no DMNMX on sm_70-90: a compare, a select per half, NaN quieting
        return "DSETP", set(_DP_MAX_SEQUENCE)
    return _INT_MAX[arch], {"SEL", "ISETP.LT.AND"} if arch == 70 else {_INT_MAX[arch]}


def unit_chain_problems(k: sass.Kernel, key: str, kind: str, arch: int) -> list[str]:
    """The probe's timed loop: one marker per PTX operation, every marker on a
    loop-carried chain, one chain (latency) or :data:`unit_ops.INDEPENDENT` equal ones
    (initiation), nothing on the chain but the operation itself; a division keeps its
    whole sequence (reciprocal of the divisor included) on the chain."""
    from hilsim.microbench import unit_ops  # noqa: PLC0415  (the module under test)

    op = unit_ops.OPS[key]
    marker, allowed = _unit_marker(key, arch)
    body = _loop_body(k)
    report = sass.loop_chains(body, lambda i: i.op == marker or i.op.startswith(marker + "."),
                              k.labels)
    problems = []
    per_copy = unit_ops.ops_per_iteration(op, kind)  # one marker per PTX operation
    if report.markers == 0 or report.markers % per_copy:
        problems.append(f"{k.name}: {report.markers} {marker} in the loop, expected a "
                        f"multiple of {per_copy}")
    chains = 1 if kind == "latency" else op.independent
    # the max.f64 sequence selects each 32-bit half on its own (SEL, FSEL): a chain is a
    # register pair, both halves through every compare
    halves = 2 if key == "dp_max" else 1
    if report.chains != halves * chains or report.markers != chains * report.depth:
        problems.append(f"{k.name}: {report.chains} chains, longest {report.depth} of "
                        f"{report.markers} {marker} (expected {chains} equal chains"
                        f"{' of register pairs' if halves == 2 else ''})")
    spills = [i.op for i in body if i.base in ("P2R", "R2P")]
    if spills:  # predicates saved in a register: one serial chain through every step
        problems.append(f"{k.name}: {len(spills)} predicate spills ({spills[0]}) in the loop")
    if report.off_chain:
        problems.append(f"{k.name}: {len(report.off_chain)} {marker} off the chains")
    ops = {i.op for i in report.chain_ops}
    if allowed is not None and not ops <= allowed:
        problems.append(f"{k.name}: the chain also runs {sorted(ops - allowed)}")
    if key == "int_div":
        rp = sum(i.op.startswith("I2F.U32.RP") for i in report.chain_ops)
        if rp != report.markers:
            problems.append(f"{k.name}: {rp} divisor reciprocals on the chain for "
                            f"{report.markers} divisions")
    if key == "fp_div":
        fchk = sum(i.base == "FCHK" for i in report.chain_ops)
        if fchk != report.markers:
            problems.append(f"{k.name}: {fchk} FCHK for {report.markers} divisions")
    return problems


def _unit_probes() -> list[tuple[str, str]]:
    from hilsim.microbench import unit_ops  # noqa: PLC0415  (the module under test)

    out = []
    for key, op in unit_ops.OPS.items():
        out.append((key, "latency"))
        if op.initiation_name:
            out.append((key, "initiation"))
    return out


def _unit_kernel(key: str, kind: str) -> str:
    return f"{'lat' if kind == 'latency' else 'init'}_{key}"


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize(("key", "kind"), _unit_probes(),
                         ids=[_unit_kernel(*p) for p in _unit_probes()])
def test_unit_probe_is_the_chain_it_claims(key: str, kind: str, arch: int) -> None:
    k = _kernel("compute.ops", _unit_kernel(key, kind), arch)
    assert unit_chain_problems(k, key, kind, arch) == []


_EX2 = 'asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x));'
_UDIV = 'asm volatile("div.u32 %0, %1, %0;" : "+r"(x) : "r"(A));'
_END = "    long long t2 = clock64();\n    if (x == magic)"
_DADD = 'asm volatile("add.f64 %0, %0, %1;" : "+d"(x) : "d"(A));'
UNIT_MUTANTS = {
    # rcp(rcp(x)) == x: ptxas removes the chain
    "rcp_folded": ("sfu", "latency", [
        (_EX2, 'asm volatile("rcp.approx.ftz.f32 %0, %0;" : "+f"(x));')]),
    # an independent SFU operation beside the chain in every step
    "sfu_beside_chain": ("sfu", "latency", [
        ("    float x = ", "    float y = B;\n    float x = "),
        (_EX2, _EX2 + ' asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(y));'),
        (_END, "    long long t2 = clock64();\n    x = x + y;\n    if (x == magic)")]),
    # an add on the chain after each ex2
    "add_on_chain": ("sfu", "latency", [
        (_EX2, _EX2 + ' asm volatile("add.f32 %0, %0, %1;" : "+f"(x) : "f"(B));')]),
    # a divisor the compiler knows: multiply by a magic number, no division
    "div_by_constant": ("int_div", "latency", [
        (_UDIV, 'asm volatile("div.u32 %0, %0, 7;" : "+r"(x));')]),
    # the divisor off the chain (x = x / c): its reciprocal is loop-invariant and hoisted
    "div_divisor_invariant": ("int_div", "latency", [
        (_UDIV, 'asm volatile("div.u32 %0, %0, %1;" : "+r"(x) : "r"(A));')]),
    # same-direction min/max pairs fuse into one 3-input VIMNMX3 on sm_90
    "max_pairs_fused": ("int_max", "latency", [
        ('asm volatile("min.s32 %0, %0, %1;" : "+r"(x) : "r"(B));',
         'asm volatile("max.s32 %0, %0, %1;" : "+r"(x) : "r"(B));')]),
    # the FP64 probes: the operation replaced (another DP instruction times the entry) ...
    "dadd_replaced_by_dmul": ("dp_add", "latency", [(_DADD, _DADD.replace("add.f64",
                                                                          "mul.rn.f64"))]),
    "dmul_replaced_by_dfma": ("dp_mul", "initiation", [
        ('"mul.rn.f64 %0, %0, %1;"', '"fma.rn.f64 %0, %0, %1, %1;"')]),
    "dmax_replaced_by_dadd": ("dp_max", "latency", [
        ('"max.f64 %0, %0, %1;"', '"add.f64 %0, %0, %1;"')]),
    # ... the chain broken (the operation no longer reads the value it writes) ...
    "dadd_off_chain": ("dp_add", "latency", [
        ('"add.f64 %0, %0, %1;"', '"add.f64 %0, %1, %1;"')]),
    "dmul_off_chain": ("dp_mul", "latency", [
        ('"mul.rn.f64 %0, %0, %1;"', '"mul.rn.f64 %0, %1, %1;"')]),
    "dmax_off_chain": ("dp_max", "latency", [
        ('"max.f64 %0, %0, %1;"', '"max.f64 %0, %1, %1;"')]),
    # the FP32 add and multiply: replaced by a multiply-add, or off the chain
    "fadd_replaced_by_ffma": ("fp_add", "latency", [
        ('"add.rn.f32 %0, %0, %1;"', '"fma.rn.f32 %0, %0, %1, %1;"')]),
    "fmul_off_chain": ("fp_mul", "latency", [
        ('"mul.rn.f32 %0, %0, %1;"', '"mul.rn.f32 %0, %1, %1;"')]),
    # ... and the max.f64 initiation kernel at 8 chains: ptxas saves predicates in
    # registers (P2R/R2P on sm_90), one serial chain through every step
    "dmax_predicates_spilled": ("dp_max", "initiation", [("x[6]", "x[8]"),
                                                         ("j < 6;", "j < 8;")]),
}


def _edit_kernel(source: str, kernel: str, edits: list[tuple[str, str]]) -> str:
    """``source`` with ``edits`` applied inside ``kernel``'s text only."""
    start = source.index(f" void {kernel}(")
    end = source.find('extern "C"', start)
    end = len(source) if end < 0 else end
    text = source[start:end]
    for old, new in edits:
        assert old in text, f"{kernel}: {old!r} not in its text"
        text = text.replace(old, new)
    return source[:start] + text + source[end:]


def _unit_problems_or_none(k: sass.Kernel | None, key: str, kind: str, arch: int) -> list[str]:
    if k is None:
        return ["kernel missing"]
    try:
        return unit_chain_problems(k, key, kind, arch)
    except AssertionError as exc:  # no timed loop left at all
        return [str(exc).splitlines()[0]]


# the three-input VIMNMX3 exists on sm_90 only; ptxas 12 saves the 8-chain max.f64
# kernel's predicates in registers on sm_90 (not on sm_70-86)
_UNIT_MUTANT_CASES = [(m, a) for m in sorted(UNIT_MUTANTS)
                      for a in ([90] if m in ("max_pairs_fused", "dmax_predicates_spilled")
                                else [75, 90])]


@pytest.mark.parametrize(("mutant", "arch"), _UNIT_MUTANT_CASES)
def test_unit_check_rejects_a_broken_probe(mutant: str, arch: int) -> None:
    key, kind, edits = UNIT_MUTANTS[mutant]
    _kernels("compute.ops", arch)
    kernel = _unit_kernel(key, kind)
    broken = _edit_kernel(all_sources()["compute.ops"], kernel, edits)
    k = sass.disassemble(sass.compile_cubin(broken, arch), arch).get(kernel)
    assert _unit_problems_or_none(k, key, kind, arch)


@pytest.mark.parametrize("arch", [75, 90])
def test_unit_check_rejects_an_initiation_kernel_of_fewer_chains(arch: int) -> None:
    """``init_sfu`` with every other chain fed from its neighbour: 16 chains, not 32."""
    old = ('            for (int j = 0; j < 32; ++j) { asm volatile("ex2.approx.ftz.f32 %0, %0;" '
           ': "+f"(x[j])); }')
    new = ('            for (int j = 0; j < 32; ++j) { asm volatile("ex2.approx.ftz.f32 %0, %1;" '
           ': "=f"(x[j]) : "f"(x[j ^ (j & 1)])); }')
    k = _mutant("compute.ops", old, new, arch)["init_sfu"]
    assert _unit_problems_or_none(k, "sfu", "initiation", arch)


# --- the initiation kernels' scoreboards --------------------------------------------------
#: initiation probes of one instruction (int_div and dp_max time a SASS sequence's issue)
_ONE_INSTRUCTION = ("sfu", "shfl", "dp_add", "dp_mul")


def initiation_window_problems(k: sass.Kernel, key: str, arch: int, warps: int) -> list[str]:
    """The initiation kernel hides a unit latency of ``unit_ops.COVERED_LATENCY``: its
    loop body replayed from the control bits (``warps`` warps on one scheduler,
    :func:`hilsim.microbench.sass.issue_cycles`) reads the same cycles per operation
    (within 1 %) as on a unit with no latency. A warp's 6 scoreboards make each wait's
    distance to its setter the most latency that warp hides; its other warps must cover
    the rest."""
    from hilsim.microbench import unit_ops  # noqa: PLC0415  (the module under test)

    marker, _ = _unit_marker(key, arch)
    body = _loop_body(k)

    def is_unit(i: sass.Instr) -> bool:
        return i.op == marker or i.op.startswith(marker + ".")

    waits = [w for w in sass.scoreboard_waits(body) if is_unit(w.setter)]
    if not waits:  # fixed latency (DADD/DMUL on sm_90): the stall counts already wait
        return []
    free = sass.issue_cycles_per_op(body, is_unit, 0, warps)
    covered = unit_ops.COVERED_LATENCY
    slow = sass.issue_cycles_per_op(body, is_unit, covered, warps)
    if slow <= free * 1.01:
        return []
    near = min(waits, key=lambda w: w.cycles)
    return [f"{k.name}: {slow:.2f} cycles per {marker} at latency {covered} against "
            f"{free:.2f} at 0 with {warps} warp(s); nearest wait {near.cycles} cycles after "
            f"its setter ({near.setter.addr:04x} -> {near.waiter.addr:04x}, SB{near.scoreboard})"]


@pytest.mark.parametrize("arch", sass.TARGETS)
@pytest.mark.parametrize("key", _ONE_INSTRUCTION)
def test_initiation_kernel_hides_the_unit_latency(key: str, arch: int) -> None:
    from hilsim.microbench import unit_ops  # noqa: PLC0415  (the module under test)

    k = _kernel("compute.ops", f"init_{key}", arch)
    assert initiation_window_problems(k, key, arch, unit_ops.INITIATION_WARPS) == []


@pytest.mark.parametrize(("key", "arch"), [("sfu", 75), ("sfu", 90), ("shfl", 70),
                                           ("shfl", 90), ("dp_add", 70)])
def test_window_check_rejects_one_warp(key: str, arch: int) -> None:
    """The same kernel launched as before, one warp: its 32 chains share 6 scoreboards and
    each wait is ~24 cycles after its setter (6 at the loop's back edge)."""
    k = _kernel("compute.ops", f"init_{key}", arch)
    assert initiation_window_problems(k, key, arch, 1)


@pytest.mark.parametrize(("key", "arch"), [("sfu", 70), ("shfl", 86), ("shfl", 90)])
def test_window_check_rejects_one_chain_per_warp(key: str, arch: int) -> None:
    """Every step on chain 0: the four warps hold 4 operations in flight, not 128."""
    from hilsim.microbench import unit_ops  # noqa: PLC0415  (the module under test)

    _kernels("compute.ops", arch)
    kernel = f"init_{key}"
    stmt = unit_ops.OPS[key].statements[0]
    broken = _edit_kernel(all_sources()["compute.ops"], kernel,
                          [(stmt.replace("X", "x[j]"), stmt.replace("X", "x[0]"))])
    k = sass.disassemble(sass.compile_cubin(broken, arch), arch)[kernel]
    assert initiation_window_problems(k, key, arch, unit_ops.INITIATION_WARPS)
