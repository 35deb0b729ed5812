"""A numpy stand-in for CuPy that runs the suite's kernels on the host.

Enough of CuPy for :class:`hilsim.microbench.cupy_device.CupyDevice` and the runner:
arrays (numpy arrays with a device pointer, ``get()`` and ``view()``), ``RawModule``s whose
kernels are host emulations of the suite's kernels (results the families validate: chains
followed, checksums summed, counters counted; latencies that step at 256 KiB and 1 MiB),
CUDA events that advance 1 ms per launch, a current stream and a memory pool. Every launch
is logged in :attr:`FakeCupy.launches` as (kernel, grid, block, shared memory, scalar
arguments).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

M32, M64 = (1 << 32) - 1, (1 << 64) - 1


class FakeArray:
    """A device array: a numpy array and a device address."""

    _next_ptr = itertools.count(0x7F00_0000_0000, 1 << 32)

    def __init__(self, a: np.ndarray, ptr: int | None = None) -> None:
        self.a = a
        self.ptr = next(self._next_ptr) if ptr is None else ptr

    @property
    def data(self) -> Any:  # mimics cupy.ndarray.data
        return type("Memory", (), {"ptr": self.ptr})()

    def view(self, dtype: Any) -> FakeArray:
        return FakeArray(self.a.view(dtype), self.ptr)

    def fill(self, value: Any) -> None:
        self.a.fill(value)

    def get(self) -> np.ndarray:
        return self.a.copy()

    def __setitem__(self, idx: Any, values: Any) -> None:
        self.a[_host(idx)] = _host(values)

    def __mod__(self, other: Any) -> FakeArray:
        return FakeArray(self.a % _host(other))

    def __eq__(self, other: Any) -> FakeArray:  # type: ignore[override]
        return FakeArray(self.a == _host(other))

    def all(self) -> FakeArray:
        return FakeArray(np.asarray(self.a.all()))

    def __bool__(self) -> bool:
        return bool(self.a)


def _host(x: Any) -> Any:
    return x.a if isinstance(x, FakeArray) else x


def _v(buf: FakeArray, dtype: Any) -> np.ndarray:
    return buf.a.view(dtype)


def _rec(rec: FakeArray, blocks: int, span: int) -> None:
    r = _v(rec, np.int64)
    for b in range(blocks):
        r[3 * b : 3 * b + 3] = [b % 4, 100 * (b // 4), 100 * (b // 4) + span]


class Kernels:
    """Host emulations of the suite's kernels, by name."""

    def __init__(self) -> None:
        self.globaltimer = 10_000_000

    def chase(
        self, g: int, b: int, start: FakeArray, warm: Any, iters: Any, out: FakeArray
    ) -> None:
        words, base = _v(start, np.uint64), start.ptr
        p, total = base, 0
        for _ in range(int(warm)):
            p = int(words[(p - base) // 8])
            total = (total + p) & M64
        for _ in range(int(iters)):
            p = int(words[(p - base) // 8])
        size = start.a.nbytes
        lat = 30 if size <= (256 << 10) else 200 if size <= (1 << 20) else 500
        _v(out, np.uint64)[:4] = [p, total, int(iters) * lat + 7, 7]

    def flush_read(self, g: int, b: int, buf: FakeArray, words: Any, magic: Any,
                   out: FakeArray) -> None:
        acc = int(np.bitwise_xor.reduce(_v(buf, np.uint32)[: int(words)], initial=0))
        if acc == int(magic):
            _v(out, np.uint32)[0] = acc

    def chase_shared(self, g: int, b: int, nxt: FakeArray, n: Any, iters: Any,
                     out: FakeArray) -> None:
        nodes, base = _v(nxt, np.uint32)[: int(n)], 0x400
        p, total = base, 0
        for _ in range(int(n)):
            p = base + 4 * int(nodes[(p - base) // 4])
            total += p
        for _ in range(int(iters)):
            p = base + 4 * int(nodes[(p - base) // 4])
        _v(out, np.uint64)[:5] = [p, total & M64, int(iters) * 25 + 5, 5, base]

    def l1_read(self, g: int, b: int, src: FakeArray, vecs: Any, reps: Any, out: FakeArray,
                rec: FakeArray) -> None:
        words, vecs, reps = _v(src, np.uint32).astype(np.int64), int(vecs), int(reps)
        o = _v(out, np.uint32)
        for blk in range(g):
            sums = words[blk * 4 * vecs : (blk + 1) * 4 * vecs].reshape(vecs, 4).sum(axis=1)
            for t in range(b):
                o[blk * b + t] = (int(sums[t::b].sum()) * (reps + 1)) & M32
        _rec(rec, g, 1000)

    def shared_read(self, g: int, b: int, reps: Any, out: FakeArray, rec: FakeArray) -> None:
        sums = 16 * np.arange(2048, dtype=np.int64) + 6
        o = _v(out, np.uint32)
        for t in range(b):
            o[t::b][:g] = (int(sums[t::b].sum()) * int(reps)) & M32
        _rec(rec, g, 1000)

    def grid_read(self, g: int, b: int, src: FakeArray, n_vec: Any, reps: Any,
                  total: FakeArray) -> None:
        s = int(_v(src, np.uint32)[: 4 * int(n_vec)].astype(np.uint64).sum())
        t = _v(total, np.uint64)
        t[0] = (int(t[0]) + int(reps) * s) & M64

    def grid_write(self, g: int, b: int, dst: FakeArray, n_vec: Any, value: Any) -> None:
        _v(dst, np.uint32)[: 4 * int(n_vec)] = value

    def grid_copy(self, g: int, b: int, src: FakeArray, dst: FakeArray, n_vec: Any) -> None:
        n = 4 * int(n_vec)
        _v(dst, np.uint32)[:n] = _v(src, np.uint32)[:n]

    def tput(self, g: int, b: int, a: Any, bb: Any, n: Any, magic: Any, out: FakeArray,
             rec: FakeArray) -> None:
        _rec(rec, g, 1000 * int(n))

    def lat(self, g: int, b: int, a: Any, bb: Any, n: Any, magic: Any, out: FakeArray,
            cyc: FakeArray) -> None:
        _v(cyc, np.int64)[:2] = [64 * int(n) * 4 + 5, 5]

    def init(self, g: int, b: int, a: Any, bb: Any, n: Any, magic: Any, out: FakeArray,
             cyc: FakeArray) -> None:
        # every 4th warp works (one scheduler's); they finish one after the other, as a
        # greedy scheduler runs them: warp k stops after (k + 1) x 1024 n cycles
        stamps = _v(cyc, np.int64)
        for k in range(b // 128):
            stamps[2 * k : 2 * k + 2] = [100 + 5 * k, 100 + (k + 1) * int(n) * 1024 + 7]

    def mma_tput(self, g: int, b: int, av: Any, n: Any, magic: Any, out: FakeArray,
                 rec: FakeArray, flops: FakeArray) -> None:
        _rec(rec, g, 1000 * int(n))
        _v(flops, np.int32)[0] = 4096

    def mma_lat(self, g: int, b: int, av: Any, n: Any, magic: Any, out: FakeArray,
                cyc: FakeArray, flops: FakeArray) -> None:
        _v(cyc, np.int64)[:2] = [16 * int(n) * 30 + 5, 5]
        _v(flops, np.int32)[0] = 4096

    def atomic_lat(self, g: int, b: int, data: FakeArray, zero: Any, n: Any,
                   out: FakeArray) -> None:
        d = _v(data, np.uint32)
        d[0] = (int(d[0]) + int(n)) & M32
        _v(out, np.int64)[:3] = [int(n) * 100 + 3, 3, int(n) - 1]

    def atomic_tput(self, g: int, b: int, data: FakeArray, n: Any, same: Any) -> None:
        d = _v(data, np.uint32)
        if int(same):
            d[0] = (int(d[0]) + g * b * int(n)) & M32
        else:
            d[: g * b] = (d[: g * b].astype(np.int64) + int(n)) & M32

    def clock_probe(self, g: int, b: int, n: Any, a: Any, bb: Any, magic: Any, out: FakeArray,
                    rec: FakeArray) -> None:
        r = _v(rec, np.uint64)
        for blk in range(g):
            r[2 * blk : 2 * blk + 2] = [int(n) * 1755, int(n) * 1000]

    def spin_kernel(self, g: int, b: int, ns: Any, done: FakeArray) -> None:
        self.globaltimer += int(ns)
        _v(done, np.uint64)[0] = self.globaltimer

    def empty_kernel(self, g: int, b: int, stamps: FakeArray, i: Any) -> None:
        self.globaltimer += 4000
        now = self.globaltimer
        _v(stamps, np.uint64)[2 * int(i) : 2 * int(i) + 2] = [now, now + 10]

    def get(self, name: str) -> Any:
        for prefix, fn in (("chase_c", self.chase), ("grid_read_", self.grid_read),
                           ("tput_", self.tput), ("lat_", self.lat), ("init_", self.init)):
            if name.startswith(prefix):
                return fn
        return getattr(self, name)


class FakeCupy:
    """The ``cupy`` module as the suite uses it (install it in ``sys.modules``)."""

    __version__ = "0.0-stand-in"
    uint8, uint32, uint64 = np.uint8, np.uint32, np.uint64
    int32, int64, float32, float64 = np.int32, np.int64, np.float32, np.float64

    def __init__(self, free_bytes: int = 64 << 20) -> None:
        self.kernels = Kernels()
        self.launches: list[tuple[Any, ...]] = []
        fake = self
        clock = [0.0]

        class Event:
            def record(self) -> None:
                self.t = clock[0]

            def synchronize(self) -> None:
                pass

        class Function:
            def __init__(self, name: str) -> None:
                self.name = name
                self.fn = fake.kernels.get(name)

            def __call__(self, grid: Any, block: Any, args: Any, shared_mem: int = 0) -> None:
                clock[0] += 1.0
                scalars = [a.item() for a in args if isinstance(a, np.generic)]
                fake.launches.append((self.name, tuple(grid), tuple(block), shared_mem, scalars))
                self.fn(int(grid[0]), int(block[0]), *args)

        module = type("Module", (), {"get_function": staticmethod(Function)})()
        stream = type("Stream", (), {"synchronize": lambda self: None})()
        device = type("Device", (), {"__init__": lambda self, i: None,
                                     "__enter__": lambda self: self,
                                     "__exit__": lambda self, *a: False})
        runtime = type("Runtime", (), {"getDeviceCount": staticmethod(lambda: 1),
                                       "memGetInfo": staticmethod(lambda: (free_bytes, 80 << 30))})
        pool = type("Pool", (), {"free_all_blocks": lambda self: None})()
        self.RawModule = lambda code, options=(): module
        self.get_default_memory_pool = lambda: pool
        self.cuda = type("Cuda", (), {
            "Event": Event,
            "get_elapsed_time": staticmethod(lambda a, b: b.t - a.t),
            "get_current_stream": staticmethod(lambda: stream),
            "Device": device,
            "runtime": runtime,
        })

    @staticmethod
    def zeros(n: int, dtype: Any = np.float64) -> FakeArray:
        return FakeArray(np.zeros(n, dtype=dtype))

    @staticmethod
    def arange(n: int, dtype: Any = None) -> FakeArray:
        return FakeArray(np.arange(n, dtype=dtype))

    @staticmethod
    def asarray(values: Any) -> FakeArray:
        return FakeArray(np.array(_host(values)))

    @staticmethod
    def array_equal(a: Any, b: Any) -> bool:
        return bool(np.array_equal(_host(a), _host(b)))


#: device facts of a small GPU (4 SMs, 1 MiB L2) for the stand-in
FACTS = {
    "index": 0, "name": "stand-in", "compute_capability": "9.0", "cc_major": 9, "cc_minor": 0,
    "sm_count": 4, "l2_cache_bytes": 1 << 20, "shared_mem_per_sm_bytes": 228 << 10,
    "max_threads_per_sm": 2048, "max_threads_per_block": 1024, "warp_size": 32,
    "max_sm_clock_mhz": 1980.0, "max_mem_clock_mhz": 2619.0, "memory_bus_width_bits": 5120,
    "peak_dram_gbs": 3352.3,
}
