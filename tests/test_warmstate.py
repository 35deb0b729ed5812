"""Warm-up of sampled launches: the plan's warm-up field, the warm-up windows, and the
placement of each sample between its warm and cold run (``analyzer/warmstate.py``).

The placement is checked on hand cases (each rule with the mutant it catches named) and
on the shipped example's real runs of the STEM plan: the warm run (``l2-fill``), the cold
run and the reference card's full run (``analyzer/examples/simulated-v100``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer.warmstate import (
    STATE_SD_BRACKETED,
    STATE_SD_WARM,
    WARM_EXCESS_CAP,
    WARM_EXCESS_LATENCIES,
    WARM_EXCESS_SHARE,
    colder_than_warm,
    dram_miss_cycles,
    place_samples,
    profiled_misses,
    warmer_than_profile,
)
from hilsim.simmodel.gpgpusim.warmup import cold_options, warm_options

from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.errors import HilsimError
from hilsim.core.plan import (
    Plan,
    Warmup,
    load_plan,
    parse_warmup,
    warmup_launches,
)


def test_warmup_text_round_trips_and_refuses_nonsense() -> None:
    for text in ("none", "l2-fill", "preceding:3", "l2-fill+preceding:2", "auto",
                 "l2-fill+cold-bound"):
        assert parse_warmup(parse_warmup(text).label) == parse_warmup(text)
    assert parse_warmup("bracket") == Warmup(l2_fill=True, cold_bound=True)
    assert parse_warmup("auto").auto and parse_warmup("auto").cold_bound
    assert parse_warmup("L2-Fill + preceding:4") == Warmup(preceding=4, l2_fill=True)
    assert warm_options(parse_warmup("l2-fill")) == {"-gpgpu_perf_sim_memcpy": "1"}
    # the warm run of no fill states the option explicitly (a card may default to 1)
    assert warm_options(parse_warmup("preceding:1")) == {"-gpgpu_perf_sim_memcpy": "0"}
    assert cold_options() == {"-gpgpu_perf_sim_memcpy": "0"}
    for bad in ("warm", "preceding:x", "preceding:-1", "l2-fill+hot", "preceding:1e9",
                "preceding:\u00b2", "preceding:\u0663", "preceding:" + "9" * 5001,
                "preceding:9223372036854775808", "preceding:"):
        with pytest.raises(HilsimError, match="warm-up"):
            parse_warmup(bad)


def test_windows_of_neighbouring_samples_are_merged() -> None:
    every, is_sample = warmup_launches(np.array([10, 2, 12, 30]), 3)
    # 2 -> 0..2 (clipped at 0); 10 -> 7..10; 12 -> 9..12 (shares 9, 10); 30 -> 27..30
    assert every.tolist() == [0, 1, 2, 7, 8, 9, 10, 11, 12, 27, 28, 29, 30]
    assert every[is_sample].tolist() == [2, 10, 12, 30]
    none, mask = warmup_launches(np.array([5, 1]), 0)
    assert none.tolist() == [1, 5] and mask.all()


def test_windows_are_built_as_their_union_whatever_k() -> None:
    """A window longer than the launches before it costs the launches it covers, not K
    (``preceding:10^9`` on a short profile once asked for gigabytes)."""
    import tracemalloc

    tracemalloc.start()
    every, is_sample = warmup_launches(np.array([3, 1000]), 10**9)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert every.tolist() == list(range(1001)) and every[is_sample].tolist() == [3, 1000]
    assert peak < 1 << 20, peak
    rng = np.random.default_rng(7)
    for _ in range(200):  # against the definition: each sample's [id - K, id], clipped at 0
        ids = rng.integers(0, 300, rng.integers(1, 12))
        k = int(rng.integers(1, 40))
        want = sorted({i for s in ids for i in range(max(s - k, 0), s + 1)})
        every, is_sample = warmup_launches(ids, k)
        assert every.tolist() == want and every.dtype == np.int64
        assert every[is_sample].tolist() == sorted(set(ids.tolist()))


def _plan(**extra) -> Plan:
    samples = pd.DataFrame({"launch_id": [1, 4], "weight": [2.0, 3.0], "cluster": [0, 1],
                            "draws": [1, 1]})
    return Plan(method="stem", params={"seed": 0}, source={"n_launches": 6}, clusters=[],
                samples=samples, **extra)


def test_plan_records_its_warmup_and_old_plans_still_read(tmp_path) -> None:
    path = _plan(warmup=parse_warmup("l2-fill+preceding:2")).save(tmp_path / "p.json")
    assert json.loads(path.read_text())["warmup"]["preceding"] == 2
    assert load_plan(path).warmup == Warmup(preceding=2, l2_fill=True)
    old = _plan().save(tmp_path / "old.json")
    assert "warmup" not in json.loads(old.read_text())
    assert load_plan(old).warmup is None
    data = json.loads(path.read_text())
    for bad, match in (({"preceding": -1}, "preceding"), ({"l2_fill": "yes"}, "l2_fill"),
                       ([1], "must be a JSON object")):
        data["warmup"] = bad
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(HilsimError, match=match):
            load_plan(tmp_path / "bad.json")


def _stats(ids, cycles, misses, kernel="k") -> pd.DataFrame:
    return pd.DataFrame({"launch_id": ids, "kernel": kernel, "cycles": cycles,
                         "l2_misses": misses, "instructions": [100.0] * len(ids)})


def test_placement_by_profiled_misses_hand_case() -> None:
    samples = pd.DataFrame({"launch_id": [1, 4, 5], "weight": [2.0, 3.0, 1.0],
                            "cluster": [0, 1, 2]})
    warm = _stats([1, 4, 5], [100.0, 200.0, 300.0], [0.0, 10.0, 50.0])
    cold = _stats([1, 4], [180.0, 260.0], [80.0, 70.0])
    profiled = np.array([20.0, 40.0, 50.0])
    placed = place_samples(samples, warm, cold, profiled, "lts__t_sectors_lookup_miss.sum")
    t = placed.table
    # sample 1: (20 - 0) / (80 - 0) = 0.25 of the way in misses -> sqrt: 0.5 of the way in
    # cycles: 100 + 0.5 * 80 = 140
    # sample 4: (40 - 10) / (70 - 10) = 0.5 -> 0.7071: 200 + 0.7071 * 60 = 242.43
    # sample 5: not run cold: its warm cycles, no state variance
    # (mutants: t from the cold side (m_cold - m_profile) gives 100 + 0.866 * 80 for
    # sample 1 -> caught; linear placement gives 120 -> caught; interpolating misses but
    # not cycles leaves 100 -> caught)
    r = 0.5 ** 0.5
    assert t["cycles"].tolist() == pytest.approx([140.0, 200 + r * 60, 300.0])
    assert t["position"].tolist() == pytest.approx([0.5, r, 0.0])
    var = [80.0**2 / 12 + (STATE_SD_BRACKETED * 140) ** 2,
           60.0**2 / 12 + (STATE_SD_BRACKETED * (200 + r * 60)) ** 2,
           (STATE_SD_WARM * 300) ** 2]
    assert t["state_variance"].tolist() == pytest.approx(var)
    assert placed.state_variance == pytest.approx(4 * var[0] + 9 * var[1] + var[2])
    est = 2 * 140 + 3 * (200 + r * 60) + 300
    assert placed.estimate() == pytest.approx(est)
    assert placed.summary()["state_correction"] == pytest.approx(
        est / (2 * 100 + 3 * 200 + 300) - 1)
    # counters are placed at t, the fraction of the way in misses (the misses themselves
    # land on the profile's)
    assert t["l2_misses"].tolist() == pytest.approx([20.0, 40.0, 50.0])
    assert placed.method == "profile"


def test_placement_clips_and_ignores_a_cold_run_that_missed_no_more() -> None:
    samples = pd.DataFrame({"launch_id": [0, 1], "weight": [1.0, 1.0], "cluster": [0, 1]})
    warm = _stats([0, 1], [100.0, 100.0], [0.0, 30.0])
    cold = _stats([0, 1], [150.0, 90.0], [40.0, 30.0])
    placed = place_samples(samples, warm, cold, np.array([400.0, 60.0]))
    # sample 0: the profile is colder than the cold run: clipped at the cold end
    # sample 1: the cold run missed no more than the warm one: the state did not show
    assert placed.table["cycles"].tolist() == pytest.approx([150.0, 100.0])
    assert placed.table["position"].tolist() == pytest.approx([1.0, 0.0])


def test_samples_left_colder_than_the_profile_are_counted_and_said() -> None:
    """A sample whose warm run misses more than the profile (and is not run cold) is an
    upper bound: counted, its weighted share given, and a note says so (mutants: not
    flagging, or flagging the sample within the tolerance, change the count)."""
    samples = pd.DataFrame({"launch_id": [0, 1, 2, 3], "weight": [2.0, 1.0, 1.0, 1.0],
                            "cluster": [0, 1, 2, 3]})
    warm = _stats([0, 1, 2, 3], [100.0, 200.0, 300.0, 400.0], [50.0, 2.0, 0.0, 10.0])
    cold = _stats([2], [350.0], [40.0])
    # 0: 50 misses where the profile has 0: left colder; 1: 2 over 0, within the
    # tolerance; 2: bracketed by its cold run; 3: as the profile
    placed = place_samples(samples, warm, cold, np.array([0.0, 0.0, 20.0, 10.0]),
                           "dram__sectors_read.sum")
    s = placed.summary()
    assert s["colder_than_profile"] == 1
    assert s["colder_than_profile_share"] == pytest.approx(200.0 / (200 + 200 + 300 + 400))
    assert any("1 samples" in n and "upper bounds" in n for n in s["notes"])
    # both samples that read more than the profile are placed below their warm cycles,
    # the flagged one and the one within the tolerance alike
    assert placed.table["cycles"].tolist()[:2] == pytest.approx(
        [100.0 * (1 - WARM_EXCESS_SHARE / 2), 200.0 * (1 - WARM_EXCESS_SHARE / 2)])
    none_left = place_samples(samples, warm, cold, np.array([60.0, 0.0, 20.0, 10.0]))
    assert none_left.summary()["colder_than_profile"] == 0
    assert none_left.notes == []


def test_samples_reading_more_than_the_profile_are_bracketed_from_below() -> None:
    """A sample kept warm whose warm run read more from DRAM than the profile (any excess,
    inside the tolerance too) lies between ``1 - WARM_EXCESS_SHARE`` of its warm cycles
    and its warm cycles: placed at the middle, with the uniform variance of that range.
    Mutants: no correction (cycles 1000), the correction only past the tolerance (sample
    1 at 400), ``>=`` instead of ``>`` (sample 2, reading as much as the profile, moved),
    the variance of a warm sample for them, or the correction on a bracketed sample
    (sample 3 off its bracket placement) are each caught."""
    samples = pd.DataFrame({"launch_id": [0, 1, 2, 3], "weight": [1.0, 2.0, 1.0, 1.0],
                            "cluster": [0, 1, 2, 3]})
    warm = _stats([0, 1, 2, 3], [1000.0, 400.0, 500.0, 300.0], [512.0, 1.0, 7.0, 30.0])
    cold = _stats([3], [400.0], [100.0])
    placed = place_samples(samples, warm, cold, np.array([0.0, 0.0, 7.0, 25.0]),
                           "dram__sectors_read.sum")
    t = placed.table
    r = WARM_EXCESS_SHARE
    # sample 3 has a cold run: placed in its bracket (clipped at the warm end), not below
    assert t["cycles"].tolist() == pytest.approx(
        [1000 * (1 - r / 2), 400 * (1 - r / 2), 500.0, 300.0])
    var = [(r * 1000) ** 2 / 12 + (STATE_SD_BRACKETED * 1000 * (1 - r / 2)) ** 2,
           (r * 400) ** 2 / 12 + (STATE_SD_BRACKETED * 400 * (1 - r / 2)) ** 2,
           (STATE_SD_WARM * 500) ** 2,
           100.0**2 / 12 + (STATE_SD_BRACKETED * 300) ** 2]
    assert t["state_variance"].tolist() == pytest.approx(var)
    assert placed.state_variance == pytest.approx(var[0] + 4 * var[1] + var[2] + var[3])
    # only sample 0 is past the tolerance: it alone is counted
    assert placed.colder == 1


def test_the_range_below_the_warm_cycles_is_the_cards_dram_miss_latency() -> None:
    """With the card's DRAM miss latency known, a sample that read more than the profile
    lies within ``WARM_EXCESS_LATENCIES`` misses below its warm cycles, at most
    ``WARM_EXCESS_CAP`` of them; the same samples on a card with slower DRAM get a deeper
    range. Mutants: the fixed share whatever the card (both cards alike), no cap (sample
    1 placed 230 below 300), the cap as a floor (``max``: sample 0 at 750), the sample at
    the bottom of its range instead of the middle, or the range's variance missing."""
    samples = pd.DataFrame({"launch_id": [0, 1, 2], "weight": [1.0, 1.0, 1.0],
                            "cluster": [0, 1, 2]})
    warm = _stats([0, 1, 2], [1000.0, 300.0, 500.0], [1.0, 512.0, 7.0])
    profiled = np.array([0.0, 0.0, 7.0])

    def placed_on(miss_cycles: float) -> pd.DataFrame:
        return place_samples(samples, warm, None, profiled, "dram__sectors_read.sum",
                             "l2_misses", miss_cycles).table

    fast, slow = placed_on(100.0), placed_on(400.0)
    d_fast = [WARM_EXCESS_LATENCIES * 100.0, WARM_EXCESS_CAP * 300.0]  # 230, 150 (cap)
    assert d_fast == pytest.approx([230.0, 150.0])
    assert fast["cycles"].tolist() == pytest.approx(
        [1000.0 - d_fast[0] / 2, 300.0 - d_fast[1] / 2, 500.0])
    # slower DRAM: 920 below 1000 is past the cap (500); sample 1 stays at its cap
    d_slow = [WARM_EXCESS_CAP * 1000.0, WARM_EXCESS_CAP * 300.0]
    assert slow["cycles"].tolist() == pytest.approx(
        [1000.0 - d_slow[0] / 2, 300.0 - d_slow[1] / 2, 500.0])
    for table, depth in ((fast, d_fast), (slow, d_slow)):
        c = table["cycles"].to_numpy()
        assert table["state_variance"].tolist() == pytest.approx(
            [depth[0] ** 2 / 12 + (STATE_SD_BRACKETED * c[0]) ** 2,
             depth[1] ** 2 / 12 + (STATE_SD_BRACKETED * c[1]) ** 2,
             (STATE_SD_WARM * 500.0) ** 2])
    # no latency known: the fixed share of the warm cycles, and the note says so
    unknown = place_samples(samples, warm, None, profiled, "dram__sectors_read.sum")
    assert unknown.table["cycles"].tolist()[:2] == pytest.approx(
        [1000 * (1 - WARM_EXCESS_SHARE / 2), 300 * (1 - WARM_EXCESS_SHARE / 2)])
    assert any("latency unknown" in n for n in unknown.notes)
    named = place_samples(samples, warm, None, profiled, "dram__sectors_read.sum",
                          "l2_misses", 100.0)
    assert named.summary()["dram_miss_cycles"] == 100.0
    assert any("1.15 DRAM misses (115 core cycles" in n for n in named.notes)


