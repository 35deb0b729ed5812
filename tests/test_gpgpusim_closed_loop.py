"""Closed loop: `hilsim tune` on a simulated card's microbench.json
recovers the config the card was built from.

The first tests need no simulator: they read the committed suite outputs
(tests/data/microbench/gpgpusim/, provenance in its README) and the shipped configs
(tests/data/accelsim/). The `gpgpusim`-marked tests run the simulator: a card nobody
shipped (latencies and cache sizes drawn from a seeded RNG) is measured, tuned and
recovered, and the tuned config re-simulated reproduces the measured latencies.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.tuner.closedloop import (
    TOLERANCE,
    compare,
    dram_peak_gbs,
    measured_values,
    tune_simulated,
)

from hilsim.core.errors import HilsimError
from tests.simbuild import require_sim_build

DATA = Path(__file__).parent / "data"
CARDS = ("SM7_QV100", "SM75_RTX2060", "SM86_RTX3070")
LATENCIES = ("-gpgpu_l1_latency", "-gpgpu_l2_rop_latency", "-dram_latency", "-gpgpu_smem_latency")
UNIT_LATENCIES = ("-ptx_opcode_latency_fp", "-ptx_opcode_latency_dp", "-ptx_opcode_latency_int")
THROUGHPUT_INPUTS = (
    "units.fp32.throughput",
    "units.fp64.throughput",
    "units.int32.throughput",
    "shared.bandwidth",
    "dram.bandwidth_gbs",
)
THROUGHPUT_OPTIONS = (
    "-ptx_opcode_initiation_fp",
    "-ptx_opcode_initiation_dp",
    "-ptx_opcode_initiation_int",
    "-gpgpu_shmem_num_banks",
)


def _tuned_options(result) -> dict[str, str]:
    return {o.name: o.value for o in result.options if o.file == "gpgpusim.config"}


@pytest.mark.parametrize("card", CARDS)
def test_tune_recovers_the_card(card: str) -> None:
    config = card_config(DATA / "accelsim" / f"{card}.gpgpusim.config")
    bench = DATA / "microbench" / "gpgpusim" / f"{card}.microbench.json"
    result = tune_simulated(bench)
    rows = compare(config.options(), _tuned_options(result), measured_values(bench))
    missing = [r.quantity for r in rows if r.tuned is None or r.configured is None]
    assert not missing, f"not emitted: {missing}"
    bad = [(r.quantity, r.configured, r.tuned) for r in rows if not r.ok]
    assert not bad, f"{card}: outside tolerance: {bad}"
    # the latencies are measured, not the preset's
    by_name = {o.name: o for o in result.options}
    for name in (*LATENCIES, *UNIT_LATENCIES):
        assert by_name[name].convention == "gpgpusim", (name, by_name[name])
    # the throughput-derived options come from the simulated measurements
    for quantity in THROUGHPUT_INPUTS:
        assert result.timing.get(quantity).source.kind == "measured", (card, quantity)
    for name in THROUGHPUT_OPTIONS:
        assert by_name[name].kind == "measured", (card, name, by_name[name])


def simulated_l1_bytes(options: dict[str, str]) -> int:
    """The L1 GPGPU-Sim gives a kernel without shared memory: the unified size minus the
    smallest shared-memory carve-out (``-gpgpu_shmem_option``; Turing: 96 - 32 = 64 KB)."""
    carve = min(int(v) for v in options.get("-gpgpu_shmem_option", "0").split(","))
    return (int(options["-gpgpu_unified_l1d_size"]) - carve) * 1024


def test_reduced_sweep_sees_the_simulated_l1() -> None:
    """The sweep's L1 step lies within one sweep step (2^-1/2) below the simulated L1."""
    for card in CARDS:
        doc = json.loads((DATA / "microbench" / "gpgpusim" / f"{card}.microbench.json").read_text())
        options = card_config(DATA / "accelsim" / f"{card}.gpgpusim.config").options()
        want = simulated_l1_bytes(options)
        m = next(x for x in doc["measurements"] if x["name"] == "l1_capacity_bytes")
        assert m["valid"], m["note"]
        assert want / 2**0.5 <= m["value"] <= want, (card, m["value"], want)


