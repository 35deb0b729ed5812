"""Design-space exploration with the analytical model: full vs sampled speedups.

For each hardware variation (``l2_size=x2``, ``sm_count=x0.5``, ...) the model is run
on *all* launches (the truth a full simulation would give) and on the plan's sampled
launches (``sum(weight x cycles)``, the sampled-simulation estimate); the report gives,
per variation, the true speedup over the baseline, the sampled estimate of it and the
errors — the experiment of STEM Table 4 (cache size x2 / x1/2, #SM x2 / x1/2) and PKA
Fig. 10 (80 vs 40 SMs), with the model standing in for the simulator.

Variation syntax: ``NAME=xF`` scales the value by F; ``NAME=V`` sets it. Names
(:data:`VARIABLES`) map to :class:`~hilsim.simmodel.config.TimingConfig` fields.
Clocks carry what runs on them: ``sm_clock`` keeps the DRAM part of the memory
latency (DRAM latency minus L2 latency) constant in time, so more core cycles;
``dram_clock`` scales the DRAM bandwidth with the clock (the DRAM access latency is
kept: device timings are specified in ns; give ``dram_latency`` as well to change it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from hilsim.simmodel import model
from hilsim.simmodel.config import Source, Sourced, TimingConfig, unit_for, vtype_for
from rich.table import Table

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan

#: variation name -> (dotted config field, model parameter used when the field is unset)
VARIABLES: dict[str, tuple[str, str | None]] = {
    "sm_count": ("core.sm_count", "sm_count"),
    "sm_clock": ("core.core_clock_mhz", "clock_mhz"),
    "schedulers": ("core.schedulers_per_sm", "schedulers"),
    "max_ctas_per_sm": ("core.max_ctas_per_sm", "max_ctas_per_sm"),
    "registers_per_sm": ("core.registers_per_sm", "registers_per_sm"),
    "shared_mem_per_sm": ("core.shared_mem_per_sm", "shared_mem_per_sm"),
    "launch_latency": ("core.launch_latency_cycles", "launch_cycles"),
    "l1_size": ("l1.capacity_bytes", "l1_capacity"),
    "l1_bandwidth": ("l1.bandwidth", "l1_bw"),
    "l1_latency": ("l1.hit_latency_cycles", "l1_latency"),
    "l2_size": ("l2.capacity_bytes", "l2_capacity"),
    "l2_bandwidth": ("l2.bandwidth", "l2_bw"),
    "l2_latency": ("l2.hit_latency_cycles", "l2_latency"),
    "shared_bandwidth": ("shared.bandwidth", "shared_bw"),
    "shared_latency": ("shared.latency_cycles", "shared_latency"),
    "dram_bandwidth": ("dram.bandwidth_gbs", None),
    "dram_latency": ("dram.latency_cycles", "dram_latency"),
    "dram_clock": ("dram.clock_mhz", None),
}
_UNITS_FALLBACK = {"l1.bandwidth": "bytes/clk/SM", "l2.bandwidth": "bytes/clk"}



def counters_from_bundle(bundle: Bundle) -> pd.DataFrame:
    """Launch configuration + metrics of every launch, row ``i`` = ``launch_id`` ``i``.

    Raises a one-line error naming how many launches lack metrics or a launch
    configuration (the model needs both for every launch).
    """
    where = str(bundle.path) if bundle.path else "bundle"
    n = bundle.n_launches
    if bundle.metrics is None:
        raise HilsimError(f"{where}: no metrics.parquet: the model needs per-launch counters "
                          f"for all {n} launches")
    metrics = bundle.metrics.set_index("launch_id").reindex(np.arange(n))
    known = [c for c in metrics.columns if c in model.COUNTER_COLUMNS]
    if not known:
        raise HilsimError(f"{where}: metrics.parquet has none of the model's counters "
                          f"(e.g. {model.COUNTER_COLUMNS[0]}, dram__bytes_read.sum)")
    lacking = int(metrics[known].isna().all(axis=1).sum())
    if lacking:
        raise HilsimError(f"{where}: {lacking} of {n} launches have no metrics; the model "
                          "needs counters for every launch (profile all launches with ncu)")
    launch_cols = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "regs",
                   "smem_static", "smem_dynamic"]
    launches = bundle.launches[launch_cols].reset_index(drop=True)
    no_cfg = int(launches[["grid_x", "block_x"]].isna().any(axis=1).sum())
    if no_cfg:
        raise HilsimError(f"{where}: {no_cfg} of {n} launches have no grid/block size; "
                          "import a trace that records launch configurations")
    frame = pd.concat([launches.astype("float64"), metrics[known].reset_index(drop=True)],
                      axis=1)
    return frame

#: the range of a varied value (bytes, cycles, MHz, GB/s, counts): past it the model's
#: sums overflow or its divisions lose every digit, and no GPU is that far from another
MIN_VALUE = 1e-6
MAX_VALUE = 1e15


def vary(config: TimingConfig, spec: str) -> TimingConfig:
    """A copy of ``config`` with one variation applied (``"l2_size=x2"``, ``"sm_count=40"``).

    ``sm_clock`` also sets ``dram.latency_cycles`` (core cycles): its DRAM part,
    ``DRAM latency - L2 latency``, is time off the SM clock, so it becomes ``x F`` core
    cycles. ``dram_clock`` also scales ``dram.bandwidth_gbs`` by the clock ratio.

    A scaled value whose field is unset in ``config`` starts from the value the model
    uses (:func:`hilsim.simmodel.model.model_params`). Integer fields are rounded (at least 1).
    The new value's source is ``derived`` and names the variation.
    """
    name, sep, raw = spec.partition("=")
    name = name.strip()
    if not sep or not raw.strip():
        raise HilsimError(f"--vary {spec!r}: expected NAME=xFACTOR or NAME=VALUE")
    if name not in VARIABLES:
        raise HilsimError(
            f"--vary {spec!r}: unknown name {name!r}; choose one of {', '.join(VARIABLES)}"
        )
    dotted, param = VARIABLES[name]
    raw = raw.strip()
    scale = raw[0] in "xX*"
    try:
        number = float(raw[1:] if scale else raw)
    except ValueError:
        raise HilsimError(f"--vary {spec!r}: {raw!r} is not a number or xFACTOR") from None
    if not np.isfinite(number) or number <= 0:
        raise HilsimError(f"--vary {spec!r}: value must be positive")
    current = config.get(dotted)
    if scale:
        if current is not None:
            base = float(current.value)
        elif param is not None:
            base = float(getattr(model.model_params(config), param).value)
        else:
            raise HilsimError(f"--vary {spec!r}: {dotted} is not set in {config.name!r}")
        value: float = base * number
    else:
        value = number
    if not (MIN_VALUE <= value <= MAX_VALUE):
        raise HilsimError(
            f"--vary {spec!r}: gives {dotted} = {value:g}, outside what the model computes "
            f"with ({MIN_VALUE:g} to {MAX_VALUE:g})"
        )
    vtype = vtype_for(dotted)
    final: int | float = max(1, round(value)) if vtype is int else float(value)
    unit = (
        current.unit
        if current is not None
        else (unit_for(dotted) or _UNITS_FALLBACK.get(dotted, ""))
    )
    src = Source("derived", f"DSE variation {spec}")
    new = Sourced(final, unit, src)
    out = config.set(dotted, new)
    if name in ("sm_clock", "dram_clock"):
        if current is None and param is None:
            raise HilsimError(f"--vary {spec!r}: {dotted} is not set in {config.name!r}")
        old = float(current.value) if current is not None else float(
            getattr(model.model_params(config), str(param)).value)
        ratio = float(final) / old
        if name == "sm_clock":
            p = model.model_params(config)
            dram_part = p.dram_latency.value - p.l2_latency.value
            out = out.set("dram.latency_cycles", Sourced(
                p.l2_latency.value + dram_part * ratio, "cycles", src))
        else:
            bw = config.get("dram.bandwidth_gbs")
            if bw is None:
                raise HilsimError(f"--vary {spec!r}: dram.bandwidth_gbs is not set")
            out = out.set("dram.bandwidth_gbs", Sourced(float(bw.value) * ratio,
                                                        bw.unit or "GB/s", src))
    return out


@dataclass
class DseRow:
    """One variation: totals (cycles of its own clock), speedups (in time) over the baseline."""

    variation: str
    clock_mhz: float
    full_cycles: float
    sampled_cycles: float
    estimate_error: float
    true_speedup: float
    sampled_speedup: float
    speedup_error: float
    binding: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DseResult:
    """Baseline plus one row per variation."""

    config: str
    n_launches: int
    n_samples: int
    rows: list[DseRow]

    def table(self, method: str) -> Table:
        """The rows as ``hilsim dse`` prints them (``method``: the plan's, in the title):
        totals, errors, speedups and the bottleneck counts of each variation."""
        table = Table(title=f"DSE on {self.config}: {self.n_launches} launches, "
                      f"{self.n_samples} sampled ({method})")
        for col in ("variation", "full cycles", "sampled cycles", "estimate error",
                    "true speedup", "sampled speedup", "speedup error", "binding (launches)"):
            table.add_column(col, justify="left" if col in ("variation", "binding (launches)")
                             else "right")
        for r in self.rows:
            binding = ", ".join(f"{k} {v}" for k, v in sorted(r.binding.items(),
                                                              key=lambda kv: -kv[1]))
            table.add_row(r.variation, f"{r.full_cycles:,.0f}", f"{r.sampled_cycles:,.0f}",
                          f"{100 * r.estimate_error:.2f}%", f"{r.true_speedup:.3f}",
                          f"{r.sampled_speedup:.3f}", f"{100 * r.speedup_error:.2f}%", binding)
        return table

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "hilsim.dse/1",
            "config": self.config,
            "n_launches": self.n_launches,
            "n_samples": self.n_samples,
            "rows": [r.to_dict() for r in self.rows],
        }


def _totals(
    config: TimingConfig,
    counters: pd.DataFrame,
    ids: np.ndarray,
    weights: np.ndarray,
    reference: TimingConfig,
) -> tuple[float, float, dict[str, int]]:
    # cycles and binding only: predict's full table (~18 columns) is not needed here
    cycles, binding_of = model.predict_cycles(config, counters, reference=reference)
    counts = pd.Series(binding_of).value_counts()
    binding = {str(k): int(v) for k, v in counts.items() if v}
    return float(cycles.sum()), float(np.dot(weights, cycles[ids])), binding


def dse(
    config: TimingConfig,
    counters_all: pd.DataFrame,
    plan: Plan,
    variations: list[str] | tuple[str, ...],
) -> DseResult:
    """Run the model on every launch and on the plan's samples, per variation.

    ``counters_all`` has one row per launch in launch order (row ``i`` = ``launch_id``
    ``i``). The baseline row is ``config`` itself. Speedups are old time / new time,
    time = cycles / core clock (a variation of the clock, ``sm_clock=x1.2``, changes the
    length of a cycle: the same cycles are 1.2x faster): for variation ``v``,
    ``true_speedup = T_full(base) / T_full(v)``, ``sampled_speedup = T_sampled(base) /
    T_sampled(v)``, ``speedup_error = |sampled - true| / true``, and ``estimate_error =
    |sampled(v) - full(v)| / full(v)`` (STEM eq. 1 on the varied GPU).
    """
    model.require_counters(counters_all, "dse")
    n = len(counters_all)
    ids = plan.samples["launch_id"].to_numpy(dtype=np.int64)
    weights = plan.samples["weight"].to_numpy(dtype=np.float64)
    if ids.size == 0:
        raise HilsimError("dse: the plan has no samples")
    if ids.min() < 0 or ids.max() >= n:
        raise HilsimError(
            f"dse: plan samples launch {int(ids.max())} but the counters have {n} launches"
        )
    configs = [("baseline", config)] + [(v, vary(config, v)) for v in variations]
    rows: list[DseRow] = []
    base_full = base_sampled = 0.0
    for label, cfg in configs:
        with np.errstate(all="ignore"):
            full, sampled, binding = _totals(cfg, counters_all, ids, weights, config)
        clock = float(model.model_params(cfg).clock_mhz.value)
        if not all(math.isfinite(v) and v > 0 for v in (full, sampled, clock)):
            where = "the configuration" if label == "baseline" else f"--vary {label!r}"
            raise HilsimError(
                f"dse: {where} gives no finite positive cycles (full {full:g}, sampled "
                f"{sampled:g} at {clock:g} MHz): the model cannot compute this variation"
            )
        if label == "baseline":
            base_full, base_sampled = full / clock, sampled / clock
        true_s, est_s = base_full / (full / clock), base_sampled / (sampled / clock)
        rows.append(
            DseRow(
                label,
                clock,
                full,
                sampled,
                abs(sampled - full) / full,
                true_s,
                est_s,
                abs(est_s - true_s) / true_s,
                binding,
            )
        )
    return DseResult(config.name, n, int(ids.size), rows)
