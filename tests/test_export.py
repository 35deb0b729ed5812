"""simmodel.export: kernelslist.g / weights.csv and mapping simulated kernels back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyzer.errors import HilsimError
from analyzer.plan import Plan, samples_frame
from simmodel.export import match_sim_results, write_kernelslist


def _plan(ids, names) -> Plan:
    samples = samples_frame(np.array(ids), np.full(len(ids), 2.0), np.arange(len(ids)))
    samples["name"] = [names[i] for i in samples["launch_id"]]
    return Plan("test", {}, {"n_launches": 10}, [], samples)


NAMES = {i: f"void vecAdd<{i}>(float*)" if i % 2 else "gemm_kernel" for i in range(10)}


def test_kernelslist_in_launch_order(tmp_path):
    plan = _plan([7, 2, 4], NAMES)
    klist, weights = write_kernelslist(plan, tmp_path)
    assert klist.read_text().split() == ["kernel-3.traceg", "kernel-5.traceg", "kernel-8.traceg"]
    table = pd.read_csv(weights)
    assert list(table.columns) == ["launch_id", "trace_file", "weight", "cluster", "name"]
    assert list(table["launch_id"]) == [2, 4, 7]
    klist, _ = write_kernelslist(plan, tmp_path, first_trace_id=11)
    assert klist.read_text().split()[0] == "kernel-13.traceg"


def test_memcpy_lines_are_kept(tmp_path):
    full = tmp_path / "full.g"
    full.write_text("MemcpyHtoD,0x1,8\nkernel-1.traceg\nMemcpyHtoD,0x2,8\nkernel-2.traceg\n"
                    "kernel-3.traceg\n")
    plan = _plan([2], NAMES)
    klist, _ = write_kernelslist(plan, tmp_path / "out", memcpy_from=full)
    assert klist.read_text().split() == ["MemcpyHtoD,0x1,8", "MemcpyHtoD,0x2,8",
                                         "kernel-3.traceg"]
    with pytest.raises(HilsimError, match="kernel-10.traceg"):
        write_kernelslist(_plan([9], NAMES), tmp_path / "o2", memcpy_from=full)


def test_match_by_order_and_names():
    plan = _plan([3, 0], NAMES)
    sim = pd.DataFrame({"sim_launch": [0, 1], "kernel": ["gemm_kernel", "_Z6vecAddILi3EEvPf"],
                        "cycles": [10.0, 20.0]})
    merged = match_sim_results(plan, sim)
    assert list(merged["launch_id"]) == [0, 3]
    assert list(merged["cycles"]) == [10.0, 20.0]
    with pytest.raises(HilsimError, match="simulated kernel 1"):
        match_sim_results(plan, sim.iloc[::-1].assign(sim_launch=[0, 1]))
    with pytest.raises(HilsimError, match="hold 1 kernels"):
        match_sim_results(plan, sim.iloc[:1])
