"""The GPGPU-Sim device without the simulator: program text, plans, device facts from a
card config, setups, chase validation, the reduced sweep."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from hilsim.microbench.device import GLOBALTIMER, MMA, RED, TLB, Setup
from hilsim.microbench.latency import Chase, reduced_sweep_points, single_cycle
from hilsim.microbench.program import Program
from hilsim.microbench.sources import all_sources, kernel_names
from hilsim.simmodel.gpgpusim import simhost
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice, card_device_facts

CONFIGS = Path(__file__).parent / "data" / "accelsim"


@pytest.mark.parametrize("module", sorted(all_sources()))
def test_program_text_is_the_suite_source_plus_driver(module: str) -> None:
    text = simhost.program_source(module)
    source = all_sources()[module]
    # the same kernel text, up to the one documented rewrite (red -> atom with sink)
    sim = simhost.sim_kernel_text(source)
    assert sim in text
    assert (sim == source) == (re.search(r"\bred\.", source) is None)
    assert "red.global" not in sim
    assert "#define clock64 hilsim_clock64" in text
    assert "#define __shfl_xor_sync hilsim_shfl_xor_sync" in text
    assert text.index("#define clock64") < text.index(sim)
    for name in kernel_names()[module]:
        assert f'{{"{name}", (const void*){name}}}' in text
    assert "int main(int argc" in text
    # one source of truth: the driver holds no kernel of its own
    assert "__global__" not in simhost.driver_source()


def test_red_becomes_atom_with_a_sink_and_nothing_else_changes() -> None:
    text = 'asm volatile("red.global.add.u32 [%0], 1;" :: "l"(p));\nx = shared_red.y;'
    got = simhost.sim_kernel_text(text)
    assert got == 'asm volatile("atom.global.add.u32 _, [%0], 1;" :: "l"(p));\nx = shared_red.y;'
    assert simhost.sim_kernel_text("red.shared.max.s32 [%1], %2;") == (
        "atom.shared.max.s32 _, [%1], %2;"
    )


def test_plan_lines_and_argument_encoding() -> None:
    plan = Program("latency.chase")
    plan.chain("c", 64, np.array([1, 0])).buf("o", 32).iota("w", 4, modulo=3)
    idx = plan.launch(
        "chase_ca", 1, (32, 1), [("buf", "c"), ("i64", -1), ("f32", 1.5), ("f64", 0.25), ("u32", 7)]
    )
    plan.sync().read("o")
    assert idx == 0 and plan.launches == ["chase_ca"] and plan.reads == ["o"]
    lines, files = simhost.render_plan(plan)
    f32 = struct.unpack("<I", struct.pack("<f", 1.5))[0]
    f64 = struct.unpack("<Q", struct.pack("<d", 0.25))[0]
    assert lines[:5] == [
        "buf c 128", "chain c 64 in_0.bin", "buf o 32", "buf w 16", "u32s w in_1.bin"
    ]
    assert lines[5] == f"launch chase_ca 1 1 1 32 1 1 0 buf:c i64:-1 f32:{f32} f64:{f64} u32:7"
    assert lines[-1] == "dump o out_o.bin" and len(lines) == 7  # sync: the driver syncs
    assert np.frombuffer(files["in_0.bin"], dtype="<i8").tolist() == [1, 0]
    assert np.frombuffer(files["in_1.bin"], dtype="<u4").tolist() == [0, 1, 2, 0]
    with pytest.raises(Exception, match="unknown argument type"):
        plan.launch("k", 1, 1, [("half", 1)])
    plan.host(lambda: None)
    with pytest.raises(Exception, match="host step cannot run"):
        simhost.render_plan(plan)


@pytest.mark.parametrize(
    ("card", "sms", "l2", "unified", "bus", "mtype", "core"),
    [
        ("SM7_QV100", 80, 6 << 20, 128 << 10, 4096, "HBM", 1132.0),
        ("SM75_RTX2060", 30, 3 << 20, 96 << 10, 192, "GDDR6", 1365.0),
        ("SM86_RTX3070", 46, 4 << 20, 128 << 10, 256, "GDDR6", 1132.0),
    ],
)
def test_device_facts_from_card_config(card, sms, l2, unified, bus, mtype, core) -> None:
    cfg = card_config(CONFIGS / f"{card}.gpgpusim.config")
    facts = card_device_facts(cfg)
    assert facts["sm_count"] == sms
    assert facts["l2_cache_bytes"] == l2
    assert facts["unified_l1_shared_bytes"] == unified
    assert facts["memory_bus_width_bits"] == bus
    assert facts["memory_type"] == mtype
    assert facts["max_sm_clock_mhz"] == core
    assert simhost.card_arch(cfg) == "sm_" + facts["compute_capability"].replace(".", "")


def test_device_setups_and_what_it_cannot_do() -> None:
    cfg = card_config(CONFIGS / "SM7_QV100.gpgpusim.config")
    dev = GpgpusimDevice(cfg)
    assert dev.facts == card_device_facts(cfg) and dev.simulated
    assert dev.active_sms == 2 and dev.memory_scale == int(cfg.option("-gpgpu_n_mem"))
    assert dev.setup_options(Setup.ONE_SM) == {
        "-gpgpu_n_clusters": "1",
        "-gpgpu_perf_sim_memcpy": "0",
        "-gpgpu_kernel_launch_latency": "0",
    }
    assert "-gpgpu_perf_sim_memcpy" not in dev.setup_options(Setup.ONE_SM_CACHED_UPLOADS)
    assert dev.setup_options(Setup.LAUNCH) == {"-gpgpu_n_clusters": "1"}
    memory = dev.setup_options(Setup.MEMORY_SLICE)
    assert memory["-gpgpu_n_mem"] == "1" and memory["-gpgpu_memory_partition_indexing"] == "0"
    assert memory["-gpgpu_n_clusters"] == dev.setup_options(Setup.SM_SLICE)["-gpgpu_n_clusters"]
    wide = GpgpusimDevice(cfg, throughput_sms=5, memory_slice_channels=2)
    memory = wide.setup_options(Setup.MEMORY_SLICE)
    assert (memory["-gpgpu_n_mem"], memory["-gpgpu_n_clusters"]) == ("2", "5")
    assert memory["-gpgpu_memory_partition_indexing"] == "0"
    assert wide.setup_options(Setup.ONE_SM_ONE_CHANNEL)["-gpgpu_n_mem"] == "1"
    for feature in (GLOBALTIMER, MMA, RED, TLB):
        assert not dev.supports(feature) and dev.unsupported[feature]
    assert dev.executed_as("red.global.add.u32") == (
        "red.global.add.u32 (simulated as atom.global.add.u32 _: simhost)"
    )
    assert dev.sample(lambda: 3.5, 8, 0.01, 3).samples == [3.5]


def _kernel_out(nxt: np.ndarray, stride: int, base: int, warm: int, steps: int) -> np.ndarray:
    """What chase_{ca,cg} stores: end pointer, sum of the warm steps, cycles, overhead."""
    node, total = 0, 0
    for _ in range(warm):
        node = int(nxt[node])
        total += base + stride * node
    for _ in range(steps):
        node = int(nxt[node])
    return np.array([base + stride * node, total % (1 << 64), 100 * steps + 7, 7], dtype=np.uint64)


def test_chase_check_follows_the_path() -> None:
    nxt = single_cycle(64, np.random.default_rng(3))
    chase = Chase("c", 64, 128, nxt, warm=64, steps=40)
    out = _kernel_out(nxt, 128, 0x7F0000000000, 64, 40)
    value, ok, _ = chase.check(out)
    assert ok and value == 100.0
    wrong = _kernel_out(nxt, 128, 0x7F0000000000, 64, 41)  # one step too many
    assert chase.check(wrong)[1:] == (False, "chase left its path")
    bad_sum = out.copy()
    bad_sum[1] += np.uint64(128)
    assert not chase.check(bad_sum)[1]
    # where the device knows the chain's address, the end pointer must be exactly it
    laps = Chase("c", 64, 128, nxt, warm=64, steps=128)
    whole = _kernel_out(nxt, 128, 0x7F0000000000, 64, 128)
    assert laps.check(whole, 0x7F0000000000)[1]
    assert laps.check(whole, 0x7F0000000100)[1:] == (
        False, "chase did not visit every node exactly once per lap"
    )


def test_reduced_sweep_brackets_the_unified_l1() -> None:
    points = reduced_sweep_points({"unified_l1_shared_bytes": 128 << 10})
    assert points[0] == 8192 and points[-1] == 512 << 10
    ratios = np.diff(np.log2(points))
    assert np.allclose(ratios, 0.5, atol=0.01)


def test_simulated_facts_hold_no_machine_paths(monkeypatch, tmp_path) -> None:
    """A simulated card's facts name its config by the build key and a relative name."""
    import json  # noqa: PLC0415
    import types  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from hilsim.simmodel.gpgpusim.cards import card_config  # noqa: PLC0415
    from hilsim.simmodel.gpgpusim.simdevice import card_device_facts  # noqa: PLC0415

    data = Path(__file__).parent / "data" / "accelsim"
    card = card_config(data / "SM7_QV100.gpgpusim.config")
    build = types.SimpleNamespace(configs_dir=data, key="667834c-pabc-gcc12.2.0-cuda11080")
    shipped = card_device_facts(card, build)
    assert shipped["config"] == "SM7_QV100.gpgpusim.config"
    assert shipped["config_source"] == f"build {build.key}"
    monkeypatch.chdir(tmp_path)  # a file outside the current folder: its folder and name
    user = card_device_facts(card)
    assert (user["config"], user["config_source"]) == ("accelsim/SM7_QV100.gpgpusim.config",
                                                        "user file")
    assert user["config_sha256"] == shipped["config_sha256"] and len(user["config_sha256"]) == 64
    for facts in (shipped, user):
        assert str(data.resolve()) not in json.dumps(facts) and "/root" not in json.dumps(facts)
