"""One measured quantity, the repeat-until-stable statistics and the JSON file.

Accel-Sim's tuner (Khairy et al., ISCA 2020, Section II-C) reads the printed output of
its microbenchmarks; hilsim writes the same facts as typed records instead
(`hilsim.microbench/1`). Pure Python and numpy: no GPU needed to import or test this.

Spread definition (used everywhere in hilsim.microbench): the *relative interdecile
range* ``(p90 - p10) / |median|`` of the samples (numpy linear interpolation), 0.0 for a
single sample, ``inf`` when the median is 0 and the samples differ. It is robust to one
outlier in a long series and, unlike the coefficient of variation, does not assume
normal noise.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.jsonfile import read_json
from hilsim.core.measurement_names import MICROBENCH_SCHEMA

SCHEMA = MICROBENCH_SCHEMA
#: the most samples a hand-written file may give as a count (each becomes a NaN sample;
#: the suite repeats a benchmark up to tens of times)
MAX_SAMPLE_COUNT = 100_000


def relative_spread(samples: Iterable[float]) -> float:
    """``(p90 - p10) / |median|`` of ``samples`` (see the module docstring)."""
    values = np.asarray([float(s) for s in samples], dtype=float)
    values = values[np.isfinite(values)]
    if values.size <= 1:
        return 0.0
    p10, med, p90 = np.percentile(values, [10.0, 50.0, 90.0])
    width = float(p90 - p10)
    if med == 0.0:
        return 0.0 if width == 0.0 else math.inf
    return width / abs(float(med))


@dataclass
class Measurement:
    """One microbenchmark result (Accel-Sim Section II-C: one tuner input).

    ``value`` is the figure a model consumes (the median of the settled samples),
    ``samples`` every repetition in order, ``spread`` the relative interdecile range of
    the settled window, ``valid`` False when self-validation failed or the samples did
    not settle (``note`` says which).
    """

    name: str
    value: float | None
    unit: str
    params: dict[str, Any] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)
    spread: float = 0.0
    valid: bool = True
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (NaN/inf become ``None``; numpy scalars become Python)."""
        return {
            "name": self.name,
            "value": _json_safe(self.value),
            "unit": self.unit,
            "params": _json_safe(self.params),
            "samples": [_json_safe(s) for s in self.samples],
            "spread": _json_safe(self.spread),
            "valid": bool(self.valid),
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        """Inverse of :meth:`to_dict` (``None`` value/spread stay ``None``/NaN).

        ``samples`` may also be a count (a hand-written file that kept no values): it
        becomes that many NaN samples.
        """
        spread = data.get("spread")
        samples = data.get("samples") or []
        if isinstance(samples, int) and not isinstance(samples, bool):
            if not 0 <= samples <= MAX_SAMPLE_COUNT:  # a list of that many NaN is built
                raise ValueError(
                    f"samples: a count must be 0..{MAX_SAMPLE_COUNT}, got {str(samples)[:40]}"
                )
            samples = [None] * samples
        return cls(
            name=str(data["name"]),
            value=None if data.get("value") is None else float(data["value"]),
            unit=str(data.get("unit", "")),
            params=dict(data.get("params") or {}),
            samples=[math.nan if s is None else float(s) for s in samples],
            spread=math.nan if spread is None else float(spread),
            valid=bool(data.get("valid", True)),
            note=str(data.get("note", "")),
        )


@dataclass(frozen=True)
class Stability:
    """What :func:`repeat_until_stable` saw."""

    samples: list[float]
    value: float
    spread: float
    stable: bool

    @property
    def reps(self) -> int:
        """Number of repetitions run."""
        return len(self.samples)


def repeat_until_stable(
    fn: Callable[[], float],
    max_reps: int = 10,
    rel_spread_bound: float = 0.05,
    min_reps: int = 3,
) -> Stability:
    """Call ``fn`` until its last ``min_reps`` results agree within ``rel_spread_bound``.

    The settled window is the last ``min_reps`` samples: earlier ones (cold caches, clock
    ramp-up) are kept in ``samples`` but do not enter ``value`` (window median) or
    ``spread`` (window relative interdecile range). A non-finite result never settles a
    window. ``stable`` is False when ``max_reps`` runs did not settle; the value is then
    the median of the last window anyway (the caller marks the measurement invalid).
    """
    if min_reps < 1 or max_reps < min_reps:
        raise ValueError(f"need 1 <= min_reps <= max_reps, got {min_reps}, {max_reps}")
    if rel_spread_bound < 0:
        raise ValueError("rel_spread_bound must be >= 0")
    samples: list[float] = []
    while len(samples) < max_reps:
        samples.append(float(fn()))
        if len(samples) < min_reps:
            continue
        window = samples[-min_reps:]
        if all(math.isfinite(s) for s in window) and relative_spread(window) <= rel_spread_bound:
            return Stability(samples, _median(window), relative_spread(window), True)
    window = samples[-min_reps:]
    return Stability(samples, _median(window), relative_spread(window), False)


def measurement_from_stability(
    name: str,
    stability: Stability,
    unit: str,
    params: dict[str, Any] | None = None,
    valid: bool = True,
    note: str = "",
) -> Measurement:
    """A :class:`Measurement` from a :class:`Stability`; unsettled => invalid with a note."""
    notes = [note] if note else []
    if not stability.stable:
        notes.append(f"did not settle within {stability.reps} repetitions")
    return Measurement(
        name=name,
        value=stability.value,
        unit=unit,
        params=dict(params or {}),
        samples=list(stability.samples),
        spread=stability.spread,
        valid=bool(valid and stability.stable),
        note="; ".join(notes),
    )


def measurements_to_list(measurements: Iterable[Measurement]) -> list[dict[str, Any]]:
    """The list stored under ``"measurements"`` (also a bundle's ``microbench.json``)."""
    return [m.to_dict() for m in measurements]


def microbench_document(
    measurements: Iterable[Measurement], device_facts: dict[str, Any] | None
) -> dict[str, Any]:
    """The whole ``hilsim.microbench/1`` document as a dict."""
    return {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hilsim_version": _hilsim_version(),
        "host": platform.node(),
        "device": _json_safe(dict(device_facts or {})),
        "measurements": measurements_to_list(measurements),
    }


def write_microbench_json(
    path: str | os.PathLike[str],
    measurements: Iterable[Measurement],
    device_facts: dict[str, Any] | None,
) -> Path:
    """Write ``hilsim.microbench/1`` to ``path`` atomically (temp file, then rename)."""
    document = microbench_document(measurements, device_facts)
    text = json.dumps(document, indent=2, allow_nan=False) + "\n"
    return write_text_atomic(path, text)


def read_microbench_json(
    path: str | os.PathLike[str],
) -> tuple[list[Measurement], dict[str, Any]]:
    """Read and validate a ``hilsim.microbench/1`` file: (measurements, device facts).

    Every row becomes a :class:`Measurement`, in file order (so ``measurements[i]`` in an
    error names the row of the file). A malformed row or device block is a one-line
    :class:`HilsimError` naming the file and the row.
    """
    source = Path(path)
    document = read_json(source, SCHEMA)
    items = document.get("measurements")
    if not isinstance(items, list):
        raise HilsimError(f"{source}: 'measurements' must be a list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not {"name", "value", "unit"} <= item.keys():
            raise HilsimError(f"{source}: measurements[{i}]: needs name, value and unit")
        value = item["value"]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise HilsimError(
                f"{source}: measurements[{i}] ({item['name']}): value {value!r} is not a number"
            )
        try:
            out.append(Measurement.from_dict(item))
        except (TypeError, ValueError) as exc:
            raise HilsimError(f"{source}: measurements[{i}]: malformed ({exc})") from None
    device = document.get("device")
    if device is not None and not isinstance(device, dict):
        raise HilsimError(f"{source}: device: expected an object")
    return out, dict(device or {})


def _hilsim_version() -> str:
    try:
        return importlib.metadata.version("hilsim")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _median(values: list[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
