"""Progress of a simulator run read from its growing log (``simmodel/gpgpusim/run.py``)."""

from __future__ import annotations

from pathlib import Path

from hilsim.simmodel.gpgpusim.run import LogFollower

DATA = Path(__file__).parent / "data" / "gpgpusim"
FULL = DATA / "transformer_step1.SM7_QV100-4sm.log"


def test_follower_counts_kernels_and_cycles_across_cut_reads(tmp_path: Path) -> None:
    """The real 29-kernel log appended in pieces cut mid-line: every kernel counted once
    and the last gpu_tot_sim_cycle read (mutant: counting the cut tail twice, or reading
    the whole file each time, gives more than 29)."""
    data = FULL.read_bytes()
    log = tmp_path / "sim.log"
    log.write_bytes(b"")
    follower = LogFollower(log)
    assert follower.poll() == (0, 0.0)
    step = 7919  # cuts lines anywhere
    seen = []
    for start in range(0, len(data), step):
        with log.open("ab") as handle:
            handle.write(data[start:start + step])
        seen.append(follower.poll())
    kernels, cycles = seen[-1]
    assert kernels == data.count(b"\nkernel_name = ") + data.startswith(b"kernel_name = ")
    assert kernels == 29
    assert cycles == 75106.0  # the log's last gpu_tot_sim_cycle line
    assert [k for k, _ in seen] == sorted(k for k, _ in seen)  # never goes back
    assert LogFollower(tmp_path / "missing.log").poll() == (0, 0.0)
