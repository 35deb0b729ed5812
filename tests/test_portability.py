"""hilsim.analyzer.portability on a REAL bundle A (CASIO NeRF, A100, nsys SQLite) and a DERIVED B.

The only real two-GPU pair of one workload the project holds is tiny (four SAXPY
launches, tests/test_portability_real_pair.py), so the alignment (drops, inserts,
unaligned time) and the per-class ranking are exercised here on a large real A and a
B made from it by scaling durations per kernel class, dropping a few launches and
inserting a few foreign ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hilsim.analyzer import methods
from hilsim.analyzer.portability import align_sequences, evaluate_portability

from hilsim.cli.portability import portability_cmd
from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches
from hilsim.formats.read import load_profile

SQLITE = Path(__file__).parent / "data" / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
DROP = [5, 6, 300, 700]
INSERT_AT = [100, 900]


@pytest.fixture(scope="module")
def real_a() -> Bundle:
    return load_profile(SQLITE)


def derived_b(a: Bundle) -> tuple[Bundle, dict[str, float]]:
    kernels = a.launches["kernel"].astype(str)
    classes = sorted(kernels.unique())
    rng = np.random.default_rng(7)
    factor = dict(zip(classes, rng.uniform(0.4, 0.9, len(classes)), strict=True))
    frame = pd.DataFrame({
        "name": a.launches["name"].astype(str),
        "duration_ns": (a.launches["duration_ns"] * kernels.map(factor)).round().astype("int64"),
    })
    keep = frame.drop(index=DROP)
    parts, start = [], 0
    for at in INSERT_AT:
        parts.append(keep.iloc[start:at])
        parts.append(pd.DataFrame({"name": ["inserted_kernel_b"], "duration_ns": [50_000]}))
        start = at
    parts.append(keep.iloc[start:])
    b = Bundle(normalize_launches(pd.concat(parts, ignore_index=True), "derived-b"))
    return b, factor


def test_align_handles_drops_and_inserts():
    a = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9])
    b = np.array([1, 2, 4, 5, 99, 6, 7, 8, 9])
    al = align_sequences(a, b)
    assert list(al.only_a) == [2] and list(al.only_b) == [4]
    assert len(al.a) == 8 and np.all(a[al.a] == b[al.b])


def test_align_scales_linearly():
    a = np.tile(np.arange(20), 50_000)  # 1M launches, a few edits
    b = np.delete(a, [10, 500_000])
    al = align_sequences(a, b)
    assert len(al.only_a) == 2 and len(al.only_b) == 0


def test_align_repetition_does_not_shift_the_pairing():
    """x y x y ...: dropping an x of A costs the same as inserting a y into B, and only
    the right choice still agrees after the repetition ends (one edit, not three)."""
    a = np.array([1, 2] * 40 + [3, 4, 5, 6] * 8)
    b = np.delete(a, 20)
    al = align_sequences(a, b)
    assert len(al.only_a) == 1 and len(al.only_b) == 0
    assert a[al.only_a[0]] == 1 and np.all(a[al.a] == b[al.b])


def test_align_durations_choose_between_equally_cheap_resyncs():
    """5 1 5 1 ...: B gained a 1 at 58 and lost A's launch 116. At the first mismatch,
    skipping B's extra 1 or A's next 5 costs the same and both keep agreeing until the
    second edit; only the durations (B's are A's halved) tell the right pairing."""
    a = np.array([5, 1] * 60 + [2, 3, 4, 0] * 10)
    dur_a = np.round(np.random.default_rng(1).uniform(1e3, 1e5, len(a)))
    kept = np.delete(np.arange(len(a)), 116)
    b = np.insert(a[kept], 58, 1)
    dur_b = np.insert(dur_a[kept] / 2, 58, 777.0)
    truth = np.full(len(a), -1)
    truth[kept] = np.arange(len(kept)) + (np.arange(len(kept)) >= 58)
    by_names = align_sequences(a, b)
    assert not np.all(truth[by_names.a] == by_names.b)  # names alone pair wrongly
    al = align_sequences(a, b, durations=(dur_a, dur_b))
    np.testing.assert_array_equal(truth[al.a], al.b)
    assert list(al.only_a) == [116] and list(al.only_b) == [58]


def test_align_bridges_a_long_stretch_only_one_side_ran():
    """B ran 5,000 launches of kernels A never ran (warm-up, autotuning) mid-sequence."""
    rng = np.random.default_rng(0)
    a = np.tile(np.arange(30), 400)
    extra = rng.integers(100, 140, 5000)
    b = np.concatenate((a[:6000], extra, a[6000:]))
    al = align_sequences(a, b)
    assert len(al.only_a) == 0
    np.testing.assert_array_equal(al.only_b, np.arange(6000, 11000))


@pytest.mark.slow
def test_align_kernels_swapped_every_iteration():
    """Every 20-kernel iteration runs 4 other library kernels on B (PKA 5.2: cuDNN picks
    other algorithms): those are unaligned on both sides, the other 16 stay paired."""
    iteration = np.arange(20)
    a = np.tile(iteration, 500)
    swapped = iteration.copy()
    swapped[[2, 7, 11, 17]] += 100
    b = np.tile(swapped, 500)
    al = align_sequences(a, b)
    assert len(al.only_a) == len(al.only_b) == 4 * 500
    assert len(al.a) == 16 * 500
    np.testing.assert_array_equal(al.a, al.b)  # same positions, nothing shifted


def test_plan_from_real_a_on_derived_b(real_a, tmp_path):
    b, factor = derived_b(real_a)
    plan = methods.create("stem").plan(real_a).attach_names(real_a.launches["name"])
    result = evaluate_portability(plan, real_a, b)
    al = result["alignment"]
    assert al["unaligned_b"] == len(INSERT_AT)
    assert al["unaligned_a"] == len(DROP)
    assert {r["name"] for r in al["unaligned_b_first"]} == {"inserted_kernel_b"}
    # repeated kernel sequences make the dropped launches ambiguous: the aligner may
    # drop an equal-named launch elsewhere; names and the time they hold must agree
    names_a = real_a.launches["kernel"].astype(str).to_numpy()
    listed = [r["launch_id"] for r in al["unaligned_a_first"]]
    assert sorted(names_a[listed]) == sorted(names_a[DROP])
    dur_a = real_a.launches["duration_ns"].to_numpy()
    assert al["unaligned_a_time_fraction"] == pytest.approx(dur_a[listed].sum() / dur_a.sum())
    assert al["unaligned_b_time_fraction"] == pytest.approx(
        2 * 50_000 / b.launches["duration_ns"].sum())
    assert result["error"] < 0.05
    sp = result["speedup_b_over_a"]
    assert sp["predicted"] == pytest.approx(sp["true"], rel=0.05)
    moved = result["moved_most"][0]
    assert moved["mean_ratio_b_over_a"] == pytest.approx(
        min(factor.values()) if abs(np.log(min(factor.values()))) >
        abs(np.log(max(factor.values()))) else max(factor.values()), rel=0.05)
    # the CLI writes the same numbers
    write_bundle(real_a, tmp_path / "a")
    write_bundle(b, tmp_path / "b")
    plan.save(tmp_path / "plan.json")
    out = tmp_path / "port.json"
    run = CliRunner().invoke(portability_cmd, ["--plan", str(tmp_path / "plan.json"),
                                               "--source", str(tmp_path / "a"),
                                               "--bundle", str(tmp_path / "b"), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert json.loads(out.read_text())["error"] == pytest.approx(result["error"])
    # and prints the run's lines: the errors on B and A, then the file written
    from hilsim.analyzer.portability import PortabilityRun

    lines = PortabilityRun(json.loads(out.read_text()), out).lines()
    assert run.output == "\n".join(lines) + "\n"
    assert lines[0].startswith(f"error on B {100 * result['error']:.2f}% (on A ")
    assert lines[1] == f"wrote {out}"


def test_wrong_source_is_rejected(real_a):
    b, _ = derived_b(real_a)
    plan = methods.create("stem").plan(real_a).attach_names(real_a.launches["name"])
    with pytest.raises(HilsimError):
        evaluate_portability(plan, b, b)
