"""Simulated cards: shipped name and config path work the same; overrides; referenced files.

Configs: the shipped GPGPU-Sim files in tests/data/accelsim (commit 667834c) and
tests/data/gpgpusim/config_turing_islip.icnt (see tests/data/gpgpusim/README.md).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hilsim.simmodel.accelsim import read_options
from hilsim.simmodel.gpgpusim.cards import card_config, parse_override, shipped_cards

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data"
CARDS = ("SM7_QV100", "SM75_RTX2060", "SM86_RTX3070")


class FakeBuild:
    """Only what card_config reads of a SimBuild: its configs folder."""

    def __init__(self, root: Path) -> None:
        self.configs_dir = root / "configs" / "tested-cfgs"


@pytest.fixture
def build(tmp_path: Path) -> FakeBuild:
    b = FakeBuild(tmp_path / "sim")
    for card in CARDS:
        d = b.configs_dir / card
        d.mkdir(parents=True)
        shutil.copyfile(DATA / "accelsim" / f"{card}.gpgpusim.config", d / "gpgpusim.config")
    shutil.copyfile(DATA / "gpgpusim" / "config_turing_islip.icnt",
                    b.configs_dir / "SM75_RTX2060" / "config_turing_islip.icnt")
    return b


def test_facts_of_the_shipped_cards(build: FakeBuild) -> None:
    assert shipped_cards(build) == sorted((*CARDS, "SM90_H100"))  # + the project's card
    qv = card_config("SM7_QV100", build)
    # values as written in configs/tested-cfgs/SM7_QV100/gpgpusim.config
    assert qv.core_clock_mhz == 1132.0 and qv.clock_domains_mhz[3] == 850.0
    assert qv.sm_count == 80 and qv.l2_banks == 64
    assert qv.cache("dl1") == {"sets": 4, "line": 128, "assoc": 64, "bytes": 32768}
    f = qv.facts()
    assert f["l2_bytes"] == 6 * 1024 * 1024  # 32 sets x 128 B x 24 ways x 64 banks
    assert (f["l1_latency"], f["l2_rop_latency"], f["dram_latency"]) == (20, 160, 100)
    rtx = card_config("SM75_RTX2060", build).facts()
    assert (rtx["sm_count"], rtx["core_clock_mhz"], rtx["l2_bytes"]) == (30, 1365.0, 3 << 20)
    assert card_config("SM86_RTX3070", build).sm_count == 46
    # overrides change the facts
    one = qv.with_options({"-gpgpu_n_clusters": 1, "gpgpu_clock_domains": "1000:1000:1000:800"})
    assert one.sm_count == 1 and one.core_clock_mhz == 1000.0 and qv.sm_count == 80


def test_path_card_works_like_a_shipped_name(build: FakeBuild, tmp_path: Path) -> None:
    mine = tmp_path / "elsewhere" / "mycard"
    mine.mkdir(parents=True)
    shutil.copyfile(build.configs_dir / "SM7_QV100" / "gpgpusim.config", mine / "gpgpusim.config")
    opts = {"-gpgpu_n_clusters": "1", "-gpgpu_perf_sim_memcpy": "0"}
    by_name = card_config("SM7_QV100", build, opts)
    for card in (mine / "gpgpusim.config", mine, str(mine / "gpgpusim.config")):
        by_path = card_config(card, None, opts)
        assert by_path.options() == by_name.options()
        assert by_path.config_text() == by_name.config_text().replace("SM7_QV100", "mycard")
    a, b = tmp_path / "run_a", tmp_path / "run_b"
    by_name.write(a)
    card_config(mine, None, opts).write(b)
    assert read_options(a / "gpgpusim.config").options() == read_options(
        b / "gpgpusim.config").options()


def test_written_config_appends_overrides_after_a_newline(build: FakeBuild, tmp_path: Path) -> None:
    src = build.configs_dir / "SM7_QV100" / "gpgpusim.config"
    assert not src.read_text().endswith("\n")  # the shipped file's last line is unterminated
    cfg = card_config("SM7_QV100", build, {"-gpgpu_n_clusters": "1"})
    out = cfg.write(tmp_path / "run")
    text = out.read_text()
    assert text.startswith(src.read_text() + "\n")
    assert text.endswith("-gpgpu_n_clusters 1\n")
    opts = read_options(out).options()
    assert opts["-gpgpu_n_clusters"] == "1"  # the last value wins, as in GPGPU-Sim
    assert opts["-gpgpu_l1_latency"] == "20"
    # no overrides: the card's own text plus the missing newline
    assert card_config("SM7_QV100", build).config_text() == src.read_text() + "\n"


def test_referenced_files_are_copied_and_repointed(build: FakeBuild, tmp_path: Path) -> None:
    d = build.configs_dir / "SM75_RTX2060"
    cfg_path = d / "gpgpusim.config"
    cfg_path.write_text(cfg_path.read_text() + "\n-inter_config_file config_turing_islip.icnt")
    cfg = card_config("SM75_RTX2060", build)
    assert cfg.referenced_files() == {"-inter_config_file": (d / "config_turing_islip.icnt")}
    run = tmp_path / "run"
    cfg.write(run)
    assert (run / "config_turing_islip.icnt").read_bytes() == (
        DATA / "gpgpusim" / "config_turing_islip.icnt").read_bytes()
    # a file in a sub-folder of the config's folder lands under its base name
    (d / "icnt").mkdir()
    shutil.move(d / "config_turing_islip.icnt", d / "icnt" / "x.icnt")
    cfg_path.write_text(cfg_path.read_text().replace("config_turing_islip.icnt", "icnt/x.icnt"))
    run2 = tmp_path / "run2"
    card_config(cfg_path).write(run2)
    assert (run2 / "x.icnt").is_file()
    assert read_options(run2 / "gpgpusim.config").options()["-inter_config_file"] == "x.icnt"


def test_bad_cards_and_options(build: FakeBuild, tmp_path: Path) -> None:
    with pytest.raises(HilsimError, match=r"not a shipped card \(shipped: SM75_RTX2060"):
        card_config("SM99_NOPE", build)
    with pytest.raises(HilsimError, match="needs a GPGPU-Sim build"):
        card_config("SM7_QV100", None)
    with pytest.raises(HilsimError, match="no such GPGPU-Sim config"):
        card_config(tmp_path / "missing" / "gpgpusim.config", build)
    bad = tmp_path / "bad.config"
    bad.write_text("-gpgpu_n_clusters 4\nthis is not an option\n")
    with pytest.raises(HilsimError, match="bad.config: line 2"):
        card_config(bad)
    with pytest.raises(HilsimError, match="newline"):
        card_config("SM7_QV100", build, {"-x": "1\n-y 2"})
    with pytest.raises(HilsimError, match="not a GPGPU-Sim option"):
        card_config("SM7_QV100", build, {"-x y": "1"})
    bad.write_text("-a 1\n")
    with pytest.raises(HilsimError, match="no option -gpgpu_clock_domains"):
        _ = card_config(bad).core_clock_mhz


def test_parse_override() -> None:
    assert parse_override("-gpgpu_n_clusters=1") == ("-gpgpu_n_clusters", "1")
    assert parse_override("gpgpu_perf_sim_memcpy=0") == ("-gpgpu_perf_sim_memcpy", "0")
    assert parse_override("-gpgpu_clock_domains 1000:1000:1000:850") == (
        "-gpgpu_clock_domains", "1000:1000:1000:850")
    assert parse_override("-gpgpu_cache:dl1=S:4:128:64,L:T:m:L:L") == (
        "-gpgpu_cache:dl1", "S:4:128:64,L:T:m:L:L")
    for bad in ("-x", "=1", "-a b=c"):
        with pytest.raises(HilsimError, match="expected -option=value"):
            parse_override(bad)


def test_short_integer_latency_lists_are_completed(build: FakeBuild, tmp_path: Path) -> None:
    """The shipped RTX configs give five of the six int entries GPGPU-Sim reads (no SHFL)."""
    rtx = card_config("SM86_RTX3070", build)
    assert rtx.option("-ptx_opcode_latency_int") == "4,4,4,4,21"  # as shipped
    opts = read_options(rtx.write(tmp_path / "rtx")).options()
    assert opts["-ptx_opcode_latency_int"] == "4,4,4,4,21,32"
    assert opts["-ptx_opcode_initiation_int"] == "2,2,2,2,2,4"
    # a full list (QV100) and an override with six entries are left as given
    qv = read_options(card_config("SM7_QV100", build).write(tmp_path / "qv")).options()
    assert qv["-ptx_opcode_latency_int"] == "4,13,4,5,145,21"
    mine = rtx.with_options({"-ptx_opcode_latency_int": "5,5,5,5,30,40"})
    assert read_options(mine.write(tmp_path / "o")).options()["-ptx_opcode_latency_int"] == (
        "5,5,5,5,30,40")
    # a short override is completed too
    short = rtx.with_options({"-ptx_opcode_initiation_int": "1,1,4,4"})
    assert read_options(short.write(tmp_path / "s")).options()["-ptx_opcode_initiation_int"] == (
        "1,1,4,4,32,4")


# --- the project's SM90_H100 card -----------------------------------------------------

H100_README = Path(__file__).parents[1] / "simmodel" / "gpgpusim" / "cards" / "SM90_H100"


def test_project_card_resolves_without_a_build() -> None:
    h100 = card_config("SM90_H100", None)
    assert h100.path.parent.name == "SM90_H100"
    assert (h100.sm_count, h100.core_clock_mhz, h100.l2_banks) == (132, 1980.0, 80)
    assert h100.clock_domains_mhz == (1980.0, 3960.0, 3960.0, 3106.0)
    assert h100.facts()["l2_bytes"] == 50 << 20  # 256 sets x 128 B x 20 ways x 80 banks
    assert set(h100.referenced_files()) == {"-inter_config_file"}


def _option_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("-")]


def test_project_h100_differs_from_the_published_card_in_the_documented_lines_only() -> None:
    """The card is GPGPU-Sim's published H100 file with exactly the README's changes: the
    seven options GPGPU-Sim 667834c does not know removed, the partition indexing 6 -> 0."""
    ours = (H100_README / "gpgpusim.config").read_text()
    published = (DATA / "gpgpusim" / "SM90_H100.upstream.gpgpusim.config").read_text()
    removed = {
        "-gpgpu_n_chiplet_partition 2", "-inter_chiplet_queue_size 256",
        "-gpgpu_chiplet_interleave 0", "-gpgpu_opndcoll_model 1", "-gpgpu_lrc_enabled 1",
        "-gpgpu_lrc_max_entries 1024", "-gpgpu_lrc_max_merged 4",
        "-gpgpu_memory_partition_indexing 6",
    }
    added = "-gpgpu_memory_partition_indexing 0"
    assert [ln for ln in _option_lines(published) if ln not in removed] == [
        ln for ln in _option_lines(ours) if ln != added
    ]
    assert _option_lines(ours).count(added) == 1
    readme = (H100_README / "README.md").read_text()
    for line in removed:
        assert f"`{line}`" in readme, line  # every change is documented
    assert "baf2b8f0390342ff6bab23917d21e40a4780b2fb" in readme
    assert (H100_README / "config_hopper_islip.icnt").read_bytes() == (
        DATA / "gpgpusim" / "SM90_H100.upstream.config_hopper_islip.icnt").read_bytes()
    assert "Redistribution and use" in (H100_README / "COPYRIGHT").read_text()


def test_only_a_card_without_the_simple_dram_model_counts_dram_reads(build: FakeBuild) -> None:
    """GPGPU-Sim's simple DRAM model (the project's SM90_H100) serves L2 misses past the
    DRAM model whose counters the log's ``total dram reads`` sums: its DRAM reads read 0."""
    assert card_config("SM7_QV100", build).counts_dram_reads
    assert not card_config("SM90_H100", build).counts_dram_reads
    assert card_config("SM90_H100", build, {"-gpgpu_simple_dram_model": "0"}).counts_dram_reads
    assert not card_config("SM7_QV100", build,
                           {"-gpgpu_simple_dram_model": "1"}).counts_dram_reads


