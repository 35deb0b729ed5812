"""hilsim pkp: PKS plan + PKP projection from the analytical model's timelines."""

import json

import numpy as np
import pandas as pd
from hilsim.analyzer.methods.stem import STEM

from hilsim.cli.main import main
from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.schema import normalize_launches


def _bundle(n: int = 400) -> Bundle:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "name": np.where(np.arange(n) % 2, "gemm", "copy"),
            "duration_ns": rng.integers(50_000, 60_000, n),
            "grid_x": np.where(np.arange(n) % 2, 2048, 640),
            "block_x": 256,
            "regs": 32,
        }
    )
    launches = normalize_launches(frame, "t")
    metrics = pd.DataFrame(
        {
            "launch_id": np.arange(n),
            "smsp__inst_executed.sum": np.where(np.arange(n) % 2, 4e7, 1e6),
            "dram__bytes_read.sum": np.where(np.arange(n) % 2, 1e6, 6e8),
        }
    )
    return Bundle(launches, metrics=metrics)


def test_pkp_on_model_timelines(tmp_path, capsys) -> None:
    bundle = _bundle()
    write_bundle(bundle, tmp_path / "b")
    plan = STEM(seed=0).plan(bundle).attach_names(bundle.launches["name"])
    plan.save(tmp_path / "plan.json")
    code = main(
        [
            "pkp",
            str(tmp_path / "b"),
            "--plan",
            str(tmp_path / "plan.json"),
            "--model",
            "QV100",
            "-o",
            str(tmp_path / "pkp.json"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    result = json.loads((tmp_path / "pkp.json").read_text())
    assert 0 < result["simulated_fraction"] <= 1
    assert result["projected_total_cycles"] > 0
    assert "analytical model" in result["timelines"]


def test_pkp_needs_exactly_one_timeline_source(tmp_path, capsys) -> None:
    bundle = _bundle(20)
    write_bundle(bundle, tmp_path / "b")
    plan = STEM(seed=0).plan(bundle)
    plan.save(tmp_path / "plan.json")
    code = main(["pkp", str(tmp_path / "b"), "--plan", str(tmp_path / "plan.json")])
    assert code == 2 and "give one of --model" in capsys.readouterr().err