def test_dram_miss_latency_read_from_real_logs_and_cards() -> None:
    """``-dram_latency`` (core cycles) plus tRCD + CL at the core over the DRAM clock,
    from a real GPGPU-Sim log's option dump (its timing has a space inside) and from card
    files (a quoted timing over two lines; a commented-out timing ignored). Mutants: no
    row read (100), the clock ratio inverted (118.0), the first of two values kept, or
    the commented line read (the H100 card's 37+37) each give another number."""
    data = Path(__file__).parent / "data"
    log = gzip.decompress((data / "gpgpusim/vecadd_chase.SM7_QV100-1sm.log.gz").read_bytes())
    qv100 = 100 + (12 + 12) * 1132.0 / 850.0  # 131.96
    assert dram_miss_cycles(log.decode("utf-8", "replace")) == pytest.approx(qv100)
    shipped = (data / "accelsim/SM7_QV100.gpgpusim.config").read_text()
    assert dram_miss_cycles(shipped) == pytest.approx(qv100)
    # tRCD and CL apart (every shipped card has them equal): the row read is their sum
    differ = shipped + ("\n-gpgpu_dram_timing_opt "
                        "nbk=16:CCD=1:RRD=3:RCD=12:RAS=28:RP=12:RC=40:CL=20\n")
    assert dram_miss_cycles(differ) == pytest.approx(100 + (12 + 20) * 1132.0 / 850.0)
    # the H100 card runs GPGPU-Sim's simple DRAM model: a miss waits -dram_latency alone
    # (the mutant that adds its 19 + 19 DRAM cycles gives 218.2)
    h100 = (Path(__file__).parents[1] / "simmodel/gpgpusim/cards/SM90_H100/gpgpusim.config")
    assert dram_miss_cycles(h100.read_text()) == pytest.approx(194.0)
    assert dram_miss_cycles(h100.read_text() + "\n-gpgpu_simple_dram_model 0\n") == \
        pytest.approx(194 + (19 + 19) * 1980 / 3106)
    # a drawn card appends its values after the base's: the last one is the simulator's
    assert dram_miss_cycles(shipped + "\n-dram_latency 217\n") == pytest.approx(qv100 + 117)
    assert dram_miss_cycles(shipped + "\n#-gpgpu_dram_timing_opt RCD=99:CL=99\n") == \
        pytest.approx(qv100)
    assert dram_miss_cycles("-dram_latency 100\n") is None
    assert dram_miss_cycles(shipped.replace("-gpgpu_clock_domains", "#")) is None