@pytest.mark.parametrize("card", CARDS)
def test_dram_peak_of_a_config_is_the_device_facts_peak(card: str) -> None:
    from hilsim.simmodel.gpgpusim.simdevice import card_device_facts

    config = card_config(DATA / "accelsim" / f"{card}.gpgpusim.config")
    peak = card_device_facts(config)["peak_dram_gbs"]
    assert dram_peak_gbs(config.options()) == pytest.approx(peak)
    expected = {"SM7_QV100": 870.4, "SM75_RTX2060": 336.0, "SM86_RTX3070": 448.0}[card]
    assert abs(peak - expected) < 0.2  # the cards' published peaks (3070: 448.1 at 3500.5)


@pytest.mark.parametrize("card", CARDS)
def test_measured_rates_lie_below_the_configured_peaks(card: str) -> None:
    """No simulated rate exceeds what the config allows; none is below 3/4 of it (a slice
    that lost an SM or a channel would read half)."""
    from hilsim.simmodel.tuner.closedloop import RATES, configured_rates

    config = card_config(DATA / "accelsim" / f"{card}.gpgpusim.config")
    want = configured_rates(config.options())
    got = measured_values(DATA / "microbench" / "gpgpusim" / f"{card}.microbench.json")
    assert set(RATES) <= set(want) and set(RATES) <= set(got)
    for name in RATES:
        assert 0.75 * want[name] <= got[name] <= 1.001 * want[name], (card, name, got[name])


def test_a_relative_row_fails_outside_its_fraction() -> None:
    from hilsim.simmodel.tuner.closedloop import Row

    assert Row("x", 100.0, 96.0, 0.05, "", relative=True).ok
    assert not Row("x", 100.0, 94.0, 0.05, "", relative=True).ok
    assert not Row("x", 100.0, None, 0.05, "", relative=True).ok


def test_tolerances_are_stated_for_every_latency() -> None:
    assert set(LATENCIES) <= set(TOLERANCE)
    assert all(tol <= 1 for name, (tol, _) in TOLERANCE.items() if name in LATENCIES)


def test_gpgpusim_convention_without_calibration_is_one_line() -> None:
    from hilsim.simmodel.tuner.calibration import tuned_options

    with pytest.raises(HilsimError, match="no GPGPU-Sim calibration for compute capability 9.0"):
        tuned_options([], None, "9.0")


# --- on the simulator ---------------------------------------------------------------


def _build():
    return require_sim_build()


def _latency_suite(config_path: Path, tmp: Path, build) -> Path:
    """The latency chases, the shared chase, the reduced sweep and launch on a card."""
    from hilsim.microbench import latency, launch
    from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

    from hilsim.core.measurement import write_microbench_json

    card = card_config(config_path, build)
    device = GpgpusimDevice(card, build=build)
    results = (
        latency.chase_latencies(device, steps=64)
        + [latency.shared_latency(device, steps=64)]
        + latency.footprint_sweep(device, steps=64)[0]
        + launch.launch_latency(device, launches=1)
    )
    return write_microbench_json(tmp / "microbench.json", results, device.facts)


