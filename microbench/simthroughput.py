"""Bandwidth, compute and atomics on a simulated card, on a reduced SM count.

See :mod:`hilsim.microbench.simsuite` for the backend's conventions. The kernels are the
CuPy suite's (``compute.arith``, ``atomics.atomic``, ``bandwidth.onchip``,
``bandwidth.grid``), run with ``-gpgpu_n_clusters`` = ``ctx.throughput_sms`` (default 2)
and much less work per thread: per-SM rates (flop/clk/SM, B/clk/SM) come from the
kernels' own per-block ``%clock`` spans grouped by ``%smid``
(:func:`hilsim.microbench._gpu.per_sm_rate`), whole-GPU rates from the simulator's
cycles per kernel (recorded with the SM count they ran on). A kernel whose time is
dominated by its launch is avoided by ``-gpgpu_kernel_launch_latency 0``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench._gpu import per_sm_rate
from hilsim.microbench.compute import TYPES, _operands, _short
from hilsim.microbench.measurement import Measurement
from hilsim.microbench.simhost import Plan

_SIM = {"backend": "gpgpusim", "clock": "%clock (simulated core cycles)"}


def _opts(ctx: Any) -> dict[str, str]:
    return {"-gpgpu_n_clusters": str(ctx.throughput_sms), "-gpgpu_kernel_launch_latency": "0"}


def _arg(value: Any) -> tuple[str, Any]:
    """A numpy scalar as a plan argument (floats by their bits)."""
    if isinstance(value, np.float32):
        return ("f32", float(value))
    if isinstance(value, np.float64):
        return ("f64", float(value))
    if isinstance(value, np.uint32):
        return ("u32", int(value))
    return ("i32", int(value))


def compute_unit(ctx: Any, key: str, n_tput: int = 2, n_lat: int = 2) -> list[Measurement]:
    """``{type}_throughput`` (one 256-thread block per SM) and ``{type}_latency`` (one warp)."""
    from hilsim.microbench.simsuite import ONE_SM  # noqa: PLC0415

    ops = TYPES[key][3]
    a, b, magic = _operands(key)
    block = 256
    blocks = ctx.throughput_sms
    plan = Plan("compute.arith")
    plan.buf("out", 8 * blocks * block).buf("rec", 24 * blocks)
    plan.launch(
        f"tput_{key}",
        blocks,
        block,
        [_arg(a), _arg(b), ("i32", n_tput), _arg(magic), ("buf", "out"), ("buf", "rec")],
    )
    plan.dump("rec")
    res = ctx.run(f"compute.{key}", plan, _opts(ctx))
    per_block = float(n_tput * 16 * 8 * block * ops)
    rate, sms = per_sm_rate(res.array("rec", np.int64).reshape(-1, 3), per_block)
    tput = Measurement(
        f"{_short(key)}_throughput",
        rate,
        "flop/clk/SM",
        {
            "instruction": TYPES[key][2],
            "ops_per_instruction": ops,
            "blocks": blocks,
            "threads_per_block": block,
            "iterations": n_tput,
            "sms_seen": sms,
            "gpgpu_n_clusters": ctx.throughput_sms,
            **_SIM,
        },
        [rate],
        0.0,
        sms == blocks,
        "" if sms == blocks else "blocks shared an SM",
    )
    lat_plan = Plan("compute.arith")
    lat_plan.buf("out", 8 * 32).buf("cyc", 16)
    lat_plan.launch(
        f"lat_{key}",
        1,
        32,
        [_arg(a), _arg(b), ("i32", n_lat), _arg(magic), ("buf", "out"), ("buf", "cyc")],
    )
    lat_plan.dump("cyc")
    lres = ctx.run(f"compute.{key}", lat_plan, ONE_SM)
    body, overhead = (int(v) for v in lres.array("cyc", np.int64)[:2])
    value = (body - overhead) / (64 * n_lat)
    lat = Measurement(
        f"{_short(key)}_latency",
        value,
        "cycles",
        {"instruction": TYPES[key][2], "chain_length": 64 * n_lat, **_SIM},
        [value],
        0.0,
        value > 0,
        "" if value > 0 else "non-positive latency",
    )
    return [tput, lat]


def atomics(ctx: Any, n_lat: int = 64) -> list[Measurement]:
    """``atomic_latency`` (one thread) and ``atomic_throughput_{distinct,same}``."""
    from hilsim.microbench.simsuite import ONE_SM  # noqa: PLC0415

    plan = Plan("atomics.atomic")
    plan.buf("data", 4).buf("out", 24)
    plan.launch("atomic_lat", 1, 1, [("buf", "data"), ("u32", 0), ("i32", n_lat), ("buf", "out")])
    plan.dump("data").dump("out")
    res = ctx.run("atomics.latency", plan, ONE_SM)
    body, overhead, last = (int(v) for v in res.array("out", np.int64)[:3])
    ok = int(res.array("data", np.uint32)[0]) == n_lat and last == n_lat - 1
    value = (body - overhead) / n_lat
    out = [
        Measurement(
            "atomic_latency",
            value,
            "cycles",
            {"instruction": "atom.global.add.u32", "chain_length": n_lat, **_SIM},
            [value],
            0.0,
            ok,
            "" if ok else "counter does not equal the number of atomics",
        )
    ]
    block = 256
    blocks = ctx.throughput_sms * 2
    threads = blocks * block
    mhz = float(ctx.facts["max_sm_clock_mhz"])
    for same in (False, True):
        n = 4 if same else 16
        tplan = Plan("atomics.atomic")
        tplan.buf("data", 4 * (1 if same else threads))
        tplan.launch(
            "atomic_tput", blocks, block, [("buf", "data"), ("i32", n), ("i32", 1 if same else 0)]
        )
        tplan.dump("data")
        tres = ctx.run("atomics.throughput", tplan, _opts(ctx))
        data = tres.array("data", np.uint32)
        expected = (threads * n) & 0xFFFFFFFF if same else n
        good = bool(np.all(data == expected))
        cycles = tres.kernel_cycles[0]
        per_clk = threads * n / cycles
        name = "atomic_throughput_same" if same else "atomic_throughput_distinct"
        out.append(
            Measurement(
                name,
                per_clk * mhz * 1e6,
                "atomics/s",
                {
                    "instruction": "red.global.add.u32",
                    "threads": threads,
                    "per_thread": n,
                    "atomics_per_clk": per_clk,
                    "bytes_per_clk": per_clk * 4,
                    "kernel_cycles": cycles,
                    "sm_clock_mhz": mhz,
                    "gpgpu_n_clusters": ctx.throughput_sms,
                    "timer": "simulated cycles per kernel",
                    **_SIM,
                },
                [per_clk * mhz * 1e6],
                0.0,
                good,
                "" if good else "counters do not equal the number of updates",
            )
        )
    return out


def onchip(ctx: Any, which: str, reps: int = 4) -> list[Measurement]:
    """``l1_bandwidth`` / ``shared_bandwidth`` (B/clk/SM) with the suite's kernels."""
    from hilsim.microbench.bandwidth import SHARED_VECS, onchip_expected  # noqa: PLC0415

    block = 1024
    blocks = ctx.throughput_sms
    vecs = 1024 if which == "l1" else SHARED_VECS
    per_thread = np.arange(block)[:, None] + block * np.arange(max(1, vecs // block))[None, :]
    plan = Plan("bandwidth.onchip")
    plan.buf("out", 4 * blocks * block).buf("rec", 24 * blocks)
    if which == "l1":
        src = (np.arange(4 * vecs * blocks, dtype=np.uint32) % np.uint32(4 * vecs)).astype("<u4")
        plan.buf("src", src.nbytes).data("src", src)
        plan.launch(
            "l1_read",
            blocks,
            block,
            [("buf", "src"), ("i32", vecs), ("i32", reps), ("buf", "out"), ("buf", "rec")],
        )
        expected = onchip_expected(per_thread, reps + 1)
    else:
        plan.launch("shared_read", blocks, block, [("i32", reps), ("buf", "out"), ("buf", "rec")])
        expected = onchip_expected(per_thread, reps)
    plan.dump("out").dump("rec")
    res = ctx.run(f"bandwidth.{which}", plan, _opts(ctx))
    ok = bool(np.all(res.array("out", np.uint32).reshape(blocks, block) == expected[None, :]))
    rate, sms = per_sm_rate(res.array("rec", np.int64).reshape(-1, 3), reps * vecs * 16)
    return [
        Measurement(
            "l1_bandwidth" if which == "l1" else "shared_bandwidth",
            rate,
            "bytes/clk/SM",
            {
                "access": "ld.global.ca.v4.u32" if which == "l1" else "ld.shared.v4.u32",
                "region_bytes_per_block": vecs * 16,
                "reps": reps,
                "blocks": blocks,
                "threads_per_block": block,
                "sms_seen": sms,
                "gpgpu_n_clusters": ctx.throughput_sms,
                **_SIM,
            },
            [rate],
            0.0,
            ok,
            "" if ok else "checksum mismatch",
        )
    ]


def l2_bandwidth(ctx: Any, footprint: int = 256 << 10, reps: int = 2) -> list[Measurement]:
    """``l2_bandwidth`` (bytes/clk, on ``throughput_sms`` SMs): ``grid_read_cg`` of an
    L2-resident footprint, second launch timed by the simulator's kernel cycles."""
    block = 256
    grid = ctx.throughput_sms * (int(ctx.facts.get("max_threads_per_sm", 1024)) // block)
    n_vec = footprint // 16 // (grid * block) * (grid * block)
    src = np.arange(4 * n_vec, dtype=np.uint32)
    plan = Plan("bandwidth.grid")
    plan.buf("src", src.nbytes).data("src", src).buf("sum", 8)
    args = [("buf", "src"), ("i64", n_vec), ("i32", reps), ("buf", "sum")]
    plan.launch("grid_read_cg", grid, block, args)  # warm: L2 holds the footprint
    plan.launch("grid_read_cg", grid, block, args)
    plan.dump("sum")
    res = ctx.run("bandwidth.l2", plan, _opts(ctx))
    expected = (2 * reps * int(src.astype(np.uint64).sum())) & ((1 << 64) - 1)
    ok = int(res.array("sum", np.uint64)[0]) == expected
    cycles = res.kernel_cycles[1]
    value = n_vec * 16 * reps / cycles
    return [
        Measurement(
            "l2_bandwidth",
            value,
            "bytes/clk",
            {
                "access": "ld.global.cg.v4.u32",
                "footprint_bytes": n_vec * 16,
                "reps": reps,
                "grid": grid,
                "block": block,
                "kernel_cycles": cycles,
                "gpgpu_n_clusters": ctx.throughput_sms,
                "note": f"whole GPU of {ctx.throughput_sms} SMs (the L2 and memory are the card's)",
                **_SIM,
            },
            [value],
            0.0,
            ok,
            "" if ok else "checksum mismatch",
        )
    ]


def sim_benchmarks(family: str) -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The simulated benchmarks of ``bandwidth``, ``compute`` or ``atomics``."""
    from hilsim.microbench.simsuite import skipped  # noqa: PLC0415

    if family == "compute":
        out: list[tuple[str, Callable[[Any], list[Measurement]]]] = [
            (f"compute.{key}", lambda ctx, key=key: compute_unit(ctx, key)) for key in TYPES
        ]
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
        return [("atomics", atomics)]
    if family == "bandwidth":
        return [
            ("bandwidth.l1_read", lambda ctx: onchip(ctx, "l1")),
            ("bandwidth.shared_read", lambda ctx: onchip(ctx, "shared")),
            ("l2_bandwidth", l2_bandwidth),
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
