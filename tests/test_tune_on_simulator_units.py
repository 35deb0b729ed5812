"""The parts of `hilsim tune --on-simulator` that need no simulator: the monotone integer
search, the base-card choice (facts, never names), the tuned card's derived options and
text, the pipeline-depth rule, and the tuner's preset choice on the same rule.

The simulator tier (tests/test_tune_on_simulator.py) runs the loop itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hilsim.simmodel.accelsim import read_options
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.runnable import cache_problems, problems
from hilsim.simmodel.gpgpusim.simdevice import card_device_facts
from hilsim.simmodel.tuner.basecard import CardKey, choose
from hilsim.simmodel.tuner.card import (
    Setting,
    clock_domains,
    config_text,
    dl2_value,
    icnt_for,
    list_entries,
    list_rows,
    partition_indexing,
    valid_channel_counts,
)
from hilsim.simmodel.tuner.intsolve import IntSearch
from hilsim.simmodel.tuner.pipeline import intervals_within_latencies, pipeline_depths

from hilsim.cli.main import cli, main
from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data"
ACCEL = DATA / "accelsim"


def card(name: str):  # noqa: ANN201 - a CardConfig
    if name == "SM90_H100":
        return card_config("SM90_H100", None)
    return card_config(ACCEL / f"{name}.gpgpusim.config")


# --- the search ----------------------------------------------------------------------


def _solve(f, target: float, first: int, rounds: int = 12, **kw) -> tuple[IntSearch, int]:  # noqa: ANN001
    s = IntSearch(target=target, first_guess=first, **kw)
    n = 0
    while not s.settled and n < rounds:
        x = s.propose()
        s.record(x, f(x))
        n += 1
    return s, n


@pytest.mark.parametrize("seed", range(40))
def test_search_finds_the_nearest_integer_of_a_monotone_staircase(seed: int) -> None:
    """Random affine maps with a clock-domain staircase (slope 0.3..3, offset 0..40,
    steps of up to 2 cycles), as the simulator's latencies look: the search ends on the
    integer whose value is nearest the target, in a few rounds."""
    rng = np.random.default_rng(seed)
    slope, offset = rng.uniform(0.3, 3.0), rng.uniform(0, 40)
    step = rng.choice([0.0, 0.5, 1.7])

    def f(x: int) -> float:
        v = slope * x + offset
        return math.floor(v / step) * step if step else v

    truth = int(rng.integers(5, 400))
    target = f(truth) + rng.uniform(-0.4, 0.4) * slope
    s, rounds = _solve(f, target, first=int(target))
    best = min(range(1, 2000), key=lambda x: (abs(f(x) - target), x))
    assert abs(f(s.best()) - target) == pytest.approx(abs(f(best) - target))
    assert rounds <= 8
    assert not s.unreachable


def test_a_target_below_the_floor_is_reported_not_clamped_silently() -> None:
    """The silicon FFMA case: 4 cycles measured, the simulator's floor is 1 x 0.992 +
    5.36: the bound 1 is kept and the search says why."""
    s, _ = _solve(lambda x: 127 / 128 * x + 5.36, 4.0, first=4)
    assert s.settled and s.best() == 1
    assert "below the simulator's floor" in s.unreachable and "6.35" in s.unreachable


def test_powers_of_two_and_a_proportional_quantity() -> None:
    banks, _ = _solve(lambda b: 0.82 * b, 26.2, first=32, domain=(1, 2, 4, 8, 16, 32, 64))
    assert banks.best() == 32
    chans, rounds = _solve(lambda n: 26.4 * n, 26.4 * 24 + 3, first=32, proportional=True)
    assert chans.best() == 24 and rounds == 2


def test_an_exact_initiation_interval_any_integer() -> None:
    """Initiation intervals are integers, 3 and 6 included (not only powers of two)."""
    for truth in (1, 2, 3, 4, 5, 6, 7, 8):
        def f(i: int) -> float:
            return i + 0.09 * (1 + (i % 3))  # cycles per instruction, slightly above i
        s, _ = _solve(f, f(truth), first=round(f(truth)))
        assert s.best() == truth


# --- base card: facts, never names ----------------------------------------------------

BASES = ("SM7_QV100", "SM75_RTX2060", "SM86_RTX3070", "SM90_H100")


def _keys() -> list[CardKey]:
    out = []
    for name in BASES:
        f = card_device_facts(card(name))
        out.append(CardKey(name, f["compute_capability"], f["memory_type"], f["sm_count"]))
    return out


@pytest.mark.parametrize(("cc", "mem", "sms", "want"), [
    ("7.0", "HBM", 80, "SM7_QV100"),
    ("7.0", None, 80, "SM7_QV100"),
    ("7.5", "GDDR6", 34, "SM75_RTX2060"),
    ("8.6", "GDDR6", 46, "SM86_RTX3070"),
    ("8.9", "GDDR6X", 128, "SM86_RTX3070"),
    ("8.0", "HBM2e", 108, "SM86_RTX3070"),
    ("9.0", "HBM3", 132, "SM90_H100"),
    ("9.0", None, 114, "SM90_H100"),
])
def test_base_follows_compute_capability_then_memory_then_sms(cc, mem, sms, want) -> None:  # noqa: ANN001
    choice = choose(CardKey("device", cc, mem, sms), _keys())
    assert choice.name == want
    assert choice.mismatches == ([] if cc in ("7.0", "7.5", "8.6", "9.0") else choice.mismatches)


def test_a_name_never_chooses_the_base() -> None:
    """A cc-7.0 card whose folder is named h100x gets the Volta base, as it does renamed."""
    a = choose(CardKey("h100x", "7.0", "HBM", 80), _keys())
    b = choose(CardKey("cardA", "7.0", "HBM", 80), _keys())
    assert a.name == b.name == "SM7_QV100" and a.reason == b.reason


def test_the_memory_family_decides_between_cards_of_one_generation() -> None:
    """Two candidates of the device's compute capability: the one of its memory family
    wins over the one nearer in SM count (HBM: 128-bit channels, 2-beat bursts; GDDR6:
    16-bit, 16-beat), and a device that reports no memory type falls to the SM count.
    Without the family term the GDDR6 card (the nearer SM count) would be chosen."""
    gddr = CardKey("gddr6-80", "7.0", "GDDR6", 80)
    hbm = CardKey("hbm2-40", "7.0", "HBM2", 40)
    assert choose(CardKey("device", "7.0", "HBM2e", 84), [gddr, hbm]).name == "hbm2-40"
    assert choose(CardKey("device", "7.0", "GDDR6X", 84), [gddr, hbm]).name == "gddr6-80"
    assert choose(CardKey("device", "7.0", None, 84), [gddr, hbm]).name == "gddr6-80"
    # the generation still comes first: an HBM card of another major loses to GDDR
    other = CardKey("hbm-sm9", "9.0", "HBM3", 84)
    assert choose(CardKey("device", "7.0", "HBM2", 84), [gddr, other]).name == "gddr6-80"


def test_a_generation_mismatch_is_stated() -> None:
    choice = choose(CardKey("device", "6.1", "GDDR5X", 28), _keys())
    assert choice.name == "SM7_QV100"
    assert any("compute capability 7.0" in m for m in choice.mismatches)
    assert any("memory" in m for m in choice.mismatches)


def test_the_tuner_preset_is_chosen_the_same_way(tmp_path: Path) -> None:
    """`hilsim tune` (every convention): a device named like an H100 with a Volta compute
    capability gets the Volta preset, and a mismatch is printed on the console."""
    src = json.loads((DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json").read_text())
    src["device"]["name"] = "NVIDIA H100 80GB HBM3 h100x"
    path = tmp_path / "mb.json"
    path.write_text(json.dumps(src))
    result = CliRunner().invoke(cli, ["tune", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "preset QV100" in result.output
    report = json.loads((tmp_path / "out" / "tune-report.json").read_text())
    assert report["preset"] == "QV100" and "h100x" not in report["preset_reason"]
    src["device"]["compute_capability"], src["device"]["memory_type"] = "6.1", "GDDR5X"
    path.write_text(json.dumps(src))
    result = CliRunner().invoke(cli, ["tune", str(path), "-o", str(tmp_path / "out2")])
    assert result.exit_code == 0, result.output
    assert "warning: preset" in result.output and "compute capability" in result.output


# --- the tuned card: derived options and text -----------------------------------------


def test_l2_sets_keep_the_device_l2_over_the_tuned_channels() -> None:
    h100 = card("SM90_H100")
    assert dl2_value(50 << 20, 40, h100)[0].startswith("S:256:128:20,L:B:m:L:X")
    assert {40, 41} <= set(valid_channel_counts(50 << 20, h100))
    # 82 banks hold no whole power-of-two set count: the nearest size, said so
    value, note = dl2_value(50 << 20, 41, h100)
    assert value.startswith("S:128:128:39,") and "nearest 52396032 B (-0.06%)" in note
    with pytest.raises(HilsimError, match="has no geometry over 80 banks"):
        dl2_value(1000, 40, h100)  # under one line per bank
    qv = card("SM7_QV100")  # 24 ways, IPOLY set index (16/32/64 sets)
    value, note = dl2_value(int(4.5 * 2**20), 24, qv)  # the TITAN V's L2 over 24 channels
    assert value.startswith("S:32:128:24,L:B:m:L:P") and note
    value, note = dl2_value(6 << 20, 8, qv)  # 128 sets: IPOLY cannot hash them
    assert value.startswith("S:128:128:24,L:B:m:L:L") and "linear" in note


@pytest.mark.parametrize("base", ["SM7_QV100", "SM75_RTX2060"])
@pytest.mark.parametrize("mib", [40, 50])
def test_an_a100_or_h100_l2_fits_any_base(base: str, mib: int) -> None:
    """An A100's 40 MiB or an H100's 50 MiB L2 on a Volta (24-way) or Turing (16-way)
    base: for every channel count the search may take, the chosen sets (a power of two:
    GPGPU-Sim's linear and XOR set indices mask with sets - 1) and ways hold the L2, to
    the byte where a geometry exists, else within 2 % and said so; the set index is one
    GPGPU-Sim can take, and the base's own channel count is among them."""
    c = card(base)
    sub = int(c.option("-gpgpu_n_sub_partition_per_mchannel"))
    b_ways = int(c.option("-gpgpu_cache:dl2").split(",")[0].split(":")[3])
    channels = valid_channel_counts(mib << 20, c)
    assert int(c.option("-gpgpu_n_mem")) in channels
    exact = 0
    for n in channels:
        value, note = dl2_value(mib << 20, n, c)
        sets, line, ways = (int(x) for x in value.split(",")[0].split(":")[1:])
        total = sets * line * ways * n * sub
        assert sets & (sets - 1) == 0 and 1 <= ways <= 64, value
        assert cache_problems({"-gpgpu_cache:dl2": value}) == [], value
        assert line == 128 and f"{sets} x 128 B x {ways} ways" in note
        if total == mib << 20:
            exact += 1
            assert "nearest" not in note
        else:
            assert abs(total / (mib << 20) - 1) <= 0.02 and f"nearest {total} B" in note
        assert (ways != b_ways) == (f"ways {b_ways} -> {ways}" in note), note
    assert exact >= 10  # A100 / H100 channel counts (HBM: 40, 80; 5 x 2^k) hold it exactly
    if base == "SM7_QV100" and mib == 50:  # Accel-Sim's H100 configs on a Volta base
        value, note = dl2_value(50 << 20, 32, c)
        assert value.startswith("S:256:128:25,L:B:m:L:L,") and "ways 24 -> 25" in note
        assert "set index P cannot index 256 sets: linear (L)" in note


def test_partition_indexing_is_the_base_unless_it_cannot_hash_the_channels_evenly() -> None:
    """IPOLY only where the channels x sub-partitions are a power of two GPGPU-Sim hashes
    (16, 32, 64); at 24 channels it would fold a 64-slice hash modulo 48 (the whole-card
    check measures a quarter less streaming than the slice)."""
    qv = card("SM7_QV100")  # IPOLY (2), 2 sub-partitions per channel
    assert partition_indexing(32, qv) == ("2", "base card")
    assert partition_indexing(16, qv) == ("2", "base card")
    idx, why = partition_indexing(24, qv)  # 24 x 2 = 48 slices
    assert idx == "0" and "not 24 x 2" in why, why
    assert partition_indexing(40, qv)[0] == "0"  # 64 x 2 = 128: not hashable
    assert partition_indexing(40, card("SM90_H100")) == ("0", "base card")


def test_the_interconnect_grows_with_the_tuned_card() -> None:
    text = (DATA / "gpgpusim" / "SM90_H100.upstream.config_hopper_islip.icnt").read_text()
    same, note = icnt_for(text, 212)
    assert same == text and note == ""
    bigger, note = icnt_for(text, 300)
    assert "k = 300;" in bigger and "212 -> 300" in note
    assert bigger.replace("k = 300;", "k = 212;") == text


def test_config_text_replaces_in_place_and_keeps_every_other_line(tmp_path: Path) -> None:
    qv = card("SM7_QV100")
    settings = [
        Setting("-gpgpu_l1_latency", "33", "measured", "L1 hit chase"),
        Setting("-gpgpu_n_clusters", "84", "device", "device sm_count"),
        Setting("-gpgpu_not_in_base", "1", "derived", "a new option"),
    ]
    text = config_text(qv, settings, ["header line"])
    out = tmp_path / "gpgpusim.config"
    out.write_text(text)
    opts = read_options(out).options()
    assert opts["-gpgpu_l1_latency"] == "33" and opts["-gpgpu_n_clusters"] == "84"
    assert opts["-gpgpu_not_in_base"] == "1"
    set_names = {s.option for s in settings}
    base = {k: v for k, v in qv.options().items() if k not in set_names}
    assert {k: v for k, v in opts.items() if k not in set_names} == base
    assert text.count("-gpgpu_l1_latency ") == 1  # replaced, not appended
    assert "# hilsim measured: L1 hit chase (base: 20)" in text


def test_a_tuned_latency_above_the_unit_depth_raises_max() -> None:
    """GPGPU-Sim sizes the SP pipeline by the MAX entry: a MAD of 10 on the RTX 2060's
    4,4,4,4 list would overrun it (simulated: SIGSEGV), so MAX becomes 10."""
    rtx = card("SM75_RTX2060")
    lists = {"-ptx_opcode_latency_fp": list_rows(rtx, "-ptx_opcode_latency_fp")}
    lists["-ptx_opcode_latency_fp"][3].update(value="10", kind="measured")
    pipeline_depths(rtx, lists)
    fp = [r["value"] for r in lists["-ptx_opcode_latency_fp"]]
    assert fp == ["4", "10", "4", "10", "39"]
    assert lists["-ptx_opcode_latency_fp"][1]["kind"] == "derived"
    # a DIV longer than the SFU pipeline (max(dp DIV, SFU)) raises the SFU's
    lists = {"-ptx_opcode_latency_int": list_rows(rtx, "-ptx_opcode_latency_int")}
    lists["-ptx_opcode_latency_int"][4].update(value="400", kind="measured")
    pipeline_depths(rtx, lists)
    assert lists["-ptx_opcode_latency_sfu"][0]["value"] == "400"
    # within the depth: nothing moves
    lists = {"-ptx_opcode_latency_fp": list_rows(card("SM7_QV100"), "-ptx_opcode_latency_fp")}
    lists["-ptx_opcode_latency_fp"][3].update(value="9", kind="measured")
    pipeline_depths(card("SM7_QV100"), lists)
    assert lists["-ptx_opcode_latency_fp"][1]["value"] == "13"


def test_a_base_interval_above_a_tuned_latency_is_lowered_to_it() -> None:
    """GPGPU-Sim starts an instruction at pipeline stage latency - interval: the RTX
    2060's dp ADD interval 64 under a measured dp ADD latency of 8 would index stage -56
    (SIGSEGV). The interval becomes 8, said so; measured intervals and those already
    within their latency stay."""
    rtx = card("SM75_RTX2060")
    lists = {"-ptx_opcode_latency_dp": list_rows(rtx, "-ptx_opcode_latency_dp")}
    lists["-ptx_opcode_latency_dp"][0].update(value="8", kind="measured")
    intervals_within_latencies(rtx, lists)
    dp = lists["-ptx_opcode_initiation_dp"]
    assert [r["value"] for r in dp] == ["8", "64", "64", "64", "130"]
    assert dp[0]["kind"] == "derived" and "stage" in dp[0]["note"]
    # a measured interval is the loop's (kept at or below its latency there)
    lists["-ptx_opcode_initiation_dp"][2].update(value="64", kind="measured")
    lists["-ptx_opcode_latency_dp"][2].update(value="8", kind="measured")
    intervals_within_latencies(rtx, lists)
    assert lists["-ptx_opcode_initiation_dp"][2]["value"] == "64"
    # nothing above its latency: no initiation list is added
    lists = {"-ptx_opcode_latency_fp": list_rows(rtx, "-ptx_opcode_latency_fp")}
    intervals_within_latencies(rtx, lists)
    assert set(lists) == {"-ptx_opcode_latency_fp"}


# --- the command's errors --------------------------------------------------------------


def test_on_simulator_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mb = str(DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json")

    def run(*args: str) -> tuple[int, str]:
        code = main(["tune", *args])
        out = capsys.readouterr()
        return code, out.out + out.err

    code, out = run(mb, "--base", "SM7_QV100", "-o", str(tmp_path / "a"))
    assert code == 2 and "--base and --workers need --on-simulator" in out
    code, out = run("--on-simulator", "-o", str(tmp_path / "b"))
    assert code == 2 and "needs MICROBENCH.json" in out
    code, out = run(mb, "--on-simulator", "--preset", "QV100", "-o", str(tmp_path / "c"))
    assert code == 2 and "do not apply" in out
    from hilsim.simmodel.tuner import search  # noqa: PLC0415 (the module under test)

    monkeypatch.setattr(search, "find_build", lambda: None)
    code, out = run(mb, "--on-simulator", "-o", str(tmp_path / "d"))
    assert code == 2 and "no GPGPU-Sim build found" in out
    assert len(out.strip().splitlines()) == 1 and not (tmp_path / "d").exists()


@pytest.mark.parametrize("clock", [0.0001, 0.0004, math.inf, 1e9])
def test_a_clock_domain_no_simulator_run_ends_on_is_refused(clock: float) -> None:
    """A measured SM clock that rounds to 0 MHz (``-gpgpu_clock_domains 0:0:0:...``: the
    simulator never finishes) or past any GPU's is refused before any run."""
    qv = card("SM7_QV100")
    domains, _ = clock_domains(qv, {}, {"sm_clock_mhz": 1380.0})
    assert domains.core == 1380.0
    with pytest.raises(HilsimError, match="clock would be .* a clock must be 1..100000 MHz"):
        clock_domains(qv, {}, {"sm_clock_mhz": clock})


def test_on_simulator_refuses_device_facts_no_gpu_has_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hilsim.simmodel.tuner import search  # noqa: PLC0415 (the module under test)

    monkeypatch.setattr(search, "find_build", lambda: pytest.fail("looked for a build"))
    document = json.loads((DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json")
                          .read_text())
    document["device"]["sm_count"] = 10**12
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(document))
    code = main(["tune", str(bench), "--on-simulator", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "bench.json: device: sm_count" in err[0], err
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"max_sm_clock_mhz": 0.0002}))
    code = main(["tune", str(DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"),
                 "--on-simulator", "--device-facts", str(facts), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "max_sm_clock_mhz" in err[0], err


def test_the_gpgpusim_convention_says_when_it_clamps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Silicon FFMA/IMAD ~4 cycles under the unit map's floor (~6.35 at option 1): the
    option stays 1, and the console and the report say the target is below the floor."""
    doc = json.loads((DATA / "silicon" / "H100" / "microbench.json").read_text())
    doc["device"].update(compute_capability="7.0", cc_major=7, shared_mem_per_sm_bytes=98304,
                         l2_cache_bytes=6 << 20, memory_bus_width_bits=4096)
    path = tmp_path / "h100-as-volta.json"
    path.write_text(json.dumps(doc))
    assert main(["tune", str(path), "--convention", "gpgpusim", "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "warning: -ptx_opcode_latency_fp: below the simulator's pipeline floor" in err
    report = json.loads((tmp_path / "o" / "tune-report.json").read_text())
    fp = next(o for o in report["options"] if o["name"] == "-ptx_opcode_latency_fp")
    assert fp["value"].startswith("1,1,1,1") and "pipeline floor" in fp["note"]


# --- the loop's bookkeeping on a stand-in simulator ------------------------------------


#: a MAD unit of the stand-in simulator: (list option suffix, unit-count option, evaluator
#: and measurement name stem, knob prefix)
_MAD_UNITS = {
    "fp32": ("fp", "-gpgpu_num_sp_units", "fp"),
    "int32": ("int", "-gpgpu_num_int_units", "int"),
    "fp64": ("dp", "-gpgpu_num_dp_units", "dp"),
}


def _tune_mad_stand_in(  # noqa: PLR0913 - the stand-in's whole description
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    base: str,
    unit: str,
    sim,  # noqa: ANN001 - (latency, interval, rate asked) -> (chain, cycles per inst per unit)
    measured: tuple[float, float],
    workers: int = 1,
    say=None,  # noqa: ANN001
    device: dict | None = None,
    with_ports: bool = False,
):  # noqa: ANN202 - the tuner's result
    """Tune ``unit``'s MAD latency and interval of ``base`` against a stand-in simulator.

    ``sim`` answers a candidate's (latency, interval) with the dependent chain's cycles and
    the cycles per instruction per unit at full occupancy; ``measured`` is the same pair as
    the suite measured it (``with_ports``: ``sim`` also gets the candidate's
    register-file ports). Every candidate must keep its interval at or below its latency
    (GPGPU-Sim crashes otherwise)."""
    from hilsim.simmodel.tuner import evaluators, search  # noqa: PLC0415 (the module under test)

    lists, count_option, prefix = _MAD_UNITS[unit]
    units = int(card(base).option(count_option))

    def evaluate(self, evaluators, c):  # noqa: ANN001, ANN202
        lat = int(list_entries(c, f"-ptx_opcode_latency_{lists}")[3])
        ini = int(list_entries(c, f"-ptx_opcode_initiation_{lists}")[3])
        assert ini <= lat, f"interval {ini} above latency {lat}: the simulator would crash"
        ports = (int(c.option("-gpgpu_reg_file_port_throughput")),) if with_ports else ()
        chain, cpi = sim(lat, ini, f"tput.{unit}" in evaluators, *ports)
        out = {}
        if f"lat.{unit}" in evaluators:
            out[f"{unit}_latency"] = chain
        if f"tput.{unit}" in evaluators:
            out[f"{unit}_throughput"] = units * 64 / cpi
        return out

    monkeypatch.setattr(evaluators.CandidateRunner, "evaluate", evaluate)
    src = json.loads((DATA / "microbench" / "gpgpusim" / f"{base}.microbench.json").read_text())
    src["device"].update(device or {})
    for m in src["measurements"]:
        if m["name"] == f"{unit}_latency":
            m["value"] = measured[0]
        if m["name"] == f"{unit}_throughput":
            m["value"] = units * 64 / measured[1]
    path = tmp_path / "microbench.json"
    path.write_text(json.dumps(src))
    return search.tune_on_simulator(
        path, base=ACCEL / f"{base}.gpgpusim.config", build=object(), workers=workers,
        say=say, only=(f"{prefix}_mad_latency", f"{prefix}_mad_initiation"))


def test_an_interval_simulated_at_a_stale_latency_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full-occupancy rate is latency-bound near the interval, and an interval above its
    latency crashes GPGPU-Sim: the MAD interval moves once its latency is settled and
    forgets points simulated at another latency. Stand-in simulator (a card with DP MAD
    latency 8, interval 6; the chain adds 5.3 cycles, the rate pays 0.8 cycle per cycle of
    latency above 8): the interval comes back 6, not the 5 that a point simulated at the
    first-guess latency 13 brackets with. (Real-simulator evidence: drawn cards in
    benchmarks/tune_on_simulator.py.)"""

    def tune(latency: float, interval: float):  # noqa: ANN202
        return _tune_mad_stand_in(
            monkeypatch, tmp_path, "SM7_QV100", "fp64",
            lambda lat, ini, _rate: (lat + 5.3, ini + 0.8 * max(0, lat - 8)),
            (latency, interval))

    result = tune(13.3, 6)
    got = {st.knob.key: st.value for st in result.knobs}
    assert got == {"dp_mad_latency": 8, "dp_mad_initiation": 6}
    # silicon-like: a 4-cycle chain (below the simulator's floor of 1 + 5.3) at interval
    # 2: the latency stops at the interval, said so; the interval is kept
    result = tune(4.0, 2)
    got = {st.knob.key: st for st in result.knobs}
    assert got["dp_mad_initiation"].value == 2 and got["dp_mad_latency"].value == 2
    assert "below the simulator's floor" in got["dp_mad_latency"].note
    assert "initiation interval" in got["dp_mad_latency"].note


def test_an_interval_next_to_its_latency_is_found_where_the_rate_is_not_monotone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPGPU-Sim's full-occupancy rate is not monotone in the interval next to the
    entry's latency (RTX 2060 structure, fp32 MAD latency 7: interval 6 gives 7.37
    cycles per instruction per unit, interval 7 gives 7.20). Stand-in simulator with that
    staircase (one interval below the latency costs 1.17 cycles more): a bracket search
    capped at the latency stops at 7 (7.20 < 7.37, nothing above allowed); the
    neighbours simulated in one round give 6, the exact rate. Every candidate keeps its
    interval at or below its latency (the simulator crashes otherwise)."""
    calls: list[int] = []

    def cpi(lat: int, ini: int) -> float:
        return ini + 0.2 + (1.17 if lat - ini == 1 else 0.0)

    def sim(lat: int, ini: int, rate: bool) -> tuple[float, float]:
        if rate:
            calls.append(ini)
        return lat + 5.3, cpi(lat, ini)

    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM75_RTX2060", "fp32", sim,
                                (7 + 5.3, cpi(7, 6)), workers=2)
    got = {st.knob.key: st for st in result.knobs}
    assert got["fp_mad_latency"].value == 7
    assert got["fp_mad_initiation"].value == 6
    assert not got["fp_mad_initiation"].search.unreachable
    assert 5 in calls  # the neighbours below the settled 7 were simulated, not only 6


def test_a_trial_interval_below_the_best_does_not_pull_the_latency_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H100 silicon int32 case: a 4-cycle IMAD chain below the simulator's floor
    (latency 1 + 5.3) and a rate of 2.00 cycles per instruction per unit, simulated a
    little above the interval (2 -> 2.06). The search tries interval 1 (1.06) and keeps
    2; the latency, held at or above the interval, stays at 2 (reported unreachable at
    that bound) instead of following the trial to 1 and capping the interval at 1."""
    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM7_QV100", "int32",
                                lambda lat, ini, _rate: (lat + 5.3, ini + 0.06), (4.065, 2.0))
    got = {st.knob.key: st for st in result.knobs}
    assert got["int_mad_initiation"].value == 2
    assert 1 in got["int_mad_initiation"].search.history  # the neighbour was tried
    assert got["int_mad_latency"].value == 2
    assert "below the simulator's floor" in got["int_mad_latency"].note


#: GPGPU-Sim 667834c on the drawn QV100-structure card of seed 2 (heldout.draw_card):
#: (DP MAD latency, interval) -> (dependent DFMA chain, cycles per DFMA per DP unit at full
#: occupancy), simulated with the search's lat.fp64 / tput.fp64 evaluators. The card's own
#: pair is (6, 6); the rate is not monotone next to the latency (6/5 -> 5.218, 6/6 ->
#: 7.855, 7/7 -> 7.418).
QV100_SEED2_DP = {
    (4, 2): (9.328, 2.177), (4, 3): (9.328, 3.190), (4, 4): (9.328, 5.430),
    (5, 2): (10.320, 2.062), (5, 3): (10.320, 3.151), (5, 4): (10.320, 5.096),
    (5, 5): (10.320, 6.170),
    (6, 2): (11.312, 2.063), (6, 3): (11.312, 3.168), (6, 4): (11.312, 5.140),
    (6, 5): (11.312, 5.218), (6, 6): (11.312, 7.855),
    (7, 2): (12.305, 2.074), (7, 3): (12.305, 3.131), (7, 4): (12.305, 5.033),
    (7, 5): (12.305, 5.687), (7, 6): (12.305, 6.358), (7, 7): (12.305, 7.418),
    (8, 2): (13.297, 2.071), (8, 3): (13.297, 3.285), (8, 4): (13.297, 4.998),
    (8, 5): (13.297, 5.842), (8, 6): (13.297, 6.383), (8, 7): (13.297, 7.378),
    (8, 8): (13.297, 8.338),
    (9, 2): (14.289, 2.200), (9, 3): (14.289, 3.133), (9, 4): (14.289, 4.954),
    (9, 5): (14.289, 5.497), (9, 6): (14.289, 6.383), (9, 7): (14.289, 7.227),
    (9, 8): (14.289, 8.338), (9, 9): (14.289, 9.356),
}


def test_a_latency_pinned_by_its_interval_moves_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drawn QV100 card of seed 2 (DP MAD latency 6, interval 6), replayed from the
    simulator's own figures (:data:`QV100_SEED2_DP`; latencies above 9 continue the chain
    by 0.992 a cycle and keep row 9's rates). The first-guess interval 7 (7.855 floored)
    bounds the latency at 7 (an interval above its latency crashes GPGPU-Sim), and at
    latency 7 no interval gives the rate (7/7: 7.418). Each search alone is stuck at the
    other's bound; the joint step simulates latency 6 with intervals 4-6 in one round and
    takes 6/6, nearer on both the chain and the rate."""
    seen: list[tuple[int, int]] = []

    def sim(lat: int, ini: int, _rate: bool) -> tuple[float, float]:
        seen.append((lat, ini))
        if (min(lat, 9), ini) in QV100_SEED2_DP:
            chain, cpi = QV100_SEED2_DP[(min(lat, 9), ini)]
            return chain + 0.992 * max(0, lat - 9), cpi
        return lat + 5.3, ini + 0.36

    lines: list[str] = []
    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM7_QV100", "fp64", sim,
                                QV100_SEED2_DP[(6, 6)], workers=2, say=lines.append)
    got = {st.knob.key: st for st in result.knobs}
    assert (got["dp_mad_latency"].value, got["dp_mad_initiation"].value) == (6, 6), lines
    assert not got["dp_mad_latency"].note and not got["dp_mad_latency"].search.unreachable
    assert result.final["fp64_latency"] == QV100_SEED2_DP[(6, 6)][0]
    assert (7, 7) in seen  # the state each search alone stops in was simulated
    assert any("joint step" in line for line in lines), lines


def test_a_target_left_off_by_more_than_its_tolerance_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A settled search is not a met target. Stand-in simulator whose DP rate jumps
    across the measured one between adjacent intervals (5 -> 5.2, 6 -> 7.9 cycles per
    DFMA per unit for 6.4: the drawn-card case of a rate not monotone next to the
    latency): the interval settles on the nearer side, 19% under the rate, and the
    report (per target and in ``off_target``) and the console flag it; the chain, 0.2
    cycle from the measured 13.5 (half a latency step at most), is within its tolerance
    and not flagged."""
    from hilsim.simmodel.tuner import report  # noqa: PLC0415 (the module under test)

    def sim(lat: int, ini: int, _rate: bool) -> tuple[float, float]:
        return lat + 5.3, (ini + 0.2 if ini <= 5 else ini + 1.9)

    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM7_QV100", "fp64", sim, (13.5, 6.4))
    got = {st.knob.key: st.value for st in result.knobs}
    assert got == {"dp_mad_latency": 8, "dp_mad_initiation": 5}
    doc = report.report(result)
    rows = {t["knob"]: t for t in doc["targets"]}
    off = rows["dp_mad_initiation"]["off_target"]
    assert off is not None and not rows["dp_mad_initiation"]["unreachable"]
    assert off["simulated"] == pytest.approx(5.2) and off["measured"] == pytest.approx(6.4)
    assert off["relative"] == pytest.approx(-1.2 / 6.4)
    assert off["tolerance"] == pytest.approx(0.5)  # half an interval step, slope 1
    assert rows["dp_mad_latency"]["off_target"] is None
    assert rows["dp_mad_latency"]["tolerance"] == pytest.approx(0.5)
    assert [o["knob"] for o in doc["off_target"]] == ["dp_mad_initiation"]
    json.dumps(doc)  # the report stays writable
    lines = report.summary(result)
    flagged = [line for line in lines if "OFF TARGET" in line]
    assert any("-ptx_opcode_initiation_dp[3]" in line and "-18.8%" in line
               and "tolerance 7.8%" in line for line in flagged), lines
    assert not any("-ptx_opcode_latency_dp[3]" in line for line in flagged), lines
    assert any("1 target(s) OFF TARGET" in line and "dp_mad_initiation" in line
               for line in lines), lines


def test_a_50_mib_hbm_volta_card_tunes_on_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A probe reporting compute capability 7.0, HBM and a 50 MiB L2 (Accel-Sim's own H100
    configs): the on-simulator tuner starts (stand-in simulator for the DP MAD pair),
    writes a card GPGPU-Sim can run whose L2 banks hold 50 MiB (256 sets x 25 ways over
    32 channels of 2 banks), and the console says what was chosen. An L2 no geometry
    holds is refused in one line before any run, nothing written."""
    from hilsim.simmodel.tuner import report, search  # noqa: PLC0415 (the module under test)

    result = _tune_mad_stand_in(
        monkeypatch, tmp_path, "SM7_QV100", "fp64",
        lambda lat, ini, _rate: (lat + 5.3, ini + 0.2), (13.3, 6.2),
        device={"l2_cache_bytes": 50 << 20, "memory_type": "HBM2",
                "compute_capability": "7.0"})
    out = report.write(result, tmp_path / "card")
    opts = read_options(out / "gpgpusim.config").options()
    assert problems(opts) == []
    sets, line, ways = (int(x) for x in opts["-gpgpu_cache:dl2"].split(",")[0].split(":")[1:])
    banks = int(opts["-gpgpu_n_mem"]) * int(opts["-gpgpu_n_sub_partition_per_mchannel"])
    assert (sets, ways, banks) == (256, 25, 64) and sets * line * ways * banks == 50 << 20
    assert any(text.startswith("  L2 geometry: -gpgpu_cache:dl2 S:256:128:25,")
               and "ways 24 -> 25" in text for text in report.summary(result))
    doc = json.loads((out / "tune-report.json").read_text())
    dl2 = next(o for o in doc["options"] if o["option"] == "-gpgpu_cache:dl2")
    assert "ways 24 -> 25" in dl2["source"]

    monkeypatch.setattr(search, "find_build", object)
    bench = json.loads((DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json")
                       .read_text())
    bench["device"]["l2_cache_bytes"] = 200  # under one 128 B line in each of 2 banks
    path = tmp_path / "tiny-l2.json"
    path.write_text(json.dumps(bench))
    capsys.readouterr()
    code = main(["tune", str(path), "--on-simulator", "--base",
                 str(ACCEL / "SM7_QV100.gpgpusim.config"), "-o", str(tmp_path / "no")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "device L2 of 200" in err[0] and "has no geometry" in err[0], err
    assert not (tmp_path / "no").exists()


# what GPGPU-Sim 667834c adds to a dependent FP32 chain beyond the MAD latency, by
# register-file ports (SM90_H100, latency 1: 6.328 at 2 ports, 5.289 at 4 and 8)
_CHAIN_OVERHEAD_BY_PORTS = {2: 5.328, 4: 4.289, 8: 4.289}


def test_a_chain_below_the_floor_searches_the_register_file_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The silicon H100's FFMA chain (4.07 cycles, 1.022 cycles per FFMA per unit) on a
    stand-in simulator that adds GPGPU-Sim's measured chain overhead per port count: at the
    base's 2 ports latency 1 gives 6.33, the settled candidate is simulated at 4 and 8
    ports (5.29 both), 4 ports are taken, the searches restart on them, and the report
    names the simulator's true floor at latency 1."""
    from hilsim.simmodel.tuner import report  # noqa: PLC0415 (the module under test)

    seen_ports: list[int] = []

    def sim(lat: int, ini: int, _rate: bool, ports: int) -> tuple[float, float]:
        seen_ports.append(ports)
        return lat + _CHAIN_OVERHEAD_BY_PORTS[ports], ini + 0.04

    lines: list[str] = []
    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM7_QV100", "fp32", sim, (4.07, 1.022),
                                say=lines.append, with_ports=True)
    got = {st.knob.key: st for st in result.knobs}
    assert (got["fp_mad_latency"].value, got["fp_mad_initiation"].value) == (1, 1)
    settings = {s.option: s for s in result.settings}
    assert settings["-gpgpu_reg_file_port_throughput"].value == "4"
    assert settings["-gpgpu_reg_file_port_throughput"].kind == "measured"
    assert result.final["fp32_latency"] == pytest.approx(5.289)
    assert seen_ports.count(8) == 1  # one trial, then the searches ran at 4
    trial = result.port_trial
    assert trial["taken"] == 4 and trial["base"] == 2
    assert trial["chains"]["fp_mad_latency"]["chain_by_ports"] == pytest.approx(
        {"2": 6.328, "4": 5.289, "8": 5.289})
    note = got["fp_mad_latency"].note
    assert "below the simulator's floor" in note and "8 give 5.289" in note, note
    assert any("register-file ports" in line for line in lines), lines
    assert report.report(result)["register_file_ports"]["taken"] == 4


def test_ports_are_kept_where_they_do_not_lower_the_chain_or_no_chain_needs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No trial where the chain is reached (a measured 10.33: latency 5 at 2 ports), and a
    trial that does not move the chain keeps the base's 2 ports (stated)."""
    seen_ports: list[int] = []

    def sim(lat: int, ini: int, _rate: bool, ports: int) -> tuple[float, float]:
        seen_ports.append(ports)
        return lat + _CHAIN_OVERHEAD_BY_PORTS[ports], ini + 0.04

    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM7_QV100", "fp32", sim, (10.33, 2.04),
                                with_ports=True)
    assert result.port_trial is None and set(seen_ports) == {2}
    assert "-gpgpu_reg_file_port_throughput" not in {s.option for s in result.settings}

    def flat(lat: int, ini: int, _rate: bool, _ports: int) -> tuple[float, float]:
        return lat + 5.328, ini + 0.04

    lines: list[str] = []
    result = _tune_mad_stand_in(monkeypatch, tmp_path, "SM7_QV100", "fp32", flat, (4.07, 1.022),
                                say=lines.append, with_ports=True)
    assert result.port_trial is not None and result.port_trial["taken"] is None
    assert "-gpgpu_reg_file_port_throughput" not in {s.option for s in result.settings}
    assert any("more ports do not lower them" in line for line in lines), lines