@pytest.mark.gpgpusim
def test_a_card_nobody_shipped_is_recovered(tmp_path: Path) -> None:
    """QV100 with latencies and L1/L2 sizes drawn from a seeded RNG: measure, tune, recover."""
    build = _build()
    rng = np.random.default_rng(12)
    drawn = {
        "-gpgpu_l1_latency": int(rng.integers(12, 48)),
        "-gpgpu_smem_latency": int(rng.integers(12, 40)),
        "-gpgpu_l2_rop_latency": int(rng.integers(100, 260)),
        "-dram_latency": int(rng.integers(60, 260)),
        "-gpgpu_unified_l1d_size": int(rng.choice([96, 128])),
        # shared memory up to the unified size minus 32 KB (QV100: 128 - 32 = 96 KB)
        # 32..64 sets per bank x 24 ways x 128 B x 64 banks
        "-gpgpu_cache:dl2": f"S:{int(rng.choice([32, 64]))}:128:24,L:B:m:L:P,A:192:4,32:0,32",
    }
    drawn["-gpgpu_shmem_size"] = (drawn["-gpgpu_unified_l1d_size"] - 32) * 1024
    drawn["-gpgpu_shmem_option"] = "0,8,16,32,64"
    base = (DATA / "accelsim" / "SM7_QV100.gpgpusim.config").read_text()
    lines = "".join(f"{k} {v}\n" for k, v in drawn.items())
    path = tmp_path / "SM7_DRAWN" / "gpgpusim.config"
    path.parent.mkdir()
    path.write_text(base.rstrip("\n") + "\n# drawn by the test (seed 12)\n" + lines)
    icnt = build.configs_dir / "SM7_QV100" / "config_volta_islip.icnt"
    (path.parent / icnt.name).write_bytes(icnt.read_bytes())
    bench = _latency_suite(path, tmp_path, build)
    rows = {
        r.quantity: r
        for r in compare(card_config(path).options(), _tuned_options(tune_simulated(bench)))
    }
    for name in (
        "-gpgpu_l1_latency",
        "-gpgpu_smem_latency",
        "-gpgpu_l2_rop_latency",
        "-dram_latency",
        "l1_unified_kib",
        "l2_bytes",
    ):
        assert rows[name].ok, (name, drawn, rows[name])
    doc = json.loads(bench.read_text())
    l1 = next(m for m in doc["measurements"] if m["name"] == "l1_capacity_bytes")
    want = simulated_l1_bytes(card_config(path).options())
    assert l1["valid"] and want / 2**0.5 <= l1["value"] <= want, (l1, want)


@pytest.mark.gpgpusim
def test_the_tuned_config_reproduces_the_measured_latencies(tmp_path: Path) -> None:
    """Re-simulate the latency chases under the tuned QV100 options: same cycles (±1)."""
    from hilsim.microbench import latency
    from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

    build = _build()
    bench = DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"
    measured = {m["name"]: m["value"] for m in json.loads(bench.read_text())["measurements"]}
    tuned = _tuned_options(tune_simulated(bench))
    card = card_config("SM7_QV100", build)
    device = GpgpusimDevice(card, build=build, overrides={k: tuned[k] for k in LATENCIES})
    again = {
        m.name: m.value
        for m in latency.chase_latencies(device) + [latency.shared_latency(device)]
    }
    for name in ("l1_hit_latency", "l2_hit_latency", "dram_latency", "shared_latency"):
        assert abs(again[name] - measured[name]) <= 1, (name, again[name], measured[name])


def test_rows_read_from_the_device_are_shown_not_counted() -> None:
    """Ten rows are the card's config read back through the device facts: a wrong one
    does not count as a recovery failure (nor a right one as a success); a measured row
    does."""
    from hilsim.simmodel.tuner.closedloop import READ_FROM_DEVICE, CardCheck, markdown_table

    card = card_config(DATA / "accelsim" / "SM7_QV100.gpgpusim.config").options()
    bench = DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"
    tuned = _tuned_options(tune_simulated(bench))
    assert len(READ_FROM_DEVICE) == 10
    rows = compare(card, {**tuned, "-gpgpu_n_clusters": "81"}, measured_values(bench))
    assert {r.quantity for r in rows if r.category == "device"} == set(READ_FROM_DEVICE)
    check = CardCheck("c", "m", rows)
    assert check.ok and not next(r for r in rows if r.quantity == "sm_count").ok
    bad = compare(card, {**tuned, "-gpgpu_l1_latency": "25"}, measured_values(bench))
    assert not CardCheck("c", "m", bad).ok
    text = markdown_table(rows)
    assert text.index("**measured**") < text.index("**read from the device**")
