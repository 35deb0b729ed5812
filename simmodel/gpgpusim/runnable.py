"""What GPGPU-Sim 667834c can run: the constraints its source puts on a card's options.

A config the simulator parses can still crash it on the first instruction or the first
memory access. The conditions, from the source (``gpgpu-sim_distribution`` 667834c):

* **pipelines** (``shader.cc``): an instruction enters its unit's pipeline at stage
  ``latency - initiation_interval`` (``pipelined_simd_unit::cycle``,
  ``m_pipeline_reg[start_stage]``), so that stage must lie in ``[0, depth)``: an interval
  above its latency is a negative index (measured: SIGSEGV), a latency more than
  ``depth - 1`` above its interval overruns the pipeline. A unit's depth is one entry
  (``shader_core_config::set_pipeline_latency``): SP the fp MAX, DP the dp MAX, INT
  max(int MAX, SHFL), SFU max(dp DIV, SFU). Which unit runs an entry
  (``cuda-sim.cc``, ``ptx_instruction::set_opcode_and_latency``; ``shader.cc``'s
  dispatch): fp ADD..MAD on SP; dp ADD..MAD on DP (on the SFU without DP units); int
  ADD..MAD and SHFL on INT (on SP without INT units); every DIV on the SFU. A latency of
  512 or more fails ``assert(latency < MAX_ALU_LATENCY)``;
* **partition indexing** (``addrdec.cc``): bitwise XOR (1) asserts a power-of-two channel
  count; IPOLY (2) hashes over next_pow2(channels) x sub-partitions, which must be 16, 32
  or 64 (``hashing.cc`` asserts otherwise);
* **cache set index** (``gpu-cache.cc``): IPOLY (``P``) needs 16, 32 or 64 sets, the
  Fermi hash (``H``) 32 or 64; bitwise XOR (``X``) indexes out of bounds unless the set
  count is a power of two;
* **the unified L1** (``gpu-cache.h``, ``l1d_cache_config::get_max_cache_multiplier``;
  ``shader.cc``, the adaptive carve-out at a kernel's launch): with
  ``-gpgpu_unified_l1d_size`` set, the dl1's sets x ways x line (in KB) must divide it,
  and with ``-gpgpu_adaptive_cache_config`` no ``-gpgpu_shmem_option`` may exceed it
  (each asserts).

:func:`problems` lists what a set of options breaks (GPGPU-Sim's defaults fill the
options not given); a tuner refuses to write a card with any.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: GPGPU-Sim's defaults of the list options (``cuda-sim.cc`` option registration)
LIST_DEFAULTS: dict[str, str] = {
    "-ptx_opcode_latency_int": "1,1,19,25,145,32",
    "-ptx_opcode_initiation_int": "1,1,4,4,32,4",
    "-ptx_opcode_latency_fp": "1,1,1,1,30",
    "-ptx_opcode_initiation_fp": "1,1,1,1,5",
    "-ptx_opcode_latency_dp": "8,8,8,8,335",
    "-ptx_opcode_initiation_dp": "8,8,8,8,130",
    "-ptx_opcode_latency_sfu": "8",
    "-ptx_opcode_initiation_sfu": "8",
    "-ptx_opcode_latency_tesnor": "64",
    "-ptx_opcode_initiation_tensor": "64",
}
#: the entries of the lists, in GPGPU-Sim's order
ENTRIES = ("ADD", "MAX", "MUL", "MAD", "DIV", "SHFL")
#: ``assert(latency < MAX_ALU_LATENCY)`` (``shader.h``)
MAX_ALU_LATENCY = 512
#: (latency option, initiation option) of each PTX list; the tensor latency option is
#: spelled ``tesnor`` in GPGPU-Sim
PAIRS = {
    "int": ("-ptx_opcode_latency_int", "-ptx_opcode_initiation_int"),
    "fp": ("-ptx_opcode_latency_fp", "-ptx_opcode_initiation_fp"),
    "dp": ("-ptx_opcode_latency_dp", "-ptx_opcode_initiation_dp"),
    "sfu": ("-ptx_opcode_latency_sfu", "-ptx_opcode_initiation_sfu"),
    "tensor": ("-ptx_opcode_latency_tesnor", "-ptx_opcode_initiation_tensor"),
}
#: trace-mode pairs ``lat,init`` (Accel-Sim's trace driver runs the same pipelines)
TRACE_PAIRS = tuple(f"-trace_opcode_latency_initiation_{u}"
                    for u in ("int", "sp", "dp", "sfu", "tensor"))


def _ints(value: str, default: str) -> list[int]:
    """A list option's entries; a short list takes the default's tail (as hilsim's runs
    complete it, ``cards.INT_LIST_DEFAULTS``); an unreadable entry is -1."""
    given = [p.strip() for p in str(value).split(",") if p.strip()]
    full = default.split(",")
    out = []
    for part in given + full[len(given):]:
        try:
            out.append(int(float(part.split()[0])))
        except (ValueError, IndexError):
            out.append(-1)
    return out


def _num(options: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(float(str(options.get(name, default)).split()[0]))
    except (ValueError, IndexError):
        return default


def lists(options: Mapping[str, str]) -> dict[str, tuple[list[int], list[int]]]:
    """Each PTX list's (latencies, intervals), GPGPU-Sim's defaults where not given."""
    out = {}
    for unit, (lat, ini) in PAIRS.items():
        out[unit] = (_ints(options.get(lat, LIST_DEFAULTS[lat]), LIST_DEFAULTS[lat]),
                     _ints(options.get(ini, LIST_DEFAULTS[ini]), LIST_DEFAULTS[ini]))
    return out


def unit_depths(options: Mapping[str, str]) -> dict[tuple[str, int], tuple[str, int]]:
    """(list, entry) -> (the unit that runs it, that unit's pipeline depth)."""
    ls = lists(options)
    fp, dp, i, sfu, tensor = (ls[u][0] for u in ("fp", "dp", "int", "sfu", "tensor"))
    depth = {"SP": fp[1], "DP": dp[1], "INT": max(i[1], i[5]), "SFU": max(dp[4], sfu[0]),
             "TENSOR": tensor[0]}
    int_unit = "INT" if _num(options, "-gpgpu_num_int_units", 0) > 0 else "SP"
    dp_unit = "DP" if _num(options, "-gpgpu_num_dp_units", 0) > 0 else "SFU"
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for e in range(4):
        out[("fp", e)] = ("SP", depth["SP"])
        out[("dp", e)] = (dp_unit, depth[dp_unit])
        out[("int", e)] = (int_unit, depth[int_unit])
    for u in ("fp", "dp", "int"):
        out[(u, 4)] = ("SFU", depth["SFU"])
    out[("int", 5)] = (int_unit, depth[int_unit])
    out[("sfu", 0)] = ("SFU", depth["SFU"])
    out[("tensor", 0)] = ("TENSOR", depth["TENSOR"])
    return out


def pipeline_problems(options: Mapping[str, str]) -> list[str]:
    """Every list entry whose start stage ``latency - interval`` falls outside its unit's
    pipeline, or whose latency reaches :data:`MAX_ALU_LATENCY`."""
    out = []
    ls = lists(options)
    for (unit, e), (runs_on, depth) in unit_depths(options).items():
        lats, inis = ls[unit]
        lat, ini = lats[e], inis[e]
        what = f"{PAIRS[unit][0]} {ENTRIES[e] if len(lats) > 1 else 'value'}"
        if lat < 0 or ini < 1:
            out.append(f"{what}: latency {lat}, interval {ini} unreadable")
        elif ini > lat:
            out.append(f"{what}: initiation interval {ini} above its latency {lat} (the "
                       f"instruction would start at pipeline stage {lat - ini})")
        elif lat - ini >= depth:
            out.append(f"{what}: latency {lat} - interval {ini} reaches past the {runs_on} "
                       f"pipeline's depth {depth}")
        elif lat >= MAX_ALU_LATENCY:
            out.append(f"{what}: latency {lat} is not below {MAX_ALU_LATENCY}")
    for name in TRACE_PAIRS:
        if name in options:
            parts = _ints(options[name], "-1,-1")
            if len(parts) >= 2 and parts[1] > parts[0] >= 0:
                out.append(f"{name}: initiation interval {parts[1]} above its latency "
                           f"{parts[0]}")
    return out


def ipoly_fits(channels: int, sub_partitions: int) -> bool:
    """Whether IPOLY partition indexing hashes ``channels`` evenly: a power of two whose
    L2 slices (x sub-partitions) are 16, 32 or 64 (``hashing.cc``; with a gap to the next
    power of two ``addrdec.cc`` takes the hash modulo the slices, loading some 1.5x)."""
    pow2 = channels > 0 and channels & (channels - 1) == 0
    return pow2 and channels * sub_partitions in (16, 32, 64)


def partition_problems(options: Mapping[str, str]) -> list[str]:
    """A partition indexing the channel count breaks (a crash, not an imbalance)."""
    idx = _num(options, "-gpgpu_memory_partition_indexing", 0)
    channels = _num(options, "-gpgpu_n_mem", 8)
    sub = _num(options, "-gpgpu_n_sub_partition_per_mchannel", 1)
    nxt = 1 << max(0, (channels - 1).bit_length())
    if idx == 1 and channels & (channels - 1):
        return [f"-gpgpu_memory_partition_indexing 1 (XOR) needs a power-of-two channel "
                f"count, not {channels} (addrdec.cc asserts)"]
    if idx == 2 and nxt * sub not in (16, 32, 64):
        return [f"-gpgpu_memory_partition_indexing 2 (IPOLY) hashes {nxt} x {sub} slices: "
                "only 16, 32 or 64 exist (hashing.cc asserts)"]
    return []


#: set index letter -> the set counts it can index
_SET_INDEX = {"P": lambda n: n in (16, 32, 64), "H": lambda n: n in (32, 64),
              "X": lambda n: n > 0 and n & (n - 1) == 0}


def cache_problems(options: Mapping[str, str]) -> list[str]:
    """A cache whose set-index function cannot index its set count."""
    out = []
    for name, value in options.items():
        if not name.startswith("-gpgpu_cache:"):
            continue
        m = re.match(r"^\s*[A-Z]:(\d+):(\d+):(\d+),([^,]*)", str(value))
        if not m:
            continue
        policy = m[4].split(":")
        letter = policy[4] if len(policy) > 4 else "L"
        fits = _SET_INDEX.get(letter)
        if fits is not None and not fits(int(m[1])):
            out.append(f"{name}: set index {letter} cannot index {m[1]} sets")
    return out


def l1_problems(options: Mapping[str, str]) -> list[str]:
    """A dl1 that does not divide the unified L1, or a shared-memory carve-out above it."""
    unified = _num(options, "-gpgpu_unified_l1d_size", 0)
    if unified <= 0:
        return []
    out = []
    m = re.match(r"^\s*[A-Z]:(\d+):(\d+):(\d+)", str(options.get("-gpgpu_cache:dl1", "")))
    if m:
        kb = int(m[1]) * int(m[3]) * int(m[2]) // 1024
        if kb <= 0 or unified % kb:
            out.append(f"-gpgpu_cache:dl1: {m[1]} sets x {m[3]} ways x {m[2]} B = {kb} KB "
                       f"does not divide -gpgpu_unified_l1d_size {unified} KB (gpu-cache.h "
                       "asserts)")
    if _num(options, "-gpgpu_adaptive_cache_config", 0):
        shmem = [int(p) for p in str(options.get("-gpgpu_shmem_option", "")).split(",")
                 if p.strip().isdigit()]
        if shmem and max(shmem) > unified:
            out.append(f"-gpgpu_shmem_option {max(shmem)} KB exceeds -gpgpu_unified_l1d_size "
                       f"{unified} KB (shader.cc asserts at a kernel's launch)")
    return out


def problems(options: Mapping[str, str]) -> list[str]:
    """Everything in ``options`` GPGPU-Sim 667834c cannot run (empty: runnable)."""
    return [*pipeline_problems(options), *partition_problems(options),
            *cache_problems(options), *l1_problems(options)]
