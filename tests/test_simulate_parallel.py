"""How a launch list splits into parallel chunks, and what a failing chunk does.

The chunk plan (simmodel/gpgpusim/parallel.py) is checked against costs worked out by
hand; the runner's failure path with a stand-in for the simulator process (a chunk that
raises), and the stop condition on a real fast-forwarded log (tests/data/gpgpusim).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hilsim.simmodel.gpgpusim import parallel
from hilsim.simmodel.gpgpusim.datacheck import find_divergences, program_outputs
from hilsim.simmodel.gpgpusim.fastforward import stop_after_launch
from hilsim.simmodel.gpgpusim.parallel import ChunkResult, chunk_tasks, plan_chunks

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data" / "gpgpusim"


def _list(samples: list[int], k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    from hilsim.core.plan import warmup_launches

    return warmup_launches(np.array(samples), k)


def test_chunks_cut_after_a_sample_balance_their_costs_and_carry_the_last_sample() -> None:
    ids, is_sample = _list([10, 20, 30, 40, 50, 60], k=2)
    plan = plan_chunks(ids, is_sample, workers=3, functional_cost=0.01, cpu_factor=2.0)
    for begin, end in plan.bounds:
        assert is_sample[end - 1]  # a chunk ends on a sample: its warm-up stays with it
        assert not is_sample[begin] or begin == 0 or is_sample[begin - 1]
    # by hand (f = 0.01, equal costs): a chunk costs 0.01 x (last id + 1 - performance
    # launches) + performance launches, a later chunk also running the previous chunk's
    # last sample with its 2 warm-up launches. 3 + 2 + 1 samples: 9.22, 0.01 x (51 - 9) + 9
    # = 9.42, 0.01 x (61 - 6) + 6 = 6.55; equal thirds (2 + 2 + 2) would be 6.25, 9.32 and
    # 9.52: the later chunks fast-forward more, so they hold fewer samples
    assert plan.samples == (3, 2, 1)
    assert plan.bounds == ((0, 9), (9, 15), (15, 18)) and plan.starts == (0, 6, 12)
    assert [plan.carried(j) for j in range(3)] == [0, 3, 3]
    assert plan.longest_chunk_cost == pytest.approx(9.42)
    assert plan.chunked_cost == pytest.approx(9.22 + 9.42 + 6.55)
    assert plan.summary()["carried_per_chunk"] == [0, 3, 3]


def test_the_cuts_follow_the_launches_costs() -> None:
    ids, is_sample = _list([10, 20, 30, 40], k=0)
    even = plan_chunks(ids, is_sample, 2, 0.0, 2.0, carry=False)
    assert even.samples == (2, 2)
    # launch 10 costs as much as the three other samples together: it is a chunk alone
    costs = np.ones(41)
    costs[10] = 3.0
    heavy = plan_chunks(ids, is_sample, 2, 0.0, 2.0, launch_costs=costs, carry=False)
    assert heavy.samples == (1, 3)
    assert heavy.longest_chunk_cost == pytest.approx(heavy.chunked_cost / 2)
    # a process's start-up counts once per chunk
    assert plan_chunks(ids, is_sample, 2, 0.0, 2.0, startup_cost=1.5,
                       carry=False).chunked_cost == pytest.approx(4 + 2 * 1.5)


def test_the_cpu_factor_bounds_the_chunks_by_the_cost_model() -> None:
    ids, is_sample = _list([100, 200, 300, 400], k=0)
    # by hand, f = 0.1: one process 0.1 x (401 - 4) + 4 = 43.7; the best two chunks are
    # 3 + 1 samples (the second runs sample 300 again first): 0.1 x (301 - 3) + 3 = 32.8
    # and 0.1 x (401 - 2) + 2 = 41.9, total 74.7 (1.71x)
    two = plan_chunks(ids, is_sample, workers=2, functional_cost=0.1, cpu_factor=1.8)
    assert two.bounds == ((0, 3), (3, 4)) and two.starts == (0, 2)
    assert two.one_process_cost == pytest.approx(43.7)
    assert two.chunked_cost == pytest.approx(74.7)
    assert two.longest_chunk_cost == pytest.approx(41.9)
    # the same at a factor of 1.5: not worth it, one process
    assert len(plan_chunks(ids, is_sample, 2, 0.1, 1.5).bounds) == 1
    # a third chunk would not shorten the longest (the last still fast-forwards 398
    # launches): two are kept even where the CPU allows more
    assert plan_chunks(ids, is_sample, 4, 0.1, 3.0).bounds == two.bounds
    summary = two.summary()
    assert summary["chunks"] == 2 and summary["samples_per_chunk"] == [3, 1]
    assert summary["cpu_estimate_vs_one_process"] == pytest.approx(74.7 / 43.7, abs=1e-3)


def test_one_sample_or_one_worker_is_one_process() -> None:
    ids, is_sample = _list([7], k=3)
    assert len(plan_chunks(ids, is_sample, 8, 0.01, 10.0).bounds) == 1
    ids, is_sample = _list([5, 9, 40], k=0)
    assert plan_chunks(ids, is_sample, 1).bounds == ((0, 3),)
    with pytest.raises(HilsimError, match="empty launch list"):
        plan_chunks(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), 2)


def test_chunk_tasks_list_uids_and_stop_after_their_last() -> None:
    ids, is_sample = _list([10, 20, 30, 40], k=1)
    plan = plan_chunks(ids, is_sample, 2, 0.01, 2.0)
    tasks = chunk_tasks(["./app", "-n", "4"], "SM7_QV100", {"-gpgpu_n_clusters": "4"},
                        ids, plan, fast_forward=True, timeout_s=60)
    # the second chunk runs sample 30 with its warm-up launch first (carried)
    assert [t.launch_ids for t in tasks] == [(9, 10, 19, 20, 29, 30), (29, 30, 39, 40)]
    assert [t.carried for t in tasks] == [0, 2]
    assert tasks[0].list_text.split() == ["10", "11", "20", "21", "30", "31"]  # uid = id + 1
    assert [t.stop_uid for t in tasks] == [31, 41]
    assert tasks[0].env == {"HILSIM_COPY_DIGESTS": "1"}
    skip = chunk_tasks(["./app"], "SM7_QV100", {}, ids, plan, fast_forward=False,
                       timeout_s=60)
    assert skip[1].list_text.split() == ["29", "30", "39", "40"]
    assert skip[1].stop_uid is None and skip[1].env == {"HILSIM_PERF_LAUNCHES": ""}


def test_a_failing_chunk_is_raised_after_the_others_ended(monkeypatch, tmp_path) -> None:
    ids, is_sample = _list([10, 20, 30], k=0)
    plan = plan_chunks(ids, is_sample, 3, 0.0, 3.0, carry=False)
    tasks = chunk_tasks(["./app"], "SM7_QV100", {}, ids, plan, True, 60)
    assert len(tasks) == 3
    finished: list[int] = []

    def stand_in(task, folder=None):
        if task.index == 1:
            raise HilsimError("app on SM7_QV100: simulator killed by SIGSEGV: log x")
        return ChunkResult(task.index, "log", 1.0, 1.0, (), True, {}, "here")

    monkeypatch.setattr(parallel, "run_chunk", stand_in)
    with pytest.raises(HilsimError, match="SIGSEGV"):
        parallel.run_chunks_local(tasks, [tmp_path / str(t.index) for t in tasks],
                                  lambda r: finished.append(r.index))
    assert sorted(finished) == [0, 2]


def test_a_stopped_chunk_compares_its_copies_as_a_prefix() -> None:
    full = program_outputs((DATA / "ffchain.full.SM7_QV100-1sm.log").read_text())
    ff = (DATA / "ffchain.ff.SM7_QV100-1sm.log").read_text()
    cut = ff[:ff.index("kernel_launch_uid = 4")]  # stopped after two copies
    stopped = program_outputs(cut)
    assert len(stopped.digests) < len(full.digests)
    from dataclasses import replace

    assert find_divergences(full, replace(stopped, complete=False)) == []
    assert find_divergences(full, stopped)  # as a finished run it made too few copies


def test_the_stop_waits_for_the_whole_statistics_block(tmp_path) -> None:
    text = (DATA / "ffchain.ff.SM7_QV100-1sm.log").read_bytes()
    log = tmp_path / "sim.log"
    log.write_bytes(b"")
    stop = stop_after_launch(log, 4)
    assert not stop()
    block = text.index(b"kernel_launch_uid = 4")
    end = text.index(b"\n", text.index(b"gpgpu_simulation_time", block))
    log.write_bytes(text[:block + 25])
    assert not stop()  # the block has started, not ended
    log.write_bytes(text[:end])
    assert not stop()  # the closing line is not whole yet
    log.write_bytes(text[:end + 1])
    assert stop()
    other = stop_after_launch(log, 40)
    assert not other()  # a uid the log never reached
