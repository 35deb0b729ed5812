"""Bandwidth, compute and atomics on a simulated card (issue 12, part 2; Accel-Sim
Section II-C: ``MaxFlops_*``, ``shared_bw``, ``l1_bw``, ``l2_bw``, ``mem_bw``,
``atomic_add_bw*``).

See :mod:`hilsim.simmodel.gpgpusim.simsuite` for the backend's conventions. The suite's kernels
(the CuPy suite's text, :mod:`hilsim.simmodel.gpgpusim.simhost`) run on a *slice* of the card so
that each simulation takes seconds to a few minutes on one CPU core:

* **Per-SM rates on** ``SimContext.throughput_sms`` **SMs** (``-gpgpu_n_clusters``, 2 by
  default): compute throughput (flop/clk/SM) and L1/shared bandwidth (B/clk/SM) are
  per-SM quantities, timed inside the kernel (``%clock`` spans grouped by ``%smid``,
  :func:`hilsim.microbench._gpu.per_sm_rate`), so they need no scaling. The grids are the
  CuPy suite's per SM (full occupancy); only the repetition counts are shorter (the
  simulator has no noise to average).
* **DRAM bandwidth on one memory channel** (``-gpgpu_n_mem 1``, 2 SMs, linear partition
  indexing because IPOLY needs 16/32/64 L2 banks): GPGPU-Sim's channels are independent
  and addresses are interleaved over them, so the card's bandwidth is the channel's
  times ``-gpgpu_n_mem``. The value is that scaled figure; ``params`` give the slice,
  the factor and the unscaled GB/s. Cold L2 (``-gpgpu_perf_sim_memcpy 0``): one read
  pass misses everywhere. Write and copy: ``grid_write`` / ``grid_copy`` over 512 KiB
  (at least twice the slice's L2), the second of two launches timed (write-back L2).
* **L2 bandwidth** on the same one-channel slice (its 2 L2 banks), read 8 times after
  a warm pass, scaled by the channel count as DRAM is (bytes per core clock, whole GPU).
* **Atomic throughput** on 2 SMs, unscaled: the rate of the simulated slice (the
  same-address rate is one L2 bank's whatever the SM count; the distinct-address rate
  grows with SMs), in ``params["atomics_per_clk"]``. ``red`` is rewritten to ``atom``
  for this backend (:func:`hilsim.simmodel.gpgpusim.simhost.sim_kernel_text`, with its timing
  caveat).

Skipped with a reason: tensor cores (GPGPU-Sim's PTX lexer knows ``wmma.*`` only, not
``mma``: the suite's ``mma.sync`` is a syntax error there, then an assertion abort).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench._gpu import per_sm_rate
from hilsim.microbench.bandwidth import SHARED_VECS, onchip_expected
from hilsim.microbench.compute import TYPES, _operands, _short
from hilsim.simmodel.gpgpusim.simhost import Plan

from hilsim.core.measurement import Measurement

_SIM = {"backend": "gpgpusim", "clock": "%clock (simulated core cycles)"}
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


def _arg(value: Any) -> tuple[str, Any]:
    """A numpy scalar as a plan argument (floats by their bits)."""
    if isinstance(value, np.float32):
        return ("f32", float(value))
    if isinstance(value, np.float64):
        return ("f64", float(value))
    if isinstance(value, np.uint32):
        return ("u32", int(value))
    return ("i32", int(value))


def slice_options(ctx: Any, channels: int | None = None) -> dict[str, str]:
    """Simulator options of a throughput slice: ``ctx.throughput_sms`` SMs, optionally
    ``channels`` memory channels (then linear partition indexing)."""
    per_cluster = int(float(ctx.card.option("-gpgpu_n_cores_per_cluster", "1")))
    opts = {
        "-gpgpu_n_clusters": str(max(1, ctx.throughput_sms // per_cluster)),
        "-gpgpu_kernel_launch_latency": "0",
        "-gpgpu_perf_sim_memcpy": "0",
    }
    if channels is not None:
        opts["-gpgpu_n_mem"] = str(channels)
        opts["-gpgpu_memory_partition_indexing"] = "0"
    return opts


def _sms(ctx: Any) -> int:
    per_cluster = int(float(ctx.card.option("-gpgpu_n_cores_per_cluster", "1")))
    return max(1, ctx.throughput_sms // per_cluster) * per_cluster


def _threads_per_sm(ctx: Any) -> int:
    return int(ctx.facts.get("max_threads_per_sm") or 2048)


def _slice_params(ctx: Any, **extra: Any) -> dict[str, Any]:
    return {**_SIM, "sms_simulated": _sms(ctx), "sm_count": ctx.facts.get("sm_count"), **extra}


# --- compute ---------------------------------------------------------------------------


def unit_latency(
    ctx: Any, key: str, n_lat: int = 2, options: dict[str, str] | None = None
) -> list[Measurement]:
    """``{type}_latency``: one warp, one dependent chain of 64 x ``n_lat`` operations
    (``options``: card overrides on top of the one-SM run's)."""
    from hilsim.simmodel.gpgpusim.simsuite import ONE_SM  # noqa: PLC0415

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
    res = ctx.run(f"compute.{key}", plan, {**ONE_SM, **(options or {})})
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


def _tput_run(ctx: Any, key: str, n: int) -> tuple[float, int, float, int]:
    """One simulated ``tput_{key}`` launch: (flop/clk/SM, SMs seen, longest SM span, blocks)."""
    ops = TYPES[key][3]
    block = 256
    blocks = _sms(ctx) * max(1, _threads_per_sm(ctx) // block)
    a, b, magic = _operands(key)
    plan = Plan("compute.arith")
    plan.buf("out", 8 * blocks * block).buf("rec", 8 * 3 * blocks)
    plan.launch(
        f"tput_{key}",
        blocks,
        block,
        [_arg(a), _arg(b), ("i32", n), _arg(magic), ("buf", "out"), ("buf", "rec")],
    )
    plan.dump("rec")
    res = ctx.run(f"compute.{key}.throughput", plan, slice_options(ctx))
    rec = res.array("rec", np.int64).reshape(-1, 3)
    value, seen = per_sm_rate(rec, float(n * 16 * 8 * block * ops))
    span = float(
        max(
            rec[rec[:, 0] == sm, 2].max() - rec[rec[:, 0] == sm, 1].min()
            for sm in np.unique(rec[:, 0])
        )
    )
    return float(value), seen, span, blocks


def unit_throughput(ctx: Any, key: str, target_cycles: float = 24000) -> list[Measurement]:
    """``{type}_throughput``: the suite's ``tput_{key}`` at full occupancy on the slice.

    Every thread runs ``n`` x 16 x 8 independent multiply-adds; flop per SM clock from
    the per-block ``%clock`` spans grouped by ``%smid`` (as the CuPy suite). As the CuPy
    suite sizes ``n`` to a target time, a pilot with ``n = 1`` sizes ``n`` to about
    ``target_cycles`` per SM (the pilot is kept when it is already half as long).
    """
    n = 1
    value, seen, span, blocks = _tput_run(ctx, key, n)
    if np.isfinite(value) and 0 < span < target_cycles / 2:
        n = int(min(16, max(2, round(target_cycles / span))))
        value, seen, span, blocks = _tput_run(ctx, key, n)
    ok = seen == _sms(ctx) and np.isfinite(value)
    params = _slice_params(
        ctx,
        instruction=TYPES[key][2],
        ops_per_instruction=TYPES[key][3],
        chains_per_thread=8,
        blocks=blocks,
        threads_per_block=256,
        iterations=n,
        span_cycles=span,
        sms_seen=seen,
        scaling="none (per-SM rate)",
    )
    return [
        Measurement(
            f"{_short(key)}_throughput",
            value if ok else None,
            "flop/clk/SM",
            params,
            [value] if ok else [],
            0.0,
            bool(ok),
            "" if ok else f"blocks ran on {seen} SMs, expected {_sms(ctx)}",
        )
    ]


# --- on-chip bandwidth -------------------------------------------------------------------


def onchip_bandwidth(ctx: Any, which: str, reps: int = 48) -> list[Measurement]:
    """``l1_bandwidth`` / ``shared_bandwidth`` (B/clk/SM): the suite's ``l1_read`` /
    ``shared_read`` at full occupancy on the slice, ``reps`` passes over the region."""
    threads = _threads_per_sm(ctx)
    block = 1024 if threads >= 1024 else threads
    blocks = _sms(ctx) * max(1, threads // block)
    vecs = 1024 if which == "l1" else SHARED_VECS
    per_thread = np.arange(block)[:, None] + block * np.arange(max(1, vecs // block))[None, :]
    plan = Plan("bandwidth.onchip")
    plan.buf("out", 4 * blocks * block).buf("rec", 8 * 3 * blocks)
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
    name = "l1_bandwidth" if which == "l1" else "shared_bandwidth"
    res = ctx.run(f"bandwidth.{which}", plan, slice_options(ctx))
    got = res.array("out", np.uint32).reshape(blocks, block)
    checksum = bool(np.all(got == expected[None, :]))
    value, seen = per_sm_rate(res.array("rec", np.int64).reshape(-1, 3), reps * vecs * 16)
    ok = checksum and seen == _sms(ctx) and np.isfinite(value)
    params = _slice_params(
        ctx,
        access="ld.global.ca.v4.u32" if which == "l1" else "ld.shared.v4.u32",
        region_bytes_per_block=vecs * 16,
        reps=reps,
        blocks=blocks,
        threads_per_block=block,
        sms_seen=seen,
        scaling="none (per-SM rate)",
    )
    note = "" if ok else ("checksum mismatch" if not checksum else f"ran on {seen} SMs")
    return [
        Measurement(
            name,
            float(value) if ok else None,
            "bytes/clk/SM",
            params,
            [float(value)] if ok else [],
            0.0,
            bool(ok),
            note,
        )
    ]


# --- L2 and DRAM on a one-channel slice -----------------------------------------------------


def _channels(ctx: Any) -> int:
    return int(float(ctx.card.option("-gpgpu_n_mem", "8")))


def _grid_read(
    ctx: Any, bench: str, op: str, n_bytes: int, reps: int, warm: bool
) -> tuple[float, bool, dict[str, Any]]:
    """Simulate ``grid_read_{op}`` on the one-channel slice: (bytes per core clock of the
    slice, checksum ok, params). Timed by the simulator's cycle count of the timed launch
    (``-gpgpu_kernel_launch_latency 0``)."""
    block = 256
    grid = _sms(ctx) * max(1, _threads_per_sm(ctx) // block)
    n_vec = max(grid * block, n_bytes // 16 // (grid * block) * (grid * block))
    src = np.arange(4 * n_vec, dtype=np.uint32).astype("<u4")
    plan = Plan("bandwidth.grid")
    plan.buf("src", src.nbytes).data("src", src).buf("sum", 8)
    if warm:
        plan.buf("warm", 8)
        plan.launch(
            f"grid_read_{op}",
            grid,
            block,
            [("buf", "src"), ("i64", n_vec), ("i32", 1), ("buf", "warm")],
        )
    timed = plan.launch(
        f"grid_read_{op}",
        grid,
        block,
        [("buf", "src"), ("i64", n_vec), ("i32", reps), ("buf", "sum")],
    )
    plan.dump("sum")
    res = ctx.run(bench, plan, slice_options(ctx, channels=1))
    expected = (reps * int(src.astype(np.uint64).sum())) & _MASK64
    ok = int(res.array("sum", np.uint64)[0]) == expected
    cycles = res.kernel_cycles[timed]
    per_clk = n_vec * 16 * reps / cycles
    params = _slice_params(
        ctx,
        access=f"ld.global.{op}.v4.u32",
        footprint_bytes=n_vec * 16,
        reps=reps,
        grid=grid,
        block=block,
        warm_pass=warm,
        mem_channels_simulated=1,
        mem_channels=_channels(ctx),
        slice_cycles=cycles,
        slice_bytes_per_clk=per_clk,
        timer="simulated cycles of the timed launch (GPGPU-Sim statistics)",
    )
    return per_clk, ok, params


def _dram_measurement(
    ctx: Any, name: str, per_clk: float, ok: bool, note: str, params: dict[str, Any]
) -> Measurement:
    """A DRAM bandwidth measurement from a one-channel slice's bytes per core clock."""
    mhz = float(ctx.facts["max_sm_clock_mhz"])
    chans = _channels(ctx)
    slice_gbs = per_clk * mhz * 1e6 / 1e9
    value = slice_gbs * chans
    peak = ctx.facts.get("peak_dram_gbs")
    params.update(
        slice_bytes_per_clk=per_clk,
        slice_gbs=slice_gbs,
        scaling=f"x {chans} memory channels (-gpgpu_n_mem): channels are independent",
        sm_clock_mhz=mhz,
        clock_source="card config -gpgpu_clock_domains",
        bytes_per_clk=per_clk * chans,
        bytes_per_clk_per_sm=per_clk * chans / float(ctx.facts["sm_count"]),
        peak_gbs=peak,
        achieved_fraction=value / peak if peak else None,
        cold="-gpgpu_perf_sim_memcpy 0 (L2 cold after the copies)",
    )
    return Measurement(name, value, "GB/s", params, [value], 0.0, ok, "" if ok else note)


def dram_read(ctx: Any, n_bytes: int = 2 << 20) -> list[Measurement]:
    """``dram_read_bandwidth`` (GB/s): one cold read pass on one channel x channels."""
    per_clk, ok, params = _grid_read(ctx, "bandwidth.dram", "ca", n_bytes, 1, warm=False)
    return [_dram_measurement(ctx, "dram_read_bandwidth", per_clk, ok, "checksum mismatch", params)]


def dram_write_copy(ctx: Any, n_bytes: int = 512 << 10) -> list[Measurement]:
    """``dram_write_bandwidth`` / ``dram_copy_bandwidth`` (GB/s) on the one-channel slice.

    The suite's ``grid_write`` (fills ``n_bytes``) and ``grid_copy`` (a cold source of
    ``n_bytes`` into another buffer; read + write bytes counted), each launched twice and
    the second launch timed by its simulated cycles: L2 is write-back, so a single
    launch would end with up to the slice's L2 of dirty lines not yet in DRAM (measured:
    1.13 x the peak for one 1 MiB write on the QV100 slice). In the second launch the
    previous launch's dirty lines (the footprint is at least twice the slice's L2) are
    written back while its own stay: DRAM traffic = the bytes counted, as the CuPy
    suite's batches of launches. Validation: the destination holds the written value /
    the source.
    """
    block = 256
    grid = _sms(ctx) * max(1, _threads_per_sm(ctx) // block)
    # the write-back argument needs a footprint of at least twice the slice's L2
    slice_l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20)) // _channels(ctx)
    n_vec = max(grid * block, max(n_bytes, 2 * slice_l2) // 16)
    value = 0x5A5A5A5A
    src = np.arange(4 * n_vec, dtype=np.uint32).astype("<u4")
    plan = Plan("bandwidth.grid")
    plan.buf("dst_w", 16 * n_vec).buf("src_c", 16 * n_vec).data("src_c", src)
    plan.buf("dst_c", 16 * n_vec)
    write = [("buf", "dst_w"), ("i64", n_vec), ("u32", value)]
    copy = [("buf", "src_c"), ("buf", "dst_c"), ("i64", n_vec)]
    w = [plan.launch("grid_write", grid, block, write) for _ in range(2)][-1]
    c = [plan.launch("grid_copy", grid, block, copy) for _ in range(2)][-1]
    plan.dump("dst_w").dump("dst_c")
    res = ctx.run("bandwidth.dram_write_copy", plan, slice_options(ctx, channels=1))
    out = []
    for name, idx, ok, factor in (
        ("dram_write_bandwidth", w, bool(np.all(res.array("dst_w", np.uint32) == value)), 1),
        ("dram_copy_bandwidth", c, bool(np.array_equal(res.array("dst_c", np.uint32), src)), 2),
    ):
        cycles = res.kernel_cycles[idx]
        params = _slice_params(
            ctx,
            footprint_bytes=n_vec * 16,
            bytes_counted="read + write" if factor == 2 else "written",
            grid=grid,
            block=block,
            mem_channels_simulated=1,
            mem_channels=_channels(ctx),
            slice_cycles=cycles,
            launches=2,
            timer="simulated cycles of the second launch (GPGPU-Sim statistics)",
        )
        per_clk = factor * n_vec * 16 / cycles
        note = "destination does not hold the expected data"
        out.append(_dram_measurement(ctx, name, per_clk, ok, note, params))
    return out


def l2_bandwidth(ctx: Any, reps: int = 8) -> list[Measurement]:
    """``l2_bandwidth`` (bytes/clk, whole GPU): the one-channel slice's L2 banks x channels.

    Footprint: a quarter of the slice's L2 (its 2 banks; at least one vector per thread),
    warmed by one pass, then read ``reps`` times with ``ld.global.cg`` by the 2 SMs.
    """
    l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    slice_l2 = l2 // _channels(ctx)
    per_clk, ok, params = _grid_read(ctx, "bandwidth.l2", "cg", slice_l2 // 4, reps, warm=True)
    chans = _channels(ctx)
    value = per_clk * chans
    mhz = float(ctx.facts["max_sm_clock_mhz"])
    params.update(
        scaling=f"x {chans} memory channels (2 L2 banks each): banks are independent",
        gbs=value * mhz * 1e6 / 1e9,
        sm_clock_mhz=mhz,
        slice_l2_bytes=slice_l2,
    )
    return [
        Measurement(
            "l2_bandwidth",
            value,
            "bytes/clk",
            params,
            [value],
            0.0,
            ok,
            "" if ok else "checksum mismatch",
        )
    ]


# --- atomics -----------------------------------------------------------------------------


def atomic_latency(ctx: Any, n_lat: int = 64) -> list[Measurement]:
    """``atomic_latency``: one thread, a chain of dependent ``atom.global.add.u32``."""
    from hilsim.simmodel.gpgpusim.simsuite import ONE_SM  # noqa: PLC0415

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


def atomic_throughput(ctx: Any, same: bool) -> list[Measurement]:
    """``atomic_throughput_distinct`` / ``_same``: the suite's ``atomic_tput`` on the slice.

    Value in atomics/s at the card's clock, of the simulated SMs (not scaled);
    ``params["atomics_per_clk"]`` is the rate per core clock from the kernel's cycles.
    """
    block = 256
    grid = _sms(ctx) * max(1, _threads_per_sm(ctx) // block)
    threads = grid * block
    n = 4 if same else 16
    plan = Plan("atomics.atomic")
    plan.buf("data", 4 * (1 if same else threads))
    plan.launch("atomic_tput", grid, block, [("buf", "data"), ("i32", n), ("i32", int(same))])
    plan.dump("data")
    name = "atomic_throughput_same" if same else "atomic_throughput_distinct"
    res = ctx.run(f"atomics.{'same' if same else 'distinct'}", plan, slice_options(ctx))
    data = res.array("data", np.uint32)
    want = (threads * n) & _MASK32 if same else n
    ok = bool(np.all(data == want))
    cycles = res.kernel_cycles[0]
    per_clk = threads * n / cycles
    mhz = float(ctx.facts["max_sm_clock_mhz"])
    value = per_clk * mhz * 1e6
    params = _slice_params(
        ctx,
        instruction="red.global.add.u32 (simulated as atom.global.add.u32 _: simhost)",
        threads=threads,
        per_thread=n,
        address="one word for all threads" if same else "one word per thread",
        atomics_per_s=value,
        atomics_per_clk=per_clk,
        bytes_per_clk=per_clk * 4,
        sm_clock_mhz=mhz,
        clock_source="card config -gpgpu_clock_domains",
        slice_cycles=cycles,
        scaling=f"none: the rate of {_sms(ctx)} simulated SMs",
    )
    return [
        Measurement(
            name,
            value,
            "atomics/s",
            params,
            [value],
            0.0,
            ok,
            "" if ok else "counters do not equal the number of updates",
        )
    ]


def _skipped(name: str, unit: str, why: str) -> Measurement:
    from hilsim.simmodel.gpgpusim.simsuite import skipped  # noqa: PLC0415

    return skipped(name, unit, why)


def sim_benchmarks(family: str) -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The simulated benchmarks of ``bandwidth``, ``compute`` or ``atomics``.

    Benchmark names follow the CuPy suite's (``compute.fp32``, ``bandwidth.shared_read``,
    ...); what is not simulated is a skipped measurement with its reason.
    """
    if family == "compute":
        out: list[tuple[str, Callable[[Any], list[Measurement]]]] = [
            (
                f"compute.{key}",
                lambda ctx, key=key: [*unit_throughput(ctx, key), *unit_latency(ctx, key)],
            )
            for key in TYPES
        ]
        out.append(
            (
                "compute.mma",
                lambda ctx: [
                    _skipped(
                        f"tensor_{w}",
                        u,
                        "GPGPU-Sim's PTX lexer knows wmma.* only, not mma: the suite's "
                        "mma.sync is a syntax error that aborts the simulator",
                    )
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
                lambda ctx: [*atomic_throughput(ctx, False), *atomic_throughput(ctx, True)],
            ),
        ]
    if family == "bandwidth":
        return [
            ("bandwidth.l1_read", lambda ctx: onchip_bandwidth(ctx, "l1")),
            ("bandwidth.shared_read", lambda ctx: onchip_bandwidth(ctx, "shared")),
            ("l2_bandwidth", l2_bandwidth),
            ("bandwidth.dram", lambda ctx: [*dram_read(ctx), *dram_write_copy(ctx)]),
        ]
    raise ValueError(f"unknown family {family!r}")
