"""The measured GPGPU-Sim latency map: fit, inversion, the shipped file (no simulator)."""

from __future__ import annotations

import numpy as np
import pytest
from hilsim.simmodel.tuner.calibration import (
    LATENCY_OPTIONS,
    fit,
    load_calibrations,
    tuned_options,
)

from hilsim.core.errors import HilsimError


def _points(a: np.ndarray, c: np.ndarray, base: np.ndarray, step: np.ndarray) -> list[dict]:
    xs = [base] + [base + step[j] * np.eye(4)[j] for j in range(4)]
    return [
        {
            "options": dict(zip(LATENCY_OPTIONS, x.tolist(), strict=True)),
            "quantities": (a @ x + c).tolist(),
        }
        for x in xs
    ]


def test_fit_recovers_a_coupled_map() -> None:
    rng = np.random.default_rng(5)
    a = np.eye(4) * 0.98 + np.tril(rng.normal(0, 0.3, (4, 4)), -1)
    c = rng.uniform(2, 30, 4)
    got_a, got_c = fit(_points(a, c, np.array([28.0, 180, 120, 28]), np.array([16.0, 40, 40, 16])))
    assert np.allclose(got_a, a) and np.allclose(got_c, c)


def test_fit_refuses_a_point_that_changes_two_options() -> None:
    pts = _points(np.eye(4), np.zeros(4), np.ones(4), np.ones(4))
    pts[2]["options"][LATENCY_OPTIONS[0]] += 1
    with pytest.raises(HilsimError, match="must change"):
        fit(pts)


def test_shipped_map_inverts_its_own_points() -> None:
    """Every calibration point, fed back as a measurement, gives back its options."""
    import json
    from importlib import resources

    cals = load_calibrations()
    assert {"7.0", "7.5", "8.6"} <= set(cals)
    doc = json.loads(
        resources.files("hilsim.simmodel.tuner").joinpath("latency_calibration.json").read_text()
    )
    for cc, entry in doc["calibrations"].items():
        for point in entry["points"]:
            lat = [
                (o, q, [], "") for o, q in zip(LATENCY_OPTIONS, point["quantities"], strict=True)
            ]
            rows = {r[0]: r[1] for r in tuned_options(lat, None, cc, cals)}
            assert rows == {o: int(point["options"][o]) for o in LATENCY_OPTIONS}
        (x1, y1), (x2, y2) = entry["launch"]["points"]
        rows = {r[0]: r[1] for r in tuned_options(lat, float(y2), cc, cals)}
        assert rows["-gpgpu_kernel_launch_latency"] == x2


def test_unit_map_inverts_its_own_points_and_refuses_a_degenerate_pair(tmp_path) -> None:
    """Each measured unit point, fed back, gives its MAD option; a bad file is one line."""
    import json
    from importlib import resources

    from hilsim.simmodel.tuner.calibration import (
        UNIT_FILE,
        load_unit_calibrations,
        unit_fit,
        unit_latency_option,
    )

    doc = json.loads(resources.files("hilsim.simmodel.tuner").joinpath(UNIT_FILE).read_text())
    assert {"7.0", "7.5", "8.6"} <= set(doc["calibrations"])
    for cc, entry in doc["calibrations"].items():
        assert set(entry["units"]) == {"fp32", "fp64", "int32"}
        for unit, u in entry["units"].items():
            for option, measured in u["points"]:
                assert unit_latency_option(unit, measured, cc)[0] == option
    assert unit_latency_option("fp32", 10.0, "9.0") is None  # no map: the caller decides
    with pytest.raises(HilsimError, match="same option value"):
        unit_fit([[4, 9.0], [4, 10.0]])
    bad = tmp_path / "u.json"
    bad.write_text(json.dumps({"schema": doc["schema"], "calibrations": {"7.0": {"card": "x"}}}))
    with pytest.raises(HilsimError, match=r"u.json: compute capability 7.0: malformed"):
        load_unit_calibrations(bad)
