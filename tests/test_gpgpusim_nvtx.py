"""NVTX ranges of an unmodified program become regions (simmodel/gpgpusim/nvtxmarks.py).

The injection library is built with the host's C compiler against the toolkit's nvtx3
headers and checked two ways: a host-only C program (tests/data/gpgpusim/nvtx_host.c)
prints the marks only with ``NVTX_INJECTION64_PATH`` set, and (``gpgpusim`` tier) a CUDA
program with nested ranges (nvtxphases.cu) profiled on the simulated card gives a regions
table whose launches sit in the ranges that enclosed them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hilsim.simmodel.gpgpusim.nvtxmarks import (
    NVTX_INJECTION_ENV,
    build_nvtx_marks,
    nvtx_environment,
    nvtx_include,
)

from hilsim.core.errors import HilsimError
from tests.simbuild import require_sim_build, unavailable

DATA = Path(__file__).parent / "data" / "gpgpusim"


@pytest.fixture(scope="module")
def host_program(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None or nvtx_include() is None:
        unavailable("no gcc or no nvtx3 headers (the CUDA toolkit's include folder)")
    out = tmp_path_factory.mktemp("nvtx") / "nvtx_host"
    subprocess.run(["gcc", "-O2", f"-I{nvtx_include()}", str(DATA / "nvtx_host.c"), "-o",
                    str(out), "-ldl"], check=True, capture_output=True, timeout=120)
    return out


def test_the_library_prints_each_push_and_pop_as_a_region_mark(host_program: Path,
                                                               tmp_path: Path) -> None:
    library = build_nvtx_marks(cache=tmp_path / "cache")
    assert build_nvtx_marks(cache=tmp_path / "cache") == library  # cached
    env = {**os.environ, NVTX_INJECTION_ENV: str(library)}
    marked = subprocess.run([str(host_program)], env=env, capture_output=True, text=True,
                            check=True, timeout=60).stdout.splitlines()
    assert marked == ["hilsim-region push outer", "work 1", "hilsim-region push inner line",
                      "work 2", "hilsim-region pop inner line", "hilsim-region pop outer",
                      "hilsim-region push inner line", "hilsim-region pop inner line"]
    bare = subprocess.run([str(host_program)], env={k: v for k, v in os.environ.items()
                                                    if k != NVTX_INJECTION_ENV},
                          capture_output=True, text=True, check=True, timeout=60)
    assert bare.stdout.splitlines() == ["work 1", "work 2"]  # without it: nothing printed


def test_without_a_compiler_the_run_goes_on_and_says_why(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("PATH", str(tmp_path))  # neither gcc nor cc
    with pytest.raises(HilsimError, match="NVTX marks: no C compiler found"):
        build_nvtx_marks(cache=tmp_path / "cache")
    env, why = nvtx_environment()
    assert env == {} and "no C compiler" in (why or "")


@pytest.mark.gpgpusim
def test_nvtx_ranges_of_a_cuda_program_become_regions_on_the_simulated_card(tmp_path) -> None:
    import pandas as pd
    from hilsim.simmodel.gpgpusim.compile import compile_cuda
    from hilsim.simmodel.gpgpusim.listrun import profile_on_card

    require_sim_build()
    if nvtx_include() is None:
        unavailable("no nvtx3 headers")
    program = compile_cuda(DATA / "nvtxphases.cu", tmp_path / "nvtxphases",
                           extra_flags=("-O2", "-ldl"))
    bundle, manifest = profile_on_card([str(program)], "SM7_QV100", tmp_path / "b.bundle",
                                       options={"-gpgpu_n_clusters": "1"}, progress=False)
    assert manifest["profilers"][0]["regions"] == 4
    regions = pd.read_parquet(bundle / "regions.parquet")
    assert regions["path"].tolist() == ["step 0", "step 0/attention", "step 1",
                                        "step 1/attention"]
    launches = pd.read_parquet(bundle / "launches.parquet")
    assert launches["region"].tolist() == ["step 0/attention"] * 2 + ["step 0"] + [
        "step 1/attention"] * 2 + ["step 1"]
