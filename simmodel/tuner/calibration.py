"""GPGPU-Sim's latency pipeline, measured: config option -> microbenchmark value.

The tuner's latency quantities (Accel-Sim paper, Section II-C: ``l1_lat``, ``l2_lat`` =
L2 hit - L1 hit, ``mem_lat`` = DRAM - L2 hit, ``shd_lat``; ``kernel_lat``) are not the
config options themselves: GPGPU-Sim adds its pipeline (issue, operand collection, the
interconnect, L2 and DRAM clock domains) and the chase kernel its own instructions. The
map is measured on the simulator (:mod:`hilsim.simmodel.tuner.calibrate`): the latency
suite runs at a calibration point and once more per option with that option raised;
the finite differences give a matrix ``A`` and an offset ``c`` with

    m = A @ x + c,   m = (L1, L2 - L1, DRAM - L2, shared) in core cycles,
                     x = (-gpgpu_l1_latency, -gpgpu_l2_rop_latency, -dram_latency,
                          -gpgpu_smem_latency)

(off-diagonal terms included: e.g. ``L2 - L1`` falls when ``-gpgpu_l1_latency`` rises,
since an L1-bypassing load does not pay it), and ``launch cycles = a x + b`` for
``-gpgpu_kernel_launch_latency``. The tuner's ``gpgpusim`` convention inverts it:
``x = A^-1 (m - c)``, rounded. The calibration points are not the card's own values, so
tuning a card's own measurements is a prediction, not an identity.

The measured maps are in ``latency_calibration.json`` beside this module, one per
compute capability (the card each was measured on, its build and every point).

Execution units (Accel-Sim ``config_fpu`` / ``config_dpu`` / ``config_int``): the suite's
``lat_{fp32,fp64,int32}`` (one warp, a dependent chain of multiply-adds) measures
``s x MAD + c``, where MAD is the fourth entry of ``-ptx_opcode_latency_{fp,dp,int}``
(the multiply-add latency). ``s`` and ``c`` per unit are measured the same way (two
points, ``hilsim gpgpusim calibrate CARD --units``) and stored in
``unit_latency_calibration.json``; the ``gpgpusim`` convention emits
``round((m - c) / s)`` for the four ADD/MAX/MUL/MAD entries (Accel-Sim's one latency per
unit).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from hilsim.core.errors import HilsimError

LATENCY_OPTIONS = (
    "-gpgpu_l1_latency",
    "-gpgpu_l2_rop_latency",
    "-dram_latency",
    "-gpgpu_smem_latency",
)
QUANTITIES = ("l1", "l2_minus_l1", "dram_minus_l2", "shared")
LAUNCH_OPTION = "-gpgpu_kernel_launch_latency"
SCHEMA = "hilsim.gpgpusim-calibration/1"
FILE = "latency_calibration.json"


def quantities(values: dict[str, float]) -> np.ndarray:
    """(L1, L2 - L1, DRAM - L2, shared) from measurement values by name."""
    l1, l2 = values["l1_hit_latency"], values["l2_hit_latency"]
    return np.asarray(
        [l1, l2 - l1, values["dram_latency"] - l2, values["shared_latency"]], dtype=float
    )


@dataclass(frozen=True)
class Calibration:
    """One measured map (see the module docstring)."""

    compute_capability: str
    card: str
    matrix: np.ndarray  # 4 x 4, A[i, j] = d quantity i / d option j
    offset: np.ndarray  # c
    launch_slope: float | None
    launch_offset: float | None
    source: str
    #: the measured card's own option values (``card_values`` of the file), by option name
    card_values: dict[str, float] = field(default_factory=dict)

    def options_for(self, measured: np.ndarray) -> np.ndarray:
        """Option values (unrounded) that reproduce ``measured`` quantities."""
        return np.linalg.solve(self.matrix, np.asarray(measured, dtype=float) - self.offset)

    def predict(self, options: np.ndarray) -> np.ndarray:
        """Quantities the simulator gives for ``options``."""
        return self.matrix @ np.asarray(options, dtype=float) + self.offset

    def launch_option_for(self, cycles: float) -> float | None:
        """``-gpgpu_kernel_launch_latency`` (unrounded) for a measured launch in cycles."""
        if not self.launch_slope:
            return None
        return (cycles - float(self.launch_offset or 0.0)) / self.launch_slope


def fit(points: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """``A``, ``c`` from a base point and one point per option (finite differences).

    Each point: ``{"options": {name: value}, "quantities": [4 values]}``; the first is
    the base, point ``j + 1`` differs from it in option ``j`` only.
    """
    if len(points) != len(LATENCY_OPTIONS) + 1:
        raise HilsimError(f"calibration: need {len(LATENCY_OPTIONS) + 1} points, got {len(points)}")
    x0 = np.asarray([float(points[0]["options"][o]) for o in LATENCY_OPTIONS])
    m0 = np.asarray(points[0]["quantities"], dtype=float)
    a = np.zeros((4, 4))
    for j, opt in enumerate(LATENCY_OPTIONS):
        xj = np.asarray([float(points[j + 1]["options"][o]) for o in LATENCY_OPTIONS])
        dx = xj - x0
        if np.count_nonzero(dx) != 1 or dx[j] == 0:
            raise HilsimError(f"calibration: point {j + 1} must change {opt} only")
        a[:, j] = (np.asarray(points[j + 1]["quantities"], dtype=float) - m0) / dx[j]
    return a, m0 - a @ x0


def _from_entry(cc: str, entry: dict[str, Any], where: str) -> Calibration:
    try:
        a, c = fit(entry["points"])
        launch = entry.get("launch") or {}
        slope = offset = None
        if launch.get("points"):
            slope, offset = unit_fit(launch["points"])
        return Calibration(
            cc,
            str(entry["card"]),
            a,
            c,
            slope,
            offset,
            f"{where}: {entry['card']}, build {entry.get('build')}, hilsim {entry.get('commit')}",
            {str(k): float(v) for k, v in (entry.get("card_values") or {}).items()},
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise HilsimError(f"{where}: compute capability {cc}: malformed ({exc})") from None


def calibration_for_card(card: str) -> Calibration | None:
    """The shipped map measured on ``card`` (a shipped card name), or None."""
    return next((c for c in load_calibrations().values() if c.card == card), None)


def _read_map_file(
    path: str | Path | None, packaged: str, schema: str
) -> tuple[dict[str, Any], str]:
    """A measured map's JSON (the packaged file unless ``path``) and the name errors use."""
    if path is None:
        text = resources.files("hilsim.simmodel.tuner").joinpath(packaged).read_text()
        where = packaged
    else:
        where = str(path)
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise HilsimError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HilsimError(f"{where}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != schema:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise HilsimError(f"{where}: schema {found!r}, expected {schema}")
    return data, where


def load_calibrations(path: str | Path | None = None) -> dict[str, Calibration]:
    """Every measured map by compute capability (the shipped file unless ``path``)."""
    data, where = _read_map_file(path, FILE, SCHEMA)
    return {cc: _from_entry(cc, e, where) for cc, e in (data.get("calibrations") or {}).items()}


def round_option(value: float) -> int:
    """Nearest integer option value, at least 1."""
    return max(1, int(math.floor(value + 0.5)))


def floor_note(value: float, floor: float) -> str:
    """The note of an option whose unrounded value lies below 1: the measurement is under
    what the simulator produces at the option's least value (its pipeline floor)."""
    if value >= 0.5:
        return ""
    return (f"below the simulator's pipeline floor: the map gives {value:.3g}; at 1 the "
            f"simulator measures {floor:.4g}, the closest it can (kept 1; "
            "tune --on-simulator reports each target it cannot reach)")


def tuned_options(
    lat: list[tuple[str, float, list[str], str]],
    launch_cycles: float | None,
    compute_capability: str,
    calibrations: dict[str, Calibration] | None = None,
) -> list[tuple[str, int, list[str], str, str]]:
    """The tuner's ``gpgpusim`` convention: (option, value, inputs, formula, note) rows.

    ``lat`` is the tuner's latency list (option, raw quantity, inputs, formula) in
    :data:`LATENCY_OPTIONS` order; all four are needed (the map couples them). Raises a
    one-line :class:`HilsimError` without a calibration for ``compute_capability``.
    """
    cals = load_calibrations() if calibrations is None else calibrations
    cal = cals.get(str(compute_capability))
    if cal is None:
        raise HilsimError(
            f"convention gpgpusim: no GPGPU-Sim calibration for compute capability "
            f"{compute_capability} (have {', '.join(sorted(cals)) or 'none'}; tune with "
            "--on-simulator, which needs none, or run hilsim gpgpusim calibrate CARD)"
        )
    by_name = {name: (x, ins, formula) for name, x, ins, formula in lat}
    missing = [o for o in LATENCY_OPTIONS if o not in by_name]
    if missing:
        raise HilsimError(
            "convention gpgpusim: needs L1, L2, DRAM and shared latencies "
            f"(missing {', '.join(missing)})"
        )
    measured = np.asarray([by_name[o][0] for o in LATENCY_OPTIONS])
    values = cal.options_for(measured)
    inputs = sorted({i for o in LATENCY_OPTIONS for i in by_name[o][1]})
    rows = []
    for j, opt in enumerate(LATENCY_OPTIONS):
        row = ", ".join(f"{a:+.3g}" for a in cal.matrix[j])
        at_one = cal.predict(np.where(np.arange(4) == j, 1.0, values))[j]
        note = floor_note(float(values[j]), float(at_one))
        rows.append(
            (
                opt,
                round_option(values[j]),
                inputs,
                f"x = A^-1 (m - c), m = (L1, L2-L1, DRAM-L2, shared); row {j}: A [{row}], "
                f"c {cal.offset[j]:+.3g}",
                "; ".join(filter(None, [f"GPGPU-Sim map measured on {cal.source}", note])),
            )
        )
    if launch_cycles is not None and cal.launch_slope:
        x = cal.launch_option_for(launch_cycles)
        rows.append(
            (
                LAUNCH_OPTION,
                round_option(float(x)),
                ["core.launch_latency_cycles"],
                f"(launch cycles - {cal.launch_offset:.4g}) / {cal.launch_slope:.4g}",
                f"GPGPU-Sim map measured on {cal.source}",
            )
        )
    return rows


# --- execution units -----------------------------------------------------------------

#: suite key -> latency option (its 4th entry, MAD, is what ``lat_*`` measures)
UNIT_OPTIONS = {
    "fp32": "-ptx_opcode_latency_fp",
    "fp64": "-ptx_opcode_latency_dp",
    "int32": "-ptx_opcode_latency_int",
}
UNIT_SCHEMA = "hilsim.gpgpusim-unit-calibration/1"
UNIT_FILE = "unit_latency_calibration.json"


@dataclass(frozen=True)
class UnitCalibration:
    """``measured = slope x MAD option + offset`` for one unit on one compute capability."""

    slope: float
    offset: float
    source: str

    def option_for(self, measured: float) -> float:
        """The MAD latency option (unrounded) that gives ``measured`` cycles."""
        return (float(measured) - self.offset) / self.slope


def unit_fit(points: list[list[float]]) -> tuple[float, float]:
    """(slope, offset) from two ``[option, measured]`` points (unit and launch maps)."""
    if len(points) < 2:
        raise HilsimError(f"calibration: a two-point fit needs 2 points, got {len(points)}")
    (x1, y1), (x2, y2) = points[:2]
    if float(x2) == float(x1):
        raise HilsimError("calibration: the two points have the same option value")
    slope = (float(y2) - float(y1)) / (float(x2) - float(x1))
    return slope, float(y1) - slope * float(x1)


def load_unit_calibrations(path: str | Path | None = None) -> dict[str, dict[str, UnitCalibration]]:
    """``{compute capability: {unit: UnitCalibration}}`` (the shipped file unless ``path``)."""
    data, where = _read_map_file(path, UNIT_FILE, UNIT_SCHEMA)
    out: dict[str, dict[str, UnitCalibration]] = {}
    for cc, entry in (data.get("calibrations") or {}).items():
        try:
            src = f"{where}: {entry['card']}, build {entry.get('build')}"
            out[cc] = {
                unit: UnitCalibration(*unit_fit(u["points"]), src)
                for unit, u in entry["units"].items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise HilsimError(f"{where}: compute capability {cc}: malformed ({exc})") from None
    return out


@functools.cache
def _unit_calibrations() -> dict[str, dict[str, UnitCalibration]]:
    """The shipped unit map, read once per process (the tuner asks once per unit)."""
    return load_unit_calibrations()


def unit_latency_option(
    unit: str, measured: float, compute_capability: str
) -> tuple[int, str, str] | None:
    """(MAD option, formula, note) for a measured unit latency, or None without a map."""
    cal = _unit_calibrations().get(str(compute_capability), {}).get(unit)
    if cal is None:
        return None
    value = cal.option_for(measured)
    note = floor_note(value, cal.slope + cal.offset)
    return (
        round_option(value),
        f"round((latency - {cal.offset:.4g}) / {cal.slope:.4g})",
        "; ".join(filter(None, [f"GPGPU-Sim unit map measured on {cal.source}", note])),
    )