def test_pilot_placement_without_profiled_misses() -> None:
    samples = pd.DataFrame({"launch_id": [0, 1, 2], "weight": [1.0, 1.0, 1.0],
                            "cluster": [0, 1, 2]})
    warm = pd.DataFrame({"launch_id": [0, 1, 2], "kernel": ["a", "a", "b"],
                         "cycles": [100.0, 200.0, 100.0], "l2_misses": [0.0, 0.0, 0.0]})
    cold = pd.DataFrame({"launch_id": [0], "kernel": ["a"], "cycles": [150.0],
                         "l2_misses": [9.0]})
    placed = place_samples(samples, warm, cold, None)
    # kernel a's ratio 1.5 predicts launch 1's cold cycles (300); kernel b has no pilot
    # sample: the pooled ratio (1.5); every sample at the midpoint
    assert placed.method == "pilot"
    assert placed.table["cycles"].tolist() == pytest.approx([125.0, 250.0, 125.0])
    cycles = [125.0, 250.0, 125.0]
    assert placed.table["state_variance"].tolist() == pytest.approx(
        [g**2 / 12 + (STATE_SD_BRACKETED * c) ** 2 for g, c in zip((50.0, 100.0, 50.0),
                                                                    cycles, strict=True)])


def test_no_cold_run_no_profile_is_the_warm_run_unchanged() -> None:
    samples = pd.DataFrame({"launch_id": [3], "weight": [5.0], "cluster": [0]})
    placed = place_samples(samples, _stats([3], [70.0], [1.0]), None, None)
    assert placed.method == "warm" and placed.estimate() == 350.0
    assert placed.state_variance == 0.0  # nothing measured about the state
    # with a profile that agrees with the warm run: the warm spread only
    agreed = place_samples(samples, _stats([3], [70.0], [1.0]), None, np.array([1.0]))
    assert agreed.state_variance == pytest.approx(25 * (STATE_SD_WARM * 70) ** 2)


