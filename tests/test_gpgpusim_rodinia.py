"""An unmodified Rodinia app on the simulated card: full, fast-forwarded and functional
runs compute the same image, which is the app's CPU reference.

`gpgpusim` tier. srad_v2 (tests/data/rodinia/README.md), 32 x 32 pixels, 10 iterations:
20 launches of 2 kernels, a copy to the host per iteration; on the reduced QV100
(``REDUCED_QV100``: 4 SMs).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hilsim.core.errors import HilsimError
from tests.simbuild import require_sim_build, unavailable

pytestmark = pytest.mark.gpgpusim
SRAD = Path(__file__).parent / "data" / "rodinia" / "srad_v2"
ARGS = ["32", "32", "0", "15", "0", "15", "0.5", "10"]
RESULT = r"^(-?\d+\.\d{5} )+$"  # the image -DOUTPUT prints, one row per line


@pytest.fixture(scope="module")
def sim():
    from hilsim.simmodel.gpgpusim.fastforward import require_fast_forward_build

    build = require_sim_build()
    try:
        require_fast_forward_build(build)
    except HilsimError as exc:
        unavailable(str(exc))
    return build


@pytest.fixture(scope="module")
def srad(sim, tmp_path_factory) -> dict[str, Path]:
    from hilsim.simmodel.gpgpusim.compile import compile_cuda

    out = tmp_path_factory.mktemp("srad")
    return {"gpu": compile_cuda(SRAD / "srad.cu", out / "srad", extra_flags=("-O2", "-DOUTPUT")),
            "cpu": compile_cuda(SRAD / "srad.cu", out / "srad_cpu",
                                extra_flags=("-O2", "-DCPU", "-DOUTPUT"))}


def test_srad_is_the_same_full_fast_forwarded_functional_and_on_the_cpu(sim, srad,
                                                                        tmp_path) -> None:
    from hilsim.simmodel.gpgpusim.datacheck import check_same_outputs, program_outputs
    from hilsim.simmodel.gpgpusim.fastforward import (
        fast_forward_env,
        run_fast_forward,
        stats_uids,
    )
    from hilsim.simmodel.gpgpusim.run import run_program
    from hilsim.simmodel.gpgpusim.workloads import REDUCED_QV100

    argv = [srad["gpu"], *ARGS]
    full = run_program(argv, "SM7_QV100", tmp_path / "full", options=REDUCED_QV100,
                       env=fast_forward_env(None), timeout_s=600, build=sim)
    ff = run_fast_forward(argv, "SM7_QV100", tmp_path / "ff", [4, 5, 13], options=REDUCED_QV100,
                          timeout_s=600, build=sim)
    functional = run_fast_forward(argv, "SM7_QV100", tmp_path / "fn", [],
                                  options=REDUCED_QV100, timeout_s=600, build=sim)
    assert stats_uids(full.stdout) == list(range(1, 21))
    assert ff.launches == 20 and ff.performance_uids == (5, 6, 14)
    assert [k for k, _c in ff.run.kernel_cycles()] == [
        "_Z11srad_cuda_1PfS_S_S_S_S_iif", "_Z11srad_cuda_2PfS_S_S_S_S_iiff",
        "_Z11srad_cuda_2PfS_S_S_S_S_iiff"]
    ref = program_outputs(full.stdout, line_pattern=RESULT)
    assert len(ref.digests) == 10 and len(ref.lines) == 32  # a copy per iteration; 32 rows
    assert len(set(ref.lines)) > 1
    check_same_outputs(ref, program_outputs(ff.run.stdout, line_pattern=RESULT))
    check_same_outputs(ref, program_outputs(functional.run.stdout, line_pattern=RESULT),
                       ("full run", "functional run"))
    # the app's CPU loop, run natively with no device (its GPU part fails and is skipped)
    cpu = subprocess.run([str(srad["cpu"]), *ARGS], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, check=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    cpu_lines = program_outputs(cpu.stdout, line_pattern=RESULT).lines
    assert cpu_lines == ref.lines
