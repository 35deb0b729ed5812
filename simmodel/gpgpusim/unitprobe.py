"""One-warp probes of every entry of GPGPU-Sim's latency and initiation lists.

GPGPU-Sim 4.2 times an ALU instruction by its PTX opcode and type
(``cuda-sim.cc``, ``ptx_instruction::set_opcode_and_latency``): ``add``/``sub`` take entry
0 of ``-ptx_opcode_latency_{int,fp,dp}`` (and of ``-ptx_opcode_initiation_*``), ``max``/
``min`` entry 1, ``mul`` 2, ``mad``/``fma`` 3, ``div``/``rem`` 4 (on the SFU), ``shfl`` the
integer list's entry 5; ``ex2``/``sin``/``rcp``/... take ``-ptx_opcode_latency_sfu``. A
probe here is one PTX instruction on one warp (Accel-Sim, Khairy et al., ISCA 2020,
Section II-C: the latency microbenchmarks; Jia et al., "Dissecting the NVIDIA Volta GPU
Architecture via Microbenchmarking", 2018, Section 4: dependent chains for latency,
independent ones for issue rate):

* latency: a dependent chain ``x = op(x, a)`` of 64 x ``n`` instructions between two clock
  reads, the empty interval subtracted: cycles per instruction;
* initiation: 32 independent chains of the same instruction, interleaved, so a warp
  issues back to back to one unit; cycles per instruction = the issue interval once the
  chains outnumber latency / interval.

The operand keeps the value in range and the chain pure (``div`` by 1, ``mul`` by 1,
``max`` with a constant); nothing but the chain sits between the clock reads. These
kernels run on the GPGPU-Sim device only (the simulator times PTX, which is what its
options describe); the suite's own probes (``hilsim agent microbench``) are what a GPU
is measured with. :data:`PROBES` names each probe after the option entry it times;
:func:`probe_measurements` runs any of them as one simulated program.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hilsim.microbench.device import Device, Setup
from hilsim.microbench.program import Program

from hilsim.core.measurement import Measurement

#: PTX type -> (C type, asm constraint, operand value of the probe's ``a``)
_TYPES = {
    "s32": ("int", "r", "1"),
    "u32": ("unsigned int", "r", "1u"),
    "b32": ("unsigned int", "r", "1u"),
    "f32": ("float", "f", "1.0f"),
    "f64": ("double", "d", "1.0"),
}
#: option list -> PTX type suffix used for its entries
LIST_TYPE = {"int": "s32", "fp": "f32", "dp": "f64"}
ENTRY_NAMES = ("ADD", "MAX", "MUL", "MAD", "DIV", "SHFL")


@dataclass(frozen=True)
class Probe:
    """One probed instruction: the option entry it times and its PTX text."""

    key: str  # e.g. "int.div"
    #: ``-ptx_opcode_{latency,initiation}_<list>`` and the entry (None: a one-value list)
    unit_list: str
    entry: int | None
    ptype: str
    #: the instruction, ``{x}`` the chain register, ``{a}`` the operand
    text: str

    @property
    def kernel(self) -> str:
        """The kernel name stem (``lat_`` / ``init_`` is prepended)."""
        return self.key.replace(".", "_")

    def option(self, what: str) -> str:
        """``-ptx_opcode_latency_<list>`` (``what`` = latency) or ``..._initiation_...``."""
        return f"-ptx_opcode_{what}_{self.unit_list}"


def _ptx(op: str, ptype: str, operands: int) -> str:
    args = ", ".join(["{x}", "{x}", "{a}", "{a}"][: operands + 1])
    return f"{op}.{ptype} {args};"


def _probes() -> tuple[Probe, ...]:
    out: list[Probe] = []
    for lst, ptype in LIST_TYPE.items():
        ops = {
            "add": (0, _ptx("add", ptype, 2)),
            "max": (1, _ptx("max", ptype, 2)),
            "mul": (2, _ptx("mul.lo" if lst == "int" else "mul.rn", ptype, 2)),
            "mad": (3, _ptx("mad.lo" if lst == "int" else "fma.rn", ptype, 3)),
            "div": (4, _ptx("div" if lst == "int" else "div.rn", "u32" if lst == "int"
                            else ptype, 2)),
        }
        for op, (entry, text) in ops.items():
            out.append(Probe(f"{lst}.{op}", lst, entry, "u32" if op == "div" and lst == "int"
                             else ptype, text))
    # shfl: the integer list's sixth entry; the form without the predicate destination
    # (GPGPU-Sim reads "d|p" as a vector operand)
    out.append(Probe("int.shfl", "int", 5, "b32",
                     "shfl.sync.bfly.b32 {x}, {x}, 1, 31, 0xffffffff;"))
    out.append(Probe("sfu.ex2", "sfu", None, "f32", "ex2.approx.ftz.f32 {x}, {x};"))
    return tuple(out)


PROBES: tuple[Probe, ...] = _probes()
PROBE_BY_KEY = {p.key: p for p in PROBES}
#: independent chains of an initiation probe
CHAINS = 32
LATENCY_STEPS = 64


def _body(p: Probe, reg: str) -> str:
    ctype, c, _ = _TYPES[p.ptype]
    text = p.text.format(x="%0", a="%1")
    if "{a}" not in p.text:
        return f'asm volatile("{text}" : "+{c}"({reg}));'
    return f'asm volatile("{text}" : "+{c}"({reg}) : "{c}"(a));'


def _kernels(p: Probe) -> str:
    ctype, _, a = _TYPES[p.ptype]
    lat = _body(p, "x")
    regs = ", ".join(f"x{i} = x + ({ctype}){i}" for i in range(CHAINS))
    chains = "\n            ".join(_body(p, f"x{i}") for i in range(CHAINS))
    fold = " + ".join(f"x{i}" for i in range(CHAINS))
    return f"""
