"""Cross-check of the DRAM write bandwidth the suite measures (needs a CUDA GPU).

The suite's ``grid_write`` (one ``st.global.v4.u32`` per thread and iteration, grid-stride)
is timed beside the driver's own fill (``cudaMemsetAsync``) and copy
(``cudaMemcpyAsync`` device to device) and beside ``grid_write`` at other grid shapes,
on the same 512 MiB buffer, so a low figure can be told apart from a slow kernel:
``python dram_write_check.py`` prints one line per variant (GB/s of bytes written; the
copy counts read + written).
"""

from __future__ import annotations

import numpy as np


def main() -> None:
    import cupy as cp
    from hilsim.microbench.bandwidth import DRAM_SOURCE
    from hilsim.microbench.gpu import NVRTC_OPTIONS

    module = cp.RawModule(code=DRAM_SOURCE, options=NVRTC_OPTIONS)
    write = module.get_function("grid_write")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    n_bytes = 512 << 20
    n_vec = n_bytes // 16
    dst = cp.empty(n_bytes // 4, dtype=cp.uint32)
    src = cp.ones(n_bytes // 4, dtype=cp.uint32)

    def timed(launch, reps: int = 10) -> float:
        launch()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(reps):
            launch()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / reps * 1e-3

    def grid_write(blocks: int, threads: int) -> None:
        write((blocks,), (threads,), (dst, np.int64(n_vec), np.uint32(0x5A5A5A5A)))

    rows = []
    for per_sm, threads in ((8, 256), (32, 256), (2, 1024), (64, 128)):
        seconds = timed(lambda p=per_sm, t=threads: grid_write(sms * p, t))
        ok = bool((dst == 0x5A5A5A5A).all())
        rows.append((f"grid_write {sms * per_sm}x{threads}", n_bytes / seconds / 1e9, ok))
    for value in (0, 0x5A):
        seconds = timed(lambda v=value: cp.cuda.runtime.memsetAsync(dst.data.ptr, v, n_bytes, 0))
        rows.append((f"cudaMemsetAsync {value:#x}", n_bytes / seconds / 1e9, True))
    seconds = timed(lambda: cp.cuda.runtime.memcpyAsync(
        dst.data.ptr, src.data.ptr, n_bytes, cp.cuda.runtime.memcpyDeviceToDevice, 0))
    rows.append(("cudaMemcpyAsync D2D (read+write)", 2 * n_bytes / seconds / 1e9, True))
    for name, gbs, ok in rows:
        print(f"{name:36s} {gbs:8.1f} GB/s{'' if ok else '  WRONG DATA'}")


if __name__ == "__main__":
    main()
