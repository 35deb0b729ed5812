"""CUDA workloads written for the simulated card (sources shipped as package data).

``transformer_step.cu``: a small transformer inference loop, 1,044 launches of 10 kernels
by default; ``pipeline_step.cu``: an iterative pipeline whose data flow from kernel to
kernel, 420 launches of 7 kernels by default (``README.md`` in this folder).
:func:`build_transformer_step` and :func:`build_pipeline_step` compile them with
:func:`hilsim.simmodel.gpgpusim.compile.compile_cuda` (nvcc <= 11.x, sm_70).
"""

from __future__ import annotations

import os
from pathlib import Path

from hilsim.simmodel.gpgpusim.compile import compile_cuda

TRANSFORMER_STEP = Path(__file__).with_name("transformer_step.cu")
PIPELINE_STEP = Path(__file__).with_name("pipeline_step.cu")
#: the reduced SM7_QV100 the README measures: 4 SMs, no 5,000-cycle launch latency in the
#: kernel durations (a profiler's duration excludes it), functional host->device copies
REDUCED_QV100: dict[str, str] = {
    "-gpgpu_n_clusters": "4",
    "-gpgpu_kernel_launch_latency": "0",
    "-gpgpu_perf_sim_memcpy": "0",
}


def build_transformer_step(out: str | os.PathLike[str]) -> Path:
    """Compile ``transformer_step.cu`` into the executable ``out`` (``-O2``, sm_70)."""
    return compile_cuda(TRANSFORMER_STEP, out, extra_flags=("-O2",))


def build_pipeline_step(out: str | os.PathLike[str]) -> Path:
    """Compile ``pipeline_step.cu`` into the executable ``out`` (``-O2``, sm_70)."""
    return compile_cuda(PIPELINE_STEP, out, extra_flags=("-O2",))


__all__ = ["PIPELINE_STEP", "REDUCED_QV100", "TRANSFORMER_STEP", "build_pipeline_step",
           "build_transformer_step"]
