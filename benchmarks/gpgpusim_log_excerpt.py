"""Cut a GPGPU-Sim log down to the lines hilsim reads (for tests/data/gpgpusim/).

    python benchmarks/gpgpusim_log_excerpt.py sim.log > excerpt.log

Kept verbatim, in order: the banner, the option lines the log parsers read (clocks,
clusters, DRAM bus), ptxas info and ``pushing kernel`` lines, the program's ``hilsim-*``
marks, every per-kernel line that :mod:`hilsim.simmodel.gpgpusim.simlog` and
:mod:`hilsim.simmodel.gpgpusim.logprofile` read, the global-access ``TOTAL_ACCESS``
breakdown rows (evidence of their per-stream behaviour) and the end markers. Everything
else (per-SM, per-bank, per-DRAM-channel tables) is left out. Prints the kept/total
line counts on stderr.
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


def main(path: str) -> None:
    kept = total = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            total += 1
            if KEEP.match(line):
                kept += 1
                sys.stdout.write(line)
    print(f"kept {kept} of {total} lines", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
