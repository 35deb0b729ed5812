"""Bandwidth, compute and atomics on a simulated card: what GPGPU-Sim can execute.

See :mod:`hilsim.microbench.simsuite` for the backend's conventions. The suite's kernels
run unchanged where the simulator supports them: the dependent-issue latency of
fp32/fp64/fp16x2/int32 (``compute.arith`` ``lat_*``, one warp) and the atomic latency
(``atomics.atomic`` ``atomic_lat``, one thread), one SM each. Tried on 2 SMs
(``-gpgpu_n_clusters 2``) and skipped with the simulator's own reason: the throughput
and on-chip bandwidth kernels record ``%smid`` (GPGPU-Sim aborts: "feature '%smid' not
supported"), atomic throughput uses ``red.global`` (not implemented by its PTX front
end), ``grid_read_cg`` aborts it with ``std::out_of_range``; DRAM streams would take
hours of simulation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench.compute import TYPES, _operands, _short
from hilsim.microbench.measurement import Measurement
from hilsim.microbench.simhost import Plan

_SIM = {"backend": "gpgpusim", "clock": "%clock (simulated core cycles)"}


def _arg(value: Any) -> tuple[str, Any]:
    """A numpy scalar as a plan argument (floats by their bits)."""
    if isinstance(value, np.float32):
        return ("f32", float(value))
    if isinstance(value, np.float64):
        return ("f64", float(value))
    if isinstance(value, np.uint32):
        return ("u32", int(value))
    return ("i32", int(value))


def unit_latency(ctx: Any, key: str, n_lat: int = 2) -> list[Measurement]:
    """``{type}_latency``: one warp, one dependent chain of 64 x ``n_lat`` operations."""
    from hilsim.microbench.simsuite import ONE_SM  # noqa: PLC0415

    a, b, magic = _operands(key)
    plan = Plan("compute.arith")
    plan.buf("out", 8 * 32).buf("cyc", 16)
    plan.launch(
        f"lat_{key}",
        1,
        32,
        [_arg(a), _arg(b), ("i32", n_lat), _arg(magic), ("buf", "out"), ("buf", "cyc")],
    )
    plan.dump("cyc")
    res = ctx.run(f"compute.{key}", plan, ONE_SM)
    body, overhead = (int(v) for v in res.array("cyc", np.int64)[:2])
    value = (body - overhead) / (64 * n_lat)
    return [
        Measurement(
            f"{_short(key)}_latency",
            value,
            "cycles",
            {"instruction": TYPES[key][2], "chain_length": 64 * n_lat, **_SIM},
            [value],
            0.0,
            value > 0,
            "" if value > 0 else "non-positive latency",
        )
    ]


def atomic_latency(ctx: Any, n_lat: int = 64) -> list[Measurement]:
    """``atomic_latency``: one thread, a chain of dependent ``atom.global.add.u32``."""
    from hilsim.microbench.simsuite import ONE_SM  # noqa: PLC0415

    plan = Plan("atomics.atomic")
    plan.buf("data", 4).buf("out", 24)
    plan.launch("atomic_lat", 1, 1, [("buf", "data"), ("u32", 0), ("i32", n_lat), ("buf", "out")])
    plan.dump("data").dump("out")
    res = ctx.run("atomics.latency", plan, ONE_SM)
    body, overhead, last = (int(v) for v in res.array("out", np.int64)[:3])
    ok = int(res.array("data", np.uint32)[0]) == n_lat and last == n_lat - 1
    value = (body - overhead) / n_lat
    note = "" if ok else "counter does not equal the number of atomics"
    params = {"instruction": "atom.global.add.u32", "chain_length": n_lat, **_SIM}
    return [Measurement("atomic_latency", value, "cycles", params, [value], 0.0, ok, note)]


SMID = (
    "the kernel records %smid for its per-SM rate, and GPGPU-Sim aborts on it "
    "(\"feature '%smid' not supported\")"
)


def sim_benchmarks(family: str) -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The simulated benchmarks of ``bandwidth``, ``compute`` or ``atomics``.

    What GPGPU-Sim 4.2.0 (PTX mode) cannot execute as the suite wrote it is skipped with
    the simulator's own reason: ``%smid`` (throughput and on-chip bandwidth kernels),
    ``red.global`` (atomic throughput), an ``std::out_of_range`` abort in
    ``grid_read_cg`` (L2 bandwidth).
    """
    from hilsim.microbench.simsuite import skipped  # noqa: PLC0415

    if family == "compute":
        out: list[tuple[str, Callable[[Any], list[Measurement]]]] = [
            (f"compute.{key}", lambda ctx, key=key: unit_latency(ctx, key)) for key in TYPES
        ]
        out.append(
            (
                "compute.throughput",
                lambda ctx: [
                    skipped(f"{_short(k)}_throughput", "flop/clk/SM", SMID) for k in TYPES
                ],
            )
        )
        out.append(
            (
                "compute.mma",
                lambda ctx: [
                    skipped(f"tensor_{w}", u, "mma.sync on GPGPU-Sim's PTX front end not attempted")
                    for w, u in (("throughput", "FMA/clk/SM"), ("latency", "cycles"))
                ],
            )
        )
        return out
    if family == "atomics":
        return [
            ("atomics.latency", atomic_latency),
            (
                "atomics.throughput",
                lambda ctx: [
                    skipped(
                        n,
                        "atomics/s",
                        "GPGPU-Sim's PTX front end does not implement "
                        'red.global ("instruction red not (yet) implemented")',
                    )
                    for n in ("atomic_throughput_distinct", "atomic_throughput_same")
                ],
            ),
        ]
    if family == "bandwidth":
        return [
            (
                "bandwidth.onchip",
                lambda ctx: [
                    skipped(n, "bytes/clk/SM", SMID) for n in ("l1_bandwidth", "shared_bandwidth")
                ],
            ),
            (
                "l2_bandwidth",
                lambda ctx: [
                    skipped(
                        "l2_bandwidth",
                        "bytes/clk",
                        "grid_read_cg aborts GPGPU-Sim (std::out_of_range) on 2 SMs",
                    )
                ],
            ),
            (
                "bandwidth.dram",
                lambda ctx: [
                    skipped(
                        n,
                        "GB/s",
                        "a DRAM-sized grid stream (>= 8 x L2) is hours of "
                        "simulation; the peak is in the device facts (peak_dram_gbs)",
                    )
                    for n in ("dram_read_bandwidth", "dram_write_bandwidth", "dram_copy_bandwidth")
                ],
            ),
        ]
    raise ValueError(f"unknown family {family!r}")
