"""Names of the Nsight Compute metrics that the GPU host collects and the analyses read.

This module is the contract between the detailed profiling level (``agent/ncu.py``, which
asks ``ncu --metrics`` for them) and the sampling methods that read them from a bundle's
``metrics.parquet`` (PKA's principal kernel selection, TBPoint), where a metric column is
named exactly as Nsight Compute names it (``docs/architecture.md``, "Contracts").
"""

from __future__ import annotations

#: PKA Table 2 (Avalos Baddouh et al., MICRO 2021, section 3.1): the microarchitecture-
#: agnostic characteristics PKA's selection reduces with PCA.
TABLE2_METRICS: tuple[str, ...] = (
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",  # coalesced global loads
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",  # coalesced global stores
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",  # coalesced local loads
    "smsp__inst_executed_op_global_ld.sum",  # thread global loads
    "smsp__inst_executed_op_global_st.sum",  # thread global stores
    "smsp__inst_executed_op_local_ld.sum",  # thread local loads
    "smsp__inst_executed_op_shared_ld.sum",  # thread shared loads
    "smsp__inst_executed_op_shared_st.sum",  # thread shared stores
    "smsp__sass_inst_executed_op_global_atom.sum",  # thread global atomics
    "smsp__inst_executed.sum",  # instructions
    "smsp__thread_inst_executed_per_inst_executed.ratio",  # divergence efficiency
    "launch__grid_size",  # thread blocks
)
#: thread blocks of a launch (derivable from the launch's grid when ncu did not record it)
GRID_SIZE = "launch__grid_size"
#: a launch's elapsed GPU cycles
CYCLES = "gpu__cycles_elapsed.max"

__all__ = ["CYCLES", "GRID_SIZE", "TABLE2_METRICS"]