def test_which_samples_the_cold_run_needs() -> None:
    warm = np.array([0.0, 0.0, 100.0, 100.0])
    profiled = np.array([2.0, 3.0, 105.0, 200.0])
    # tolerance: 2 sectors or 10% of the warm run's misses, whichever is larger
    assert colder_than_warm(profiled, warm).tolist() == [False, True, False, True]
    assert warmer_than_profile(np.array([0.0, 100.0]), np.array([3.0, 105.0])).tolist() == [
        True, False]


def test_profiled_misses_prefers_dram_reads_then_l2_misses() -> None:
    launches = pd.DataFrame({"launch_id": [0, 1]})
    metrics = pd.DataFrame({"launch_id": [1, 0], "lts__t_sectors_lookup_miss.sum": [7.0, 3.0]})
    b = Bundle(launches=launches, metrics=metrics, manifest=default_manifest())
    metric, column, values = profiled_misses(b, np.array([0, 1]))
    assert (metric, column, values.tolist()) == ("lts__t_sectors_lookup_miss.sum",
                                                 "l2_misses", [3.0, 7.0])
    metrics["dram__sectors_read.sum"] = [1.0, 2.0]
    assert profiled_misses(b, np.array([1]))[0] == "dram__sectors_read.sum"
    assert profiled_misses(b, np.array([5])) is None  # a sample without a metrics row
    # a card whose log counts no DRAM reads (its simple DRAM model): the L2 misses
    assert profiled_misses(b, np.array([0, 1]), card_counts_dram=False)[1] == "l2_misses"


