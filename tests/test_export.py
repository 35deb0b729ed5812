"""hilsim.simmodel.export: sampled kernelslist + weights, trace checks, mapping results back.

The traces folders here are built in the layout Accel-Sim's tracer and post-processor
write (``kernelslist.g`` of ``MemcpyHtoD`` and ``kernel-N.traceg`` lines; each trace
starting with the ``-key = value`` header that ``tracer_tool.cu`` prints). No real
NVBit trace small enough to vendor was found, so the headers are written in that
format by :func:`_trace`, with mangled names as the tracer prints them.
"""

from __future__ import annotations

import lzma

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hilsim.simmodel.export import match_sim_results, trace_header, weights_path, write_kernelslist

from hilsim.cli.main import cli
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, samples_frame

NAMES = {i: f"void vecAdd<{i}>(float*)" if i % 2 else "gemm_kernel" for i in range(10)}
MANGLED = {i: f"_Z6vecAddILi{i}EEvPf" if i % 2 else "gemm_kernel" for i in range(10)}


def _plan(ids, names=NAMES) -> Plan:
    samples = samples_frame(np.array(ids), np.full(len(ids), 2.0), np.arange(len(ids)))
    samples["name"] = [names[i] for i in samples["launch_id"]]
    return Plan("test", {}, {"n_launches": 10}, [], samples)


def _trace(folder, kid: int, name: str, xz: bool = False) -> str:
    text = (
        f"-kernel name = {name}\n-kernel id = {kid}\n-grid dim = (80,1,1)\n"
        "-block dim = (256,1,1)\n-shmem = 0\n-nregs = 32\n-binary version = 90\n"
        "-cuda stream id = 0\n-shmem base_addr = 0x00007f0000000000\n"
        "-local mem base_addr = 0x00007f0002000000\n-nvbit version = 1.7.1\n"
        "-accelsim tracer version = 5\n-enable lineinfo = 0\n\n#traces format = [line_num] PC "
        "mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [adrrescompress?] "
        "[mem_addresses] immediate\n\n#BEGIN_TB\n\nthread block = 0,0,0\n"
    )
    file = f"kernel-{kid}.traceg" + (".xz" if xz else "")
    if xz:
        (folder / file).write_bytes(lzma.compress(text.encode()))
    else:
        (folder / file).write_text(text)
    return file


@pytest.fixture()
def traces(tmp_path):
    """Launches 0..9 traced as kernel-1..10 (every 3rd compressed), memcpys between."""
    folder = tmp_path / "traces"
    folder.mkdir()
    lines = ["MemcpyHtoD,0x7f0000000000,4096"]
    for launch in range(10):
        lines.append(_trace(folder, launch + 1, MANGLED[launch], xz=launch % 3 == 2))
        if launch == 4:
            lines.append("MemcpyHtoD,0x7f0000100000,8192")
    (folder / "kernelslist.g").write_text("\n".join(lines) + "\n")
    return folder


def test_bare_list_in_launch_order(tmp_path):
    plan = _plan([7, 2, 4])
    klist, weights = write_kernelslist(plan, tmp_path / "sampled.g")
    assert klist.read_text().split() == ["kernel-3.traceg", "kernel-5.traceg", "kernel-8.traceg"]
    assert weights == tmp_path / "sampled.weights.csv"
    table = pd.read_csv(weights)
    assert list(table.columns) == ["launch_id", "trace_file", "weight", "cluster", "name",
                                   "role"]
    assert list(table["launch_id"]) == [2, 4, 7]
    klist, _ = write_kernelslist(plan, tmp_path / "sampled.g", first_trace_id=11)
    assert klist.read_text().split()[0] == "kernel-13.traceg"


def test_traces_folder_keeps_memcpys_and_compressed_names(traces):
    klist, weights = write_kernelslist(_plan([2, 7]), traces / "kernelslist.sampled.g",
                                       traces=traces)
    assert klist.read_text().split() == [
        "MemcpyHtoD,0x7f0000000000,4096", "kernel-3.traceg.xz",
        "MemcpyHtoD,0x7f0000100000,8192", "kernel-8.traceg",
    ]
    assert list(pd.read_csv(weights)["trace_file"]) == ["kernel-3.traceg.xz", "kernel-8.traceg"]
    assert trace_header(traces / "kernel-3.traceg.xz")["kernel name"] == MANGLED[2]


def test_off_by_one_first_trace_id_is_caught(traces):
    # with first_trace_id=2 launch 3 (vecAdd<3>) would be replayed from kernel-5 (gemm)
    with pytest.raises(HilsimError, match="kernel-5.traceg: traces kernel 'gemm_kernel' but "
                                          "launch 3"):
        write_kernelslist(_plan([3]), traces / "s.g", first_trace_id=2, traces=traces)
    (traces / "kernel-5.traceg").write_text(
        (traces / "kernel-5.traceg").read_text().replace("-kernel id = 5", "-kernel id = 6"))
    with pytest.raises(HilsimError, match="-kernel id = 6, expected 5"):
        write_kernelslist(_plan([4]), traces / "s.g", traces=traces)


