"""Kernel-heavy CuPy workload for the silicon session: >= 50k short launches.

Five phases, each an NVTX range emitted by the workload itself (``cupy.cuda.nvtx``), each
iteration launching a handful of kernels whose durations differ by phase (vector sizes
2^16..2^22, a 512x512 GEMM through cuBLAS, a CUB sort, an FFT), so the profile has
several kernel classes with distinct duration distributions (what STEM and PKA cluster).

Run: ``python cupy_mix.py [--iterations N] [--seed S]``; prints launches issued and the
checksum of the last phase (the run is deterministic for a seed).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4000,
                        help="iterations per phase (5 phases, about 5 launches each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import cupy as cp  # the workload needs a GPU
    from cupy.cuda import nvtx

    saxpy = cp.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 z",
                                 "z = a * x + y", "hilsim_saxpy")
    rng = cp.random.default_rng(args.seed)
    launches = 0
    start = time.perf_counter()
    checksum = 0.0
    for phase, log2n in enumerate((16, 18, 20, 22, 18)):
        n = 1 << log2n
        x = rng.random(n, dtype=cp.float32)
        y = rng.random(n, dtype=cp.float32)
        gemm = rng.random((512, 512), dtype=cp.float32)
        nvtx.RangePush(f"phase{phase}_n2^{log2n}")
        for i in range(args.iterations):
            y = saxpy(cp.float32(0.5), x, y)
            y *= 0.5
            total = y.sum()
            launches += 3
            if phase == 2 and i % 10 == 0:
                gemm = gemm @ gemm
                gemm /= cp.abs(gemm).max()
                launches += 3
            if phase == 3 and i % 20 == 0:
                cp.sort(x[: 1 << 16])
                launches += 1
            if phase == 4 and i % 10 == 0:
                cp.fft.rfft(x)
                launches += 1
        nvtx.RangePop()
        checksum = float(total)
    cp.cuda.Device().synchronize()
    elapsed = time.perf_counter() - start
    print(f"cupy_mix: about {launches} launches in {elapsed:.2f} s, checksum {checksum:.6g}")


if __name__ == "__main__":
    main()
