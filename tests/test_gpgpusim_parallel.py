"""Samples of one sampled simulation in parallel processes, on the simulated card.

`gpgpusim` tier. ffchain (tests/data/gpgpusim/ffchain.cu: 24 launches, each reading what
the one before wrote) on SM7_QV100 with 1 SM: a hand plan of 6 samples simulated in one
process and in chunks (2 local workers, then a local Dask cluster of 2 workers): the
merged result holds every sample once, the chunks' copies to the host agree with the
profile's, and each sample's cycles equal the one-process run's within a few cycles (a
later chunk first runs the previous chunk's last sample again, so its first sample finds
the cache state it finds in one process).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.simbuild import require_fast_forward_sim_build

pytestmark = pytest.mark.gpgpusim
DATA = Path(__file__).parent / "data" / "gpgpusim"
ONE_SM = {"-gpgpu_n_clusters": "1", "-gpgpu_perf_sim_memcpy": "0"}
ARGS = ["24", "2048"]
SAMPLES = [2, 5, 9, 14, 18, 21]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    from hilsim.simmodel.gpgpusim.compile import compile_cuda
    from hilsim.simmodel.gpgpusim.listrun import profile_on_card

    from hilsim.core.plan import Plan

    require_fast_forward_sim_build()
    root = tmp_path_factory.mktemp("par")
    program = compile_cuda(DATA / "ffchain.cu", root / "ffchain", extra_flags=("-O2",))
    bundle, _m = profile_on_card([str(program), *ARGS], "SM7_QV100", root / "p.bundle",
                                 options=ONE_SM, progress=False)
    names = pd.read_parquet(bundle / "launches.parquet")["name"].tolist()
    plan = root / "plan.json"
    Plan(method="hand", params={}, source={"n_launches": 24, "path": str(bundle)},
         clusters=[], samples=pd.DataFrame({
             "launch_id": SAMPLES, "weight": [4.0] * 6, "cluster": list(range(6)),
             "draws": [1] * 6, "name": [names[i] for i in SAMPLES]})).save(plan)
    one = _simulate(plan, program, root / "one", workers=1)
    return {"root": root, "program": program, "plan": plan, "one": one}


def _simulate(plan: Path, program: Path, out: Path, **kwargs):
    from hilsim.analyzer.simulate import simulate_plan

    return simulate_plan(plan, [str(program), *ARGS], "SM7_QV100", out, options=ONE_SM,
                         warmup="l2-fill+preceding:1", progress=False, timeout_s=600,
                         cpu_factor=3.0, **kwargs)


def _cycles(out: Path) -> dict[int, float]:
    table = pd.read_csv(out / "samples.csv")
    return dict(zip(table["launch_id"].astype(int), table["cycles"], strict=True))


def _firsts(result) -> set[int]:
    """Launch ids of the first sample of every chunk after the first."""
    run = result.runs[0]
    counts = run["chunks"]["samples_per_chunk"]
    firsts, seen = set(), 0
    for count in counts[:-1]:
        seen += count
        firsts.add(SAMPLES[seen])
    return firsts


def test_two_local_workers_give_the_one_process_samples(setup) -> None:
    out = setup["root"] / "two"
    two = _simulate(setup["plan"], setup["program"], out, workers=2)
    assert two.processes == 2 and two.runs[0]["processes"] == 2
    chunks = two.runs[0]["chunks"]
    # the later chunk fast-forwards more, so it holds fewer samples; it runs the first
    # chunk's last sample and its warm-up launch again first (carried)
    assert chunks["samples_per_chunk"] == [4, 2] and chunks["carried_per_chunk"] == [0, 2]
    assert "2 simulator processes on 2 local workers (samples per chunk: 4/2 (2 carried))" \
        in "\n".join(two.lines())
    assert (out / "sampled.log").exists() and (out / "sampled.part2.log").exists()
    assert two.data_check["reference"] == "profiled full run" and two.data_check["runs"] == 2
    one, par = _cycles(setup["root"] / "one"), _cycles(out)
    assert sorted(par) == SAMPLES
    # every sample comes within a few cycles of the one-process run (the clock domains'
    # phases depend on the absolute simulated time: 4 of 6,663), the later chunk's first
    # one too (its warm-up and the carried sample before it; measured without the carry
    # and without warm-up, a chunk's first sample came 0.66% off, with the carry exact)
    assert _firsts(two) == {18}
    assert all(abs(par[k] - one[k]) <= 0.001 * one[k] for k in SAMPLES), (one, par)
    assert all(one[k] == par[k] for k in (2, 5, 9, 14))  # the first chunk
    assert sum(two.sim_cpu_parts.values()) == pytest.approx(two.sim_cpu_s, rel=0.05)
    saved = json.loads((out / "simulate.json").read_text())
    assert saved["processes"] == 2 and saved["workers"] == 2


def test_a_dask_cluster_runs_the_same_chunks(setup) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        out = setup["root"] / "dask"
        got = _simulate(setup["plan"], setup["program"], out, scheduler=cluster.scheduler_address)
    assert got.processes == 2 and got.scheduler is not None
    local = _cycles(setup["root"] / "two") if (setup["root"] / "two").exists() else None
    par = _cycles(out)
    assert sorted(par) == SAMPLES
    if local is not None:
        assert par == local  # the same chunks, wherever they ran