def test_wrong_kernel_in_trace_is_caught(traces):
    _trace(traces, 2, "_Z9other_kernv")
    with pytest.raises(HilsimError, match=r"kernel-2.traceg: traces kernel '_Z9other_kernv'"):
        write_kernelslist(_plan([1]), traces / "s.g", traces=traces)


def test_refusals(traces, tmp_path):
    with pytest.raises(HilsimError, match="inside"):
        write_kernelslist(_plan([1]), tmp_path / "elsewhere.g", traces=traces)
    with pytest.raises(HilsimError, match="full list"):
        write_kernelslist(_plan([1]), traces / "kernelslist.g", traces=traces)
    with pytest.raises(HilsimError, match="lists no kernel-20.traceg for launch 9"):
        write_kernelslist(_plan([9]), traces / "s.g", first_trace_id=11, traces=traces)
    (traces / "kernel-2.traceg").unlink()
    with pytest.raises(HilsimError, match="kernel-2.traceg: no such trace file"):
        write_kernelslist(_plan([1]), traces / "s.g", traces=traces)
    assert not (traces / "s.g").exists()


def test_cli_export(traces, tmp_path):
    plan = _plan([0, 5])
    plan.save(tmp_path / "stem.json")
    runner = CliRunner()
    result = runner.invoke(cli, ["export", str(tmp_path / "stem.json"), "--traces", str(traces)])
    assert result.exit_code == 0, result.output
    out = traces / "kernelslist.stem.g"
    assert out.read_text().split()[-1] == "kernel-6.traceg.xz"
    assert weights_path(out).exists()
    again = runner.invoke(cli, ["export", str(tmp_path / "stem.json"), "--traces", str(traces)])
    assert again.exit_code != 0 and "already exists" in str(again.exception)
    bare = runner.invoke(cli, ["export", str(tmp_path / "stem.json"), "-o",
                               str(tmp_path / "bare.g")])
    assert bare.exit_code == 0, bare.output
    assert (tmp_path / "bare.g").read_text().split() == ["kernel-1.traceg", "kernel-6.traceg"]


def test_match_by_order_and_names():
    plan = _plan([3, 0])
    sim = pd.DataFrame({"sim_launch": [0, 1], "kernel": ["gemm_kernel", "_Z6vecAddILi3EEvPf"],
                        "cycles": [10.0, 20.0]})
    merged = match_sim_results(plan, sim)
    assert list(merged["launch_id"]) == [0, 3]
    assert list(merged["cycles"]) == [10.0, 20.0]
    with pytest.raises(HilsimError, match="simulated kernel 1"):
        match_sim_results(plan, sim.iloc[::-1].assign(sim_launch=[0, 1]))
    with pytest.raises(HilsimError, match="hold 1 kernels"):
        match_sim_results(plan, sim.iloc[:1])


def test_preceding_warmup_is_listed_and_its_kernels_dropped_when_read_back(traces, tmp_path):
    """A plan with ``preceding:2``: the list holds each sample's 2 launches before it
    (windows merged), the weights CSV marks them warm-up with weight 0, and the log of
    that list maps back to the samples only (mutant: matching by position without the
    warm-up rows finds 6 kernels for 2 samples and refuses the log)."""
    from dataclasses import replace

    from hilsim.core.plan import parse_warmup

    plan = replace(_plan([5, 8]), warmup=parse_warmup("l2-fill+preceding:2"))
    klist, weights = write_kernelslist(plan, traces / "kernelslist.w.g", 1, traces)
    kernels = [ln for ln in klist.read_text().split() if ln.startswith("kernel")]
    # launches 3, 4, 5 and 6, 7, 8 (trace id = launch + 1)
    assert [int(k.split("-")[1].split(".")[0]) - 1 for k in kernels] == [3, 4, 5, 6, 7, 8]
    table = pd.read_csv(weights)
    assert table["role"].tolist() == ["warmup", "warmup", "sample", "warmup", "warmup",
                                      "sample"]
    assert table.loc[table["role"] == "warmup", "weight"].eq(0).all()
    simlog = pd.DataFrame({"sim_launch": range(6),
                           "kernel": [MANGLED[i] for i in (3, 4, 5, 6, 7, 8)],
                           "cycles": [10.0, 20, 30, 40, 50, 60]})
    matched = match_sim_results(plan, simlog)
    assert matched["launch_id"].tolist() == [5, 8]
    assert matched["cycles"].tolist() == [30.0, 60.0]


def test_export_cli_writes_the_plan_with_its_warmup_and_refuses_the_cold_bound(traces,
                                                                                tmp_path):
    plan_path = _plan([5, 8]).save(tmp_path / "p.json")
    runner = CliRunner()
    res = runner.invoke(cli, ["export", str(plan_path), "--traces", str(traces), "--warmup",
                              "preceding:1"])
    assert res.exit_code == 0, res.output
    assert "+ 2 warm-up launches" in res.output
    from hilsim.core.plan import load_plan

    written = load_plan(traces / "kernelslist.p.plan.json")
    assert written.warmup is not None and written.warmup.preceding == 1
    res = runner.invoke(cli, ["export", str(plan_path), "--traces", str(traces), "--warmup",
                              "auto", "-o", str(traces / "x.g")])
    assert res.exit_code != 0 and "hilsim simulate" in str(res.exception)
    assert not (traces / "x.g").exists()
