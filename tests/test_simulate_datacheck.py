"""A sampled simulation's data check and CPU split, on real fast-forward logs.

The logs (tests/data/gpgpusim/ffchain.*.log, README there) are excerpts of runs of
ffchain.cu on SM7_QV100: ``full`` every launch in performance mode, ``ff`` launch ids 2, 3,
8 in performance mode and the other nine functional; the ``-clock`` pair adds a launch
(uid 7) that writes the simulated clock into the data, so its fast-forwarded run computes
other data from the second copy to the host on.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer.simulate import _skip_path_check, card_notes, data_check, launch_costs
from hilsim.simmodel.gpgpusim.datacheck import (
    before_launch,
    digests_from_record,
    digests_record,
    find_divergences,
    program_outputs,
)
from hilsim.simmodel.gpgpusim.fastforward import _LAUNCH, cpu_per_launch
from hilsim.simmodel.gpgpusim.listrun import (
    FAST_FORWARD,
    SKIP,
)

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data" / "gpgpusim"
REDUCED = {"-gpgpu_n_clusters": "4", "-gpgpu_kernel_launch_latency": "0",
           "-gpgpu_perf_sim_memcpy": "0"}


def _log(name: str) -> str:
    return (DATA / f"ffchain.{name}.SM7_QV100-1sm.log").read_text()


def _run(name: str, log: str, mode: str = FAST_FORWARD, stats: pd.DataFrame | None = None):
    return SimpleNamespace(name=name, warmup="l2-fill", stats=stats,
                           outputs=(program_outputs(log),) if mode == FAST_FORWARD else ())


def _runner(runs: list, mode: str = FAST_FORWARD):
    return SimpleNamespace(mode=mode, runs=runs, work=Path("/tmp/hilsim-simulate-x"))


def _bundle(digest_log: str | None = None, backend: str = "gpgpusim",
            overrides: dict | None = None, metrics: pd.DataFrame | None = None):
    prof = {"backend": backend, "card": "SM7_QV100", "overrides": overrides or {}}
    launches = 12
    if digest_log is not None:
        outputs = program_outputs(digest_log)
        prof["copy_digests"] = digests_record(outputs.digests)
        launches = outputs.launches
    return SimpleNamespace(manifest={"profilers": [prof]}, n_launches=launches,
                           metrics=metrics)


def test_cpu_is_shared_by_the_launches_running_between_two_trace_points() -> None:
    log = _log("ff")
    starts = [m.start() for m in _LAUNCH.finditer(log)]
    assert len(starts) == 12
    # 1 s of start-up, then a point before and after uid 3's line, uid 3 alone for 4 s,
    # then uid 4 starts and everything after shares the last 2.5 s
    trace = [(starts[0] - 1, 1.0), (starts[2] + 5, 2.0), (starts[2] + 10, 6.0),
             (starts[3] + 1, 6.5)]
    per_launch, host = cpu_per_launch(log, trace, total_cpu_s=9.0)
    assert host == pytest.approx(1.25)
    assert per_launch[:3] == pytest.approx([0.25, 0.25, 4.5])
    assert per_launch[3] == pytest.approx(0.25 + 2.5 / 9)
    assert per_launch[4:] == pytest.approx(np.full(8, 2.5 / 9))
    assert per_launch.sum() + host == pytest.approx(9.0)
    # no trace (a run too short for one point): everything is the host's
    none, all_host = cpu_per_launch(log, [], 3.0)
    assert none.tolist() == [0.0] * 12 and all_host == 3.0


def test_the_fast_forwarded_run_matches_the_profiled_full_runs_copies() -> None:
    found = data_check(_runner([_run("warm", _log("ff"))]), _bundle(_log("full")))
    assert found["reference"] == "profiled full run"
    assert found["copies"] == 4 and found["runs"] == 1


def test_a_run_that_computed_other_data_is_refused_naming_the_copy() -> None:
    with pytest.raises(HilsimError, match=r"data check: warm run \(l2-fill\) differs from "
                       r"the profiled full run at copy to the host 2 of 4 .* parted in "
                       r"launch uids 4..7"):
        data_check(_runner([_run("warm", _log("ff-clock"))]), _bundle(_log("full-clock")))


def test_without_profiled_digests_the_runs_are_checked_against_the_first() -> None:
    same = data_check(_runner([_run("warm", _log("ff")), _run("cold", _log("full"))]),
                      _bundle(None))
    assert same["reference"] == "warm run (l2-fill)" and same["runs"] == 1
    with pytest.raises(HilsimError, match=r"cold run \(l2-fill\) differs from the warm run "
                       r"\(l2-fill\)"):
        data_check(_runner([_run("warm", _log("full-clock")), _run("cold", _log("ff-clock"))]),
                   _bundle(None))
    alone = data_check(_runner([_run("warm", _log("ff"))]), None)
    assert alone["reference"] is None and "one run" in alone["why"]


def test_a_run_told_to_stop_is_judged_on_what_it_made_before_its_last_launch() -> None:
    """The stop after the last listed launch lands some time after that launch's
    statistics block: a run may end first, or make further launches and copies before the
    stop. Cut at the launch, its verdict is the same however late the stop came."""
    full, clock = program_outputs(_log("full-clock")), _log("ff-clock")
    ended = program_outputs(clock)  # the program ended before the stop came
    assert find_divergences(full, ended)  # the stamp (uid 7) parts the data at copy 2
    pushes = [m.start() for m in re.finditer("pushing kernel", clock)]
    late = program_outputs(clock[:pushes[9]])  # stopped late: before uid 10 was pushed
    assert len(late.digests) == 2 and late.launches == 9
    for uid in (3, 4, 7):  # a last listed launch before the stamp's effect is copied
        verdicts = {find_divergences(full, before_launch(run, uid)) == []
                    for run in (ended, late)}
        assert verdicts == {True}, uid
    for run in (ended, late):  # after the copy the stamp changed: named either way
        cut = before_launch(run, 9)
        assert not cut.complete and [d.after_uid for d in cut.digests] == [3, 7]
        assert "at copy to the host 2 of 2" in find_divergences(full, cut)[0]


def test_the_digest_record_round_trips_and_a_bad_one_is_one_line() -> None:
    digests = program_outputs(_log("full")).digests
    assert digests_from_record(digests_record(digests), "m") == digests
    with pytest.raises(HilsimError, match="m: copy_digests is not a list"):
        digests_from_record([["device-to-host", "many"]], "m")


def test_a_profile_from_another_simulated_card_is_named() -> None:
    assert card_notes(_bundle(overrides=REDUCED), "SM7_QV100", REDUCED) == []
    # the warm-up's own option is simulate's to set, never a difference
    assert card_notes(_bundle(overrides=REDUCED), "SM7_QV100",
                      {**REDUCED, "-gpgpu_perf_sim_memcpy": "1"}) == []
    other = card_notes(_bundle(overrides={**REDUCED, "-gpgpu_n_clusters": "2"}),
                       "SM7_QV100", REDUCED)
    assert len(other) == 1 and "-gpgpu_n_clusters 2 vs 4" in other[0]
    card = card_notes(_bundle(overrides=REDUCED), "/x/SM75_RTX2060/gpgpusim.config", REDUCED)
    assert "card SM7_QV100 vs SM75_RTX2060" in card[0]
    assert card_notes(_bundle(backend="cupti"), "SM7_QV100", {}) == []


def test_the_skip_path_is_checked_by_instructions_per_launch() -> None:
    metrics = pd.DataFrame({"launch_id": [0, 1, 2, 3],
                            "smsp__thread_inst_executed.sum": [100.0, 200.0, 300.0, 400.0]})
    stats = pd.DataFrame({"launch_id": [1, 3], "instructions": [200.0, 400.0]})
    ok = _skip_path_check(_runner([_run("warm", "", SKIP, stats)], SKIP),
                          _bundle(metrics=metrics))
    assert ok["launches"] == 2
    bad = stats.assign(instructions=[200.0, 401.0])
    with pytest.raises(HilsimError, match=r"launch 3 executed 401 thread instructions .* "
                       r"but 400 in the profile"):
        _skip_path_check(_runner([_run("warm", "", SKIP, bad)], SKIP), _bundle(metrics=metrics))
    silicon = _skip_path_check(_runner([_run("warm", "", SKIP, bad)], SKIP),
                               _bundle(backend="cupti", metrics=metrics))
    assert silicon["reference"] is None


def test_a_fast_forwarded_log_places_its_kernels_by_uid() -> None:
    from hilsim.simmodel.gpgpusim.simlog import parse_simlog

    ff = parse_simlog(_log("ff"))
    assert ff["launch_id"].tolist() == [2, 3, 8] and ff["uid"].tolist() == [3, 4, 9]
    assert "launch_id" not in parse_simlog(_log("full")).columns  # a full run: by position


def test_chunks_weigh_launches_by_instructions_where_every_launch_is_counted() -> None:
    launches = pd.DataFrame({"duration_ns": [100, 200, 300]})
    counted = pd.DataFrame({"launch_id": [2, 0, 1],
                            "smsp__inst_executed.sum": [5.0, 7.0, 9.0]})
    bundle = SimpleNamespace(launches=launches, n_launches=3, metrics=counted)
    assert launch_costs(bundle).tolist() == [7.0, 9.0, 5.0]  # placed by launch id
    # a detailed level that counted a subset (ncu on silicon): the durations
    bundle.metrics = counted.iloc[:2]
    assert launch_costs(bundle).tolist() == [100.0, 200.0, 300.0]
    bundle.metrics = counted.assign(launch_id=[2, 0, 7])  # an id the profile lacks
    assert launch_costs(bundle).tolist() == [100.0, 200.0, 300.0]
    assert launch_costs(None) is None
