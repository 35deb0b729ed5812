"""Measurement files the tuner's tests build from the committed ones."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"


def whole_gpu_file(tmp_path: Path, card: str = "SM7_QV100") -> Path:
    """The suite's committed file of the simulated ``card`` as a whole GPU's measurements
    (its simulated-slice parameters removed), written under ``tmp_path``."""
    src = json.loads((DATA / "microbench" / "gpgpusim" / f"{card}.microbench.json")
                     .read_text())
    for m in src["measurements"]:
        for key in ("sms_simulated", "mem_channels_simulated"):
            m["params"].pop(key, None)
    path = tmp_path / f"{card}.whole.json"
    path.write_text(json.dumps(src))
    return path
