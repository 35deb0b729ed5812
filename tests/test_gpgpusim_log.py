"""Reading a real GPGPU-Sim log of our own run (tests/data/gpgpusim/README.md)."""

from __future__ import annotations

import gzip
from pathlib import Path

from hilsim.simmodel.gpgpusim.run import kernel_cycles, why_failed

LOG = Path(__file__).parent / "data" / "gpgpusim" / "vecadd_chase.SM7_QV100-1sm.log.gz"


def test_kernel_cycles_of_a_real_log() -> None:
    text = gzip.decompress(LOG.read_bytes()).decode()
    assert kernel_cycles(text) == [("_Z6vecaddPKfS0_Pfi", 6055), ("_Z5chasePKjiPj", 45658)]
    # a log cut inside the second block keeps the first kernel only
    cut = text[: text.index("kernel_name = _Z5chasePKjiPj") + 40]
    assert kernel_cycles(cut) == [("_Z6vecaddPKfS0_Pfi", 6055)]
    assert kernel_cycles("") == []


def test_why_failed_picks_the_telling_line() -> None:
    text = gzip.decompress(LOG.read_bytes()).decode()
    head = text[: text.index("kernel_name = _Z5chasePKjiPj")]
    log = head + "GPGPU-Sim PTX: ERROR ** unknown special register\nsome trailing line\n"
    assert why_failed(log) == "GPGPU-Sim PTX: ERROR ** unknown special register"
    assert why_failed("") == "empty log"
    assert why_failed("just\nlines\n") == "last line: lines"
    # a program named like an error word is not the reason
    assert why_failed("Parsing clock64_abort.1.sm_70.ptx\nbind\n") == "last line: bind"
