"""Cut a GPGPU-Sim log down to the lines hilsim reads (for tests/data/gpgpusim/).

    python benchmarks/gpgpusim_log_excerpt.py sim.log [--keep REGEX] > excerpt.log

Kept verbatim, in order: the banner, the option lines the log parsers read (clocks,
clusters, DRAM bus), ptxas info and ``pushing kernel`` lines, the program's ``hilsim-*``
marks, the fast-forward lines (simulator patch 0002: the launch list read, each launch's
mode, copy digests, ``cudaLaunch`` lines, the start of each functional launch), every
per-kernel line that :mod:`hilsim.simmodel.gpgpusim.simlog` and
:mod:`hilsim.simmodel.gpgpusim.logprofile` read, the global-access ``TOTAL_ACCESS``
breakdown rows (evidence of their per-stream behaviour) and the end markers. Everything
else (per-SM, per-bank, per-DRAM-channel tables) is left out. Prints the kept/total
line counts on stderr. ``--keep REGEX`` keeps the lines it matches too (a program's own
result lines).
"""

from __future__ import annotations

import re
import sys

KEEP = re.compile(
    r"^(?:\s*\*\*\* GPGPU-Sim Simulator Version"
    r"|-gpgpu_clock_domains |-gpgpu_n_clusters |-gpgpu_n_cores_per_cluster "
    r"|-gpgpu_dram_buswidth |-gpgpu_dram_burst_length "
    r"|GPGPU-Sim PTX: Kernel '|GPGPU-Sim PTX: pushing kernel "
    r"|hilsim-"
    r"|GPGPU-Sim PTX: hilsim fast-forward: |GPGPU-Sim API: hilsim copy digest: "
    r"|GPGPU-Sim PTX: cudaLaunch for |GPGPU-Sim: Performing Functional Simulation"
    r"|kernel_name = |kernel_launch_uid = |kernel_stream_id = "
    r"|gpu_sim_cycle = |gpu_sim_insn = |gpu_ipc = |gpu_tot_sim_cycle = |gpu_tot_sim_insn = "
    r"|gpu_tot_issued_cta = |gpu_occupancy = "
    r"|\s*L1D_total_cache_(?:accesses|misses) = |L2_total_cache_(?:accesses|misses) = "
    r"|total dram (?:reads|writes) = "
    r"|gpgpu_n_(?:tot_w_icount|tot_thrd_icount|load_insn|store_insn|shmem_insn|mem_read_global"
    r"|mem_write_global|mem_read_local|mem_write_local|shmem_bkconflict)\s*= "
    r"|\s*(?:Total_core|L2)_cache_stats_breakdown\[GLOBAL_ACC_[RW]\]\[TOTAL_ACCESS\] = "
    r"|gpgpu_simulation_time = |GPGPU-Sim: \*\*\* exit detected \*\*\*)"
)


def main(path: str, keep: str | None = None) -> None:
    kept = total = 0
    extra = re.compile(keep) if keep else None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            total += 1
            if KEEP.match(line) or (extra is not None and extra.search(line)):
                kept += 1
                sys.stdout.write(line)
    print(f"kept {kept} of {total} lines", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--keep":
        main(args[0], args[2])
    elif len(args) == 1:
        main(args[0])
    else:
        sys.exit("usage: gpgpusim_log_excerpt.py SIM.LOG [--keep REGEX]")
