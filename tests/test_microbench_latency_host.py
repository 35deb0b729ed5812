"""Host side of the pointer chase on the CuPy device with a numpy stand-in for CuPy: the
chain the suite builds on the device is one lap through every node and passes its own
validation."""

from __future__ import annotations

import types

import numpy as np
import pytest
from hilsim.microbench import latency
from hilsim.microbench.cupy_device import CupyDevice

BASE = 0x7F00_0000_0000


class FakeArray(np.ndarray):
    """A numpy array with CuPy's ``.data.ptr`` and ``.get()``."""

    def get(self) -> np.ndarray:
        return np.asarray(self)

    @property
    def data(self):  # noqa: D401  (mimics cupy.ndarray.data)
        return types.SimpleNamespace(ptr=BASE)


def chase(grid, block, args, shared_mem=0):
    """``chase_ca``/``chase_cg`` on the host: 40 cycles per load, 5 overhead."""
    buf, warm, iters, out = args
    p, total = BASE, 0
    for _ in range(int(warm)):  # the kernel's untimed checksum laps
        p = int(buf[(p - BASE) // 8])
        total = (total + p) % (1 << 64)
    for _ in range(int(iters)):  # the timed pure chain
        p = int(buf[(p - BASE) // 8])
    out.view(np.uint64)[:4] = [p, total, 40 * int(iters) + 5, 5]


def flush_read(grid, block, args, shared_mem=0):
    """``flush_read`` on the host: reads every word, writes its one-word result only."""
    buf, words, magic, out = args
    acc = int(np.bitwise_xor.reduce(buf.view(np.uint32)[: int(words)], initial=0))
    if acc == int(magic):
        out.view(np.uint32)[0] = acc


def make_device(kernel=chase, array=FakeArray, flush=flush_read) -> CupyDevice:
    """A CuPy device whose CuPy is numpy and whose module runs ``kernel`` (the chases) and
    ``flush`` (the cold-lap flush)."""
    module = types.SimpleNamespace(
        get_function=lambda name: flush if name == "flush_read" else kernel)
    cp = types.SimpleNamespace(
        zeros=lambda n, dtype: np.zeros(n, dtype=dtype).view(array),
        asarray=np.asarray,
        uint8=np.uint8,
        uint32=np.uint32,
        uint64=np.uint64,
        RawModule=lambda code, options: module,
        get_default_memory_pool=lambda: types.SimpleNamespace(free_all_blocks=lambda: None),
    )
    return CupyDevice(cp=cp, device=0, facts={"l2_cache_bytes": 1 << 20})


@pytest.mark.parametrize("random_order", [True, False])
def test_chain_is_valid_and_overhead_subtracted(random_order) -> None:
    device = make_device()
    m = latency.chase_latency(device, "latency.test", "ca", 8192, 64, random_order=random_order)
    assert m.valid, m.note
    assert m.value == pytest.approx(40.0)
    assert m.params["nodes"] == 128 and m.params["steps"] % 128 == 0


def test_broken_chain_is_reported_invalid(monkeypatch) -> None:
    device = make_device()
    original = latency.single_cycle

    def two_cycles(n, rng):
        nxt = original(n, None)
        nxt[n // 2 - 1] = 0  # close the cycle half way: half the nodes never visited
        return nxt

    monkeypatch.setattr(latency, "single_cycle", two_cycles)
    m = latency.chase_latency(device, "latency.test", "ca", 8192, 64, random_order=False)
    assert not m.valid and "every node" in m.note


def test_cold_chase_is_validated_by_an_untimed_lap(monkeypatch) -> None:
    """A flushed (cold, no warm lap) chase still checks the chain: one extra launch with a
    checksum lap and no timed steps (the timed loop carries no checksum)."""
    device = make_device()
    device.facts["l2_cache_bytes"] = 1024
    original = latency.single_cycle

    def two_cycles(n, rng):
        nxt = original(n, None)
        nxt[n // 2 - 1] = 0
        return nxt

    monkeypatch.setattr(latency, "single_cycle", two_cycles)
    m = latency.chase_latency(device, "dram", "cg", 8192, 64, random_order=False, warm=False,
                              flush_l2=True)
    assert not m.valid and "every node" in m.note


def test_sweep_reaches_eight_times_l2() -> None:
    """The memory plateau gets >= 3 points past 2 x L2."""
    for l2 in (3 << 20, 6 << 20, 50 << 20):
        points = latency.sweep_footprints(l2)
        assert points[-1] >= 7.9 * l2
        assert sum(p > 2.5 * l2 for p in points) >= 3


def test_cold_sweep_points_flush_l2_first(monkeypatch) -> None:
    """Every run past 1.5 x L2 reads the 2 x L2 flush buffer (every word) before its cold
    lap, and nothing writes it but its allocation: a flush that writes leaves L2 dirty."""
    order: list[str] = []
    l2 = 16 << 10

    class Flush(FakeArray):
        def fill(self, value):  # noqa: D401
            order.append("write")

    def logged(grid, block, args, shared_mem=0):
        order.append("cold" if int(args[1]) == 0 and int(args[2]) > 0 else "other")
        chase(grid, block, args)

    def reading(grid, block, args, shared_mem=0):
        buf, words = args[0], int(args[1])
        order.append("read" if 4 * words >= 2 * l2 and buf.nbytes >= 4 * words else "short")
        flush_read(grid, block, args)

    device = make_device(logged, Flush, reading)
    device.facts["l2_cache_bytes"] = l2
    latency.footprint_sweep(device, footprints=[8 << 10, 64 << 10])
    cold = [i for i, e in enumerate(order) if e == "cold"]
    assert cold and all(order[i - 1] == "read" for i in cold)
    assert "write" not in order and "short" not in order


def test_simulated_chases_read_the_slope_of_two_step_counts() -> None:
    """The stop clock does not wait for the last load: a chase of s loads reads
    ``(s - 1) x latency + c``. One count gives ``(63 x 40 + c) / 64``; the slope of two
    counts gives the latency."""
    launches: list[int] = []

    def unwaited(grid, block, args, shared_mem=0):
        chase(grid, block, args)
        iters = int(args[2])
        launches.append(iters)
        args[3].view(np.uint64)[2] = 40 * (iters - 1) + 23  # the last load not waited for

    device = make_device(unwaited)
    ms = {m.name: m for m in latency.chase_latencies(device, steps=64)}
    for name in ("l1_hit_latency", "l2_hit_latency", "dram_latency"):
        assert ms[name].valid and ms[name].value == pytest.approx(40.0), ms[name]
        assert ms[name].params["steps"] == [64, 128]
    assert sorted(set(launches)) == [64, 128]