def test_placement_of_the_shipped_warm_and_cold_runs() -> None:
    """The shipped example's STEM runs on the reference card (real GPGPU-Sim logs): the
    placement recomputed from the two logs and the profile equals what ``hilsim simulate``
    wrote, and the warmed estimate is within 1% of the full run where the samples run
    alone (no warm-up) were 8% off in the same example."""
    from hilsim.analyzer.simexample import shipped_example
    from hilsim.simmodel.gpgpusim.simlog import read_simlog

    from hilsim.formats.read import load_profile

    ex = shipped_example()
    folder = ex.sim_folder("stem", "reference")
    bundle = load_profile(ex.reference)
    plan = load_plan(ex.plan("stem"))
    samples = plan.samples.sort_values("launch_id").reset_index(drop=True)
    ids = samples["launch_id"].to_numpy()
    metric, column, misses = profiled_misses(bundle, ids)
    placed = place_samples(samples, read_simlog(folder / "sampled.log.gz"),
                           read_simlog(folder / "cold.log.gz"), misses, metric, column)
    shipped = pd.read_csv(folder / "samples.csv")
    np.testing.assert_allclose(placed.table["cycles"], shipped["cycles"], rtol=1e-12)
    np.testing.assert_allclose(placed.table["state_variance"], shipped["state_variance"],
                               rtol=1e-12)
    full = float(bundle.metrics["gpu__cycles_elapsed.max"].sum())
    assert abs(placed.estimate() / full - 1) < 0.01
    # the warm run alone (L2 filled, no cold bound) is too warm here: -1.5%
    assert placed.estimate("cycles_warm") / full - 1 < -0.01
    # the samples that also ran cold were colder in the profile than in the warm run
    ran_cold = np.isfinite(placed.table["cycles_cold"].to_numpy())
    assert ran_cold.sum() == 28
    assert colder_than_warm(misses[ran_cold],
                            placed.table["misses_warm"].to_numpy()[ran_cold]).all()