extern "C" __global__ void lat_{p.kernel}(int n, long long* __restrict__ cyc,
                                          {ctype}* __restrict__ out)
{{
    const {ctype} a = {a};
    {ctype} x = ({ctype})(threadIdx.x & 1);
    long long t0 = clock64();
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {{
#pragma unroll
        for (int k = 0; k < {LATENCY_STEPS}; ++k) {{ {lat} }}
    }}
    long long t2 = clock64();
    if (threadIdx.x == 0) {{ cyc[0] = t2 - t1; cyc[1] = t1 - t0; out[0] = x; }}
}}

extern "C" __global__ void init_{p.kernel}(int n, long long* __restrict__ cyc,
                                           {ctype}* __restrict__ out)
{{
    const {ctype} a = {a};
    {ctype} x = ({ctype})(threadIdx.x & 1);
    {ctype} {regs};
    long long t0 = clock64();
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {{
            {chains}
    }}
    long long t2 = clock64();
    if (threadIdx.x == 0) {{ cyc[0] = t2 - t1; cyc[1] = t1 - t0; out[0] = {fold}; }}
}}
"""


#: the probe kernels, one source (``unitprobe.probes``), compiled like the suite's
MODULE = "unitprobe.probes"
SOURCES: dict[str, str] = {MODULE: "".join(_kernels(p) for p in PROBES)}
#: kernel names per source (the simulated host program's kernel table)
KERNELS: dict[str, list[str]] = {
    MODULE: [f"{kind}_{p.kernel}" for p in PROBES for kind in ("lat", "init")]
}


def measurement_name(p: Probe, what: str) -> str:
    """The name a probe's result is recorded under: ``probe.int.div.latency``."""
    return f"probe.{p.key}.{what}"


def probe_measurements(
    device: Device, keys: Sequence[str], what: Sequence[str] = ("latency", "initiation"),
    n: int = 2, bench: str = "unitprobe",
) -> list[Measurement]:
    """Run the probes ``keys`` (:data:`PROBE_BY_KEY`) as one program on one SM:
    cycles per instruction, named by :func:`measurement_name`."""
    program = Program(MODULE)
    launches: list[tuple[Probe, str, str]] = []
    for key in keys:
        p = PROBE_BY_KEY[key]
        for w in what:
            buf = f"c_{p.kernel}_{w}"
            program.buf(buf, 16).buf(f"o_{p.kernel}_{w}", 8)
            kernel = f"{'lat' if w == 'latency' else 'init'}_{p.kernel}"
            program.launch(kernel, 1, 32, [("i32", n), ("buf", buf),
                                           ("buf", f"o_{p.kernel}_{w}")])
            program.read(buf)
            launches.append((p, w, buf))
    result = device.run(bench, program, Setup.ONE_SM)
    out = []
    for p, w, buf in launches:
        body, overhead = (int(v) for v in result.array(buf, np.int64)[:2])
        count = LATENCY_STEPS * n if w == "latency" else CHAINS * n
        value = (body - overhead) / count
        ok = value > 0
        params = {
            "instruction": p.text.format(x="x", a="a"),
            "option": p.option(w),
            "entry": p.entry,
            "entry_name": ENTRY_NAMES[p.entry] if p.entry is not None else "SFU",
            "instructions": count,
            "chains": 1 if w == "latency" else CHAINS,
            **device.kernel_clock_params,
        }
        out.append(Measurement(measurement_name(p, w), value if ok else None, "cycles",
                               params, [value], 0.0, ok, "" if ok else "non-positive"))
    return out