def test_the_crossbar_is_fitted_to_the_cards_nodes(tmp_path: Path) -> None:
    """A one-stage booksim fly of radix k holds k nodes (SM clusters + L2
    sub-partitions): raised only when the card has more; other topologies untouched."""
    from hilsim.simmodel.gpgpusim.cards import fit_interconnect

    icnt = (DATA / "gpgpusim" / "SM90_H100.upstream.config_hopper_islip.icnt").read_text()
    assert fit_interconnect(icnt, 212) == icnt
    assert fit_interconnect(icnt, 100) == icnt
    raised = fit_interconnect(icnt, 214)
    assert re.findall(r"^k = (\d+);", raised, re.M) == ["214"]
    changed = [(a, b) for a, b in zip(icnt.splitlines(), raised.splitlines(), strict=True)
               if a != b]
    assert changed == [("k = 212;", "k = 214;  // hilsim: raised from 212: 214 nodes "
                        "(SM clusters + L2 sub-partitions)")]
    two_stage = icnt.replace("n = 1;", "n = 2;")
    assert re.findall(r"^k = (\d+);", fit_interconnect(two_stage, 214), re.M) == ["212"]
    assert re.findall(r"^k = (\d+);", fit_interconnect(two_stage.replace("k = 212;", "k = 8;"),
                                                        214), re.M) == ["15"]
    mesh = icnt.replace("topology = fly;", "topology = mesh;")
    assert fit_interconnect(mesh, 400) == mesh

    h100 = card_config("SM90_H100", None, {"-gpgpu_n_mem": "41"})
    assert h100.interconnect_nodes == 132 + 82
    h100.write(tmp_path / "run")
    assert re.findall(r"^k = (\d+);", (tmp_path / "run" / "config_hopper_islip.icnt")
                      .read_text(), re.M) == ["214"]
    card_config("SM90_H100", None).write(tmp_path / "base")
    assert (tmp_path / "base" / "config_hopper_islip.icnt").read_text() == icnt