class _StandInRunner:
    """Replays per-launch statistics as a simulator would report them for a launch list:
    a sample's L2 misses fall with the number of launches before it in the list window
    (``misses_by_k[launch][K]``); records every list it was asked to run."""

    def __init__(self, misses_by_k: dict[int, list[float]]) -> None:
        self.misses_by_k = misses_by_k
        self.lists: list[list[int]] = []

    def run(self, name, launch_ids, is_sample, warmup, extra, preceding=0):
        from hilsim.simmodel.gpgpusim.listrun import ListRun

        self.lists.append([int(i) for i in launch_ids[is_sample]])
        rows = []
        for lid in launch_ids:
            table = self.misses_by_k.get(int(lid), [0.0])
            misses = table[min(preceding, len(table) - 1)]
            rows.append({"launch_id": int(lid), "kernel": "k", "cycles": 100.0 + misses,
                         "l2_misses": misses})
        return ListRun(name, warmup, launch_ids, is_sample, pd.DataFrame(rows), None,
                       preceding)


def _bundle(n: int) -> Bundle:
    launches = pd.DataFrame({"launch_id": np.arange(n), "duration_ns": np.full(n, 100)})
    return Bundle(launches=launches, manifest=default_manifest())


def test_auto_reruns_only_the_samples_left_colder_and_stops_when_it_stops_helping() -> None:
    """``auto``: samples 20 and 40 miss far more in the warm run than in the profile;
    20's misses fall with one launch before it, 40's never do. Only those two are run
    again (K=1); 20 keeps K=1; then only 40 is left and K=2 does not help it either, so the
    search stops there (mutants: re-running every sample, or going on to K=4 and 8)."""
    from hilsim.analyzer.simulate import warm_run

    runner = _StandInRunner({20: [300.0, 1.0, 1.0], 40: [300.0, 300.0, 300.0]})
    ids = np.array([5, 20, 40, 60])
    weights = np.ones(4)
    profile = np.array([0.0, 0.0, 0.0, 0.0])
    warm = warm_run(runner, parse_warmup("auto"), ids, weights, profile, "l2_misses",
                     _bundle(100), budget=1.0)
    assert runner.lists == [[5, 20, 40, 60], [20, 40], [40]]
    assert warm.preceding.tolist() == [0, 1, 0, 0]
    assert warm.stats["l2_misses"].tolist() == [0.0, 1.0, 300.0, 0.0]


def test_auto_warmup_stays_within_its_budget() -> None:
    """The first step (K = 1) is always tried; the budget bounds the longer ones. One
    launch before the sample costs as much as the sample (100 ns each): at budget 0.5 K = 1
    runs and K = 2 (200 ns more) is refused; at budget 10 K = 2 runs too (and, not
    helping, is not kept). Mutant: the budget applied to K = 1 refuses it at 0.5."""
    from hilsim.analyzer.simulate import warm_run

    ids = np.array([20])
    runner = _StandInRunner({20: [300.0, 10.0]})
    warm = warm_run(runner, parse_warmup("auto"), ids, np.ones(1), np.zeros(1),
                    "l2_misses", _bundle(100), budget=0.5)
    assert runner.lists == [[20], [20]] and warm.preceding.tolist() == [1]
    runner = _StandInRunner({20: [300.0, 10.0]})
    warm = warm_run(runner, parse_warmup("auto"), ids, np.ones(1), np.zeros(1),
                    "l2_misses", _bundle(100), budget=10.0)
    assert runner.lists == [[20], [20], [20]] and warm.preceding.tolist() == [1]
