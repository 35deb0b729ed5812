"""The state term of a sampled simulation: each sample placed between a warm and a cold run.

A sampled simulation runs only the plan's samples, so each starts with caches that differ
from the full run's at that launch (STEM+ROOT, MICRO 2025, section 5.2, leaves warm-up of
GPU state open; PKA, MICRO 2021, section 3.1, simulates the first chronological launch of
each group). ``hilsim simulate`` brackets that state:

* the **warm run** simulates the samples after a warm-up (:class:`hilsim.core.plan.Warmup`:
  the L2 filled by the host's copies, the ``K`` launches before each sample): when the
  workload's data fit in the L2 it holds at least what the full run held at each sample,
  except data written by launches outside the warm-up windows;
* the **cold run** simulates samples with no warm-up at all: caches as the previous
  sample of that run left them, at most what the full run held.

The profile says where between the two the full run was: the launch's DRAM reads
(``dram__sectors_read.sum``, else its L2 misses; :data:`MISS_METRICS`). A sample whose
profiled reads are not above its warm run's (:data:`MISS_TOLERANCE_SECTORS`) keeps its warm
cycles; the others are
run cold too and placed at ``t ** 0.5`` of the way from its warm to its cold cycles, with
``t = (m_profile - m_warm) / (m_cold - m_warm)`` clipped to [0, 1] (the exponent:
:data:`POSITION_EXPONENT`); its counters are placed at ``t`` (so its DRAM reads are the
profile's). The placement error
of a bracketed sample is taken as uniform over its bracket plus a share of its cycles:
variance ``(c_cold - c_warm)^2 / 12 + (STATE_SD_BRACKETED * c)^2``. A sample kept warm
whose warm run still read more from DRAM than the profile (its producer outside the
warm-up window, or a few reads within the tolerance: on a one-block kernel they cost
16-44%) is bracketed from below instead: between its warm cycles less
``WARM_EXCESS_LATENCIES`` DRAM misses of the simulated card (:func:`dram_miss_cycles`, core
cycles; at most :data:`WARM_EXCESS_CAP` of its warm cycles) and its warm cycles, placed at
the middle, the same uniform variance. Any
other sample kept warm has ``(STATE_SD_WARM * c)^2`` (the state a warm run and the
profile agree on still leaves some spread); over the samples,
``sum(weight^2 * variance)`` is the state variance the estimate's 95% interval adds to
the selection variance (STEM eq. 4).

Without profiled misses the placement is unknown: a pilot of samples is run cold, each
kernel's cold/warm cycle ratio (pooled over kernels without a pilot sample) predicts the
cold cycles of the others, and every sample sits at ``t = 0.5`` with the uniform variance.

All of it is vectorised over samples (numpy); the tables are as long as the plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hilsim.core.bundle import Bundle

#: profile metrics that show a launch's cold L2 (sectors), first present is used, with the
#: simulator column they compare with. DRAM reads first: GPGPU-Sim's L2 misses also count
#: write misses, which fetch nothing (its L2 allocates on write and fetches lazily on read)
#: and say nothing about the state; on the training workload 2 of the 223 samples kept
#: warm by their DRAM reads were more than 3% off their full-run cycles, 11 of the 236 kept
#: warm by their L2 misses (tolerance 16 sectors then).
MISS_METRICS: tuple[tuple[str, str], ...] = (
    ("dram__sectors_read.sum", "dram_read_sectors"),
    ("lts__t_sectors_lookup_miss.sum", "l2_misses"),
)
#: a profiled miss count above the warm run's by more than this (sectors, or this share of
#: the warm run's misses, whichever is larger) sends the sample to the cold run: a few DRAM
#: reads on the critical path of a short kernel cost 8-15% of it (training workload)
MISS_TOLERANCE_SECTORS = 2.0
MISS_TOLERANCE_SHARE = 0.10
#: state standard deviation of a sample, as a share of its cycles, on top of the uniform
#: spread over its bracket (bracketed samples) or alone (samples kept warm). Chosen on the
#: training workload (transformer_step on the reduced QV100: 89 bracketed and 223 warm
#: samples of STEM seeds 0-2 and PKA against their full-run cycles) so that the error of a
#: sample over its standard deviation has an rms of 1.0 in both groups.
STATE_SD_BRACKETED = 0.0125
STATE_SD_WARM = 0.0075
#: a bracketed sample sits at ``t ** POSITION_EXPONENT`` of the way from its warm to its
#: cold cycles (``t``: the same fraction of the way in DRAM reads). Chosen on the training
#: workload (transformer_step on the reduced QV100, STEM seeds 0-2 and the PKA plan, 89
#: bracketed samples against their full-run cycles): 0.5 gives the smallest rms error per
#: sample (4.2% of its cycles; linear, 1.0: 5.6%, biased -1.6%). The first misses of a
#: kernel cost the most: later ones overlap with them.
POSITION_EXPONENT = 0.5
#: a sample kept warm whose warm run still read more from DRAM than the profile says the
#: full run did (the warm-up did not reach the launch that wrote its inputs, or a few reads
#: inside the tolerance) ran slower than the full run by the time its extra DRAM reads
#: waited beyond an L2 hit: those reads overlap, so the loss is a few DRAM miss latencies
#: of the card, whatever their number (pipeline_step on the reduced QV100, STEM seeds 0-9:
#: 95 such samples with 1 to 2,049 extra sectors lost 1.15 miss latencies on average,
#: weighted by the samples' weights; 0.96 at the median, 2.5 at the 95th percentile). Its
#: full-run cycles lie between its warm cycles less ``WARM_EXCESS_LATENCIES`` miss
#: latencies (:func:`dram_miss_cycles`) and its warm cycles; it is placed at the middle
#: with the uniform variance of that range. 2.3: twice the weighted mean on that workload,
#: so the middle is unbiased where it counts. A fixed share of the warm cycles (the
#: earlier form) is the card's: the same samples lost 7.4% of their warm cycles on the
#: QV100 and 19.6% on an H100-like card whose miss costs 3.5 times as many core cycles.
WARM_EXCESS_LATENCIES = 2.3
#: the range below the warm cycles is at most this share of them (a guard for short
#: kernels on a card with slow DRAM; no training sample reaches it: at most 35% there)
WARM_EXCESS_CAP = 0.5
#: the range's share of the warm cycles when the card's DRAM miss latency is unknown (no
#: option dump in the log): twice the cycle-weighted mean loss on the QV100 workload above
WARM_EXCESS_SHARE = 0.15
#: columns of the per-sample table that are not simulator counters
SAMPLE_COLUMNS = ("launch_id", "weight", "cluster", "kernel", "cycles", "cycles_warm",
                  "cycles_cold", "position", "state_variance", "profiled_misses",
                  "misses_warm", "misses_cold")


def profiled_misses(bundle: Bundle, launch_ids: np.ndarray, *,
                    card_counts_dram: bool = True) -> tuple[str, str, np.ndarray] | None:
    """(metric, simulator column, values at ``launch_ids``) of the first of
    :data:`MISS_METRICS` the bundle holds for every one of those launches; None if none.
    ``card_counts_dram`` False (a simulated card whose log counts no DRAM reads: its simple
    DRAM model) leaves the DRAM reads out: against a column that always reads 0 they would
    show every warm run as warm as the profile, and no cold run colder."""
    metrics = bundle.metrics
    if metrics is None:
        return None
    ids = np.asarray(launch_ids, dtype=np.int64)
    row_of = pd.Series(np.arange(len(metrics)), index=metrics["launch_id"].to_numpy())
    present = np.isin(ids, row_of.index.to_numpy())
    if not present.all():
        return None
    rows = row_of.loc[ids].to_numpy()
    for metric, column in MISS_METRICS:
        if column == "dram_read_sectors" and not card_counts_dram:
            continue
        if metric in metrics.columns:
            values = metrics[metric].to_numpy(np.float64)[rows]
            if np.isfinite(values).all():
                return metric, column, values
    return None


#: an option of a GPGPU-Sim option dump or config: a quoted value may span lines
_OPTION = r'^{}[ \t]+("[^"]*"|[^#\n]*)'


def dram_miss_cycles(log_text: str) -> float | None:
    """Core cycles a read that misses the L2 waits beyond an L2 hit on the card of a
    GPGPU-Sim log, from the log's option dump: ``-dram_latency`` (GPGPU-Sim counts it in
    core cycles: ``memory_partition_unit::simple_dram_model_cycle``) plus a closed-row
    read, ``tRCD + CL`` of ``-gpgpu_dram_timing_opt`` in DRAM cycles, scaled by the core
    over the DRAM clock of ``-gpgpu_clock_domains``. SM7_QV100: 100 + 24 x 1132 / 850 =
    132. With ``-gpgpu_simple_dram_model 1`` (the simulator's fixed-latency DRAM,
    ``simple_dram_model_cycle``: a request waits ``-dram_latency`` core cycles, no bank
    or row timing) it is ``-dram_latency`` alone (SM90_H100: 194). None when the dump
    lacks any of them. The last value of an option wins, as in the simulator's own
    option parser."""

    def last(option: str) -> str | None:
        found = re.findall(_OPTION.format(re.escape(option)), log_text, re.M)
        return "".join(found[-1].strip('"').split()) if found else None

    latency, clocks, timing = (last("-dram_latency"), last("-gpgpu_clock_domains"),
                               last("-gpgpu_dram_timing_opt"))
    if latency is not None and last("-gpgpu_simple_dram_model") == "1":
        try:
            simple = float(latency)
        except ValueError:
            return None
        return simple if np.isfinite(simple) and simple > 0 else None
    if latency is None or clocks is None or timing is None:
        return None
    try:
        mhz = [float(x) for x in clocks.split(":")]
        fields = dict(part.split("=", 1) for part in timing.split(":") if "=" in part)
        row_read = float(fields["RCD"]) + float(fields["CL"])
        cycles = float(latency) + row_read * mhz[0] / mhz[3]
    except (ValueError, KeyError, IndexError, ZeroDivisionError):
        return None
    return cycles if np.isfinite(cycles) and cycles > 0 else None


def colder_than_warm(profiled: np.ndarray, warm: np.ndarray) -> np.ndarray:
    """Samples the profile shows colder than their warm run (more misses, past the
    tolerance): the ones the cold run must bracket."""
    slack = np.maximum(MISS_TOLERANCE_SECTORS, MISS_TOLERANCE_SHARE * warm)
    return profiled > warm + slack


def warmer_than_profile(profiled: np.ndarray, warm: np.ndarray) -> np.ndarray:
    """Samples whose warm run is colder than the profile (more misses, past the
    tolerance): a warm-up that does not reach the full run's state for them."""
    slack = np.maximum(MISS_TOLERANCE_SECTORS, MISS_TOLERANCE_SHARE * profiled)
    return warm > profiled + slack


@dataclass
class StatePlacement:
    """Per-sample cycles and counters after placing each sample between its runs.

    Attributes:
        table: one row per sample, launch order: :data:`SAMPLE_COLUMNS` then every
            simulator counter (interpolated like the cycles).
        method: ``"warm"`` (no cold run needed), ``"profile"`` (placed by profiled
            misses) or ``"pilot"`` (cold/warm ratio of a pilot, midpoint).
        metric: the profile metric used for the placement, if any.
        notes: what was done, in words.
        colder: samples whose warm-up left them colder than the profile (more misses,
            past the tolerance) and that no cold run brackets: their warm cycles are upper
            bounds; they are placed below them (:func:`excess_range`).
        colder_share: their share of the weighted warm cycles.
        miss_cycles: the card's DRAM miss latency in core cycles used for them, if known.
    """

    table: pd.DataFrame
    method: str
    metric: str | None
    notes: list[str]
    colder: int = 0
    colder_share: float = 0.0
    miss_cycles: float | None = None

    @property
    def state_variance(self) -> float:
        """``sum(weight^2 * variance)`` over the samples: the state term of the estimate."""
        w = self.table["weight"].to_numpy(np.float64)
        return float(np.sum(w * w * self.table["state_variance"].to_numpy(np.float64)))

    def estimate(self, column: str = "cycles") -> float:
        """``sum(weight * value)``: the sampled simulation's estimate of the full run."""
        return float(np.dot(self.table["weight"].to_numpy(np.float64),
                            self.table[column].to_numpy(np.float64)))

    def summary(self) -> dict[str, Any]:
        t = self.table
        bracketed = np.isfinite(t["cycles_cold"].to_numpy(np.float64))
        warm = self.estimate("cycles_warm")
        est = self.estimate()
        return {
            "placement": self.method,
            "profile_metric": self.metric,
            "samples": int(len(t)),
            "bracketed": int(bracketed.sum()),
            "estimate_cycles": est,
            "warm_estimate_cycles": warm,
            "state_correction": (est - warm) / warm if warm else None,
            "state_sd_cycles": float(np.sqrt(self.state_variance)),
            "colder_than_profile": self.colder,
            "colder_than_profile_share": self.colder_share,
            "dram_miss_cycles": self.miss_cycles,
            "notes": self.notes,
        }


def excess_range(warm_cycles: np.ndarray, miss_cycles: float | None) -> np.ndarray:
    """Depth of the range below the warm cycles in which the full run of a sample lies
    when its warm run read more from DRAM than the profile: :data:`WARM_EXCESS_LATENCIES`
    DRAM misses of the card, at most :data:`WARM_EXCESS_CAP` of the warm cycles;
    :data:`WARM_EXCESS_SHARE` of them when ``miss_cycles`` is unknown."""
    c = np.asarray(warm_cycles, dtype=np.float64)
    if miss_cycles is None or not np.isfinite(miss_cycles) or miss_cycles <= 0:
        return WARM_EXCESS_SHARE * c
    return np.minimum(WARM_EXCESS_LATENCIES * miss_cycles, WARM_EXCESS_CAP * c)


def _excess_words(miss_cycles: float | None) -> str:
    if miss_cycles is None or not np.isfinite(miss_cycles) or miss_cycles <= 0:
        return f"{50 * WARM_EXCESS_SHARE:.1f}% (the card's DRAM latency unknown)"
    half = WARM_EXCESS_LATENCIES / 2
    return (f"{half:g} DRAM misses ({half * miss_cycles:.0f} core cycles; at most "
            f"{50 * WARM_EXCESS_CAP:.0f}% of their cycles)")


def _counter_columns(frame: pd.DataFrame) -> list[str]:
    skip = {"sim_launch", "launch_id", "log", "uid", "kernel", "cycles", "tot_cycles",
            "ipc", "occupancy_pct"}
    return [c for c in frame.columns if c not in skip
            and pd.api.types.is_numeric_dtype(frame[c])]


def place_samples(
    samples: pd.DataFrame,
    warm: pd.DataFrame,
    cold: pd.DataFrame | None,
    profiled: np.ndarray | None,
    metric: str | None = None,
    miss_column: str = "l2_misses",
    miss_cycles: float | None = None,
) -> StatePlacement:
    """Combine the warm run (every sample) and the cold run (some samples) per sample.

    ``samples``: the plan's samples in launch order (``launch_id``, ``weight``,
    ``cluster``); ``warm`` / ``cold``: per-sample simulator statistics with ``launch_id``
    (:func:`hilsim.simmodel.gpgpusim.simlog.parse_simlog`, the launches of the other runs dropped);
    ``profiled``: the profile's misses per sample (None: the pilot placement at the
    midpoint, with the cold cycles of samples outside the pilot predicted from the
    pilot's cold/warm ratios); ``miss_cycles``: the card's DRAM miss latency in core
    cycles (:func:`dram_miss_cycles`), the unit of the range below the warm cycles of
    samples that read more than the profile (None: :data:`WARM_EXCESS_SHARE` of them).
    """
    ids = samples["launch_id"].to_numpy(np.int64)
    w_stats = warm.set_index("launch_id").loc[ids].reset_index()
    counters = _counter_columns(w_stats)
    n = len(ids)
    c_warm = w_stats["cycles"].to_numpy(np.float64)
    c_cold = np.full(n, np.nan)
    c_stats = None
    if cold is not None and len(cold):
        c_stats = cold.set_index("launch_id")
        in_cold = np.isin(ids, c_stats.index.to_numpy())
        c_cold[in_cold] = c_stats.loc[ids[in_cold], "cycles"].to_numpy(np.float64)
    else:
        in_cold = np.zeros(n, dtype=bool)
    notes: list[str] = []
    m_warm = (w_stats[miss_column].to_numpy(np.float64) if miss_column in w_stats
              else np.full(n, np.nan))
    m_cold = np.full(n, np.nan)
    if c_stats is not None and miss_column in c_stats:
        m_cold[in_cold] = c_stats.loc[ids[in_cold], miss_column].to_numpy(np.float64)
    position = np.zeros(n)  # of the way from warm to cold cycles
    fraction = np.zeros(n)  # of the way in misses: where the counters are placed
    predicted = c_cold
    if profiled is None and not in_cold.any():
        method = "warm"  # no cold run: the warm cycles as they are, no state term
    elif profiled is not None:
        method = "profile" if in_cold.any() else "warm"
        span = m_cold - m_warm
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.clip((profiled - m_warm) / span, 0.0, 1.0)
        # a cold run that missed no more than the warm one: the state did not show; warm
        fraction = np.where(in_cold & (span > 0), t, 0.0)
        position = fraction ** POSITION_EXPONENT
    else:
        method = "pilot"
        kernels = w_stats["kernel"].astype(str).to_numpy()
        ratio_k: dict[str, float] = {}
        if in_cold.any():
            ratios = c_cold[in_cold] / np.maximum(c_warm[in_cold], 1.0)
            frame = pd.DataFrame({"k": kernels[in_cold], "r": ratios})
            ratio_k = frame.groupby("k")["r"].mean().to_dict()
            pooled = float(np.average(ratios, weights=c_warm[in_cold]))
        else:
            pooled = 1.0
        ratio = np.array([ratio_k.get(k, pooled) for k in kernels])  # one per sample
        predicted = np.where(in_cold, c_cold, c_warm * ratio)
        position = np.full(n, 0.5)
        fraction = position
        notes.append(f"no profiled DRAM reads or L2 misses: {int(in_cold.sum())} pilot "
                     f"samples run cold, pooled cold/warm ratio {pooled:.3f}; every sample "
                     "at the midpoint")
    colder = np.zeros(n, dtype=bool)
    colder_share = 0.0
    if profiled is not None:
        # NaN misses compare False: a sample without a count is not flagged
        with np.errstate(invalid="ignore"):
            colder = warmer_than_profile(profiled, m_warm) & ~in_cold
        if colder.any():
            w_c = samples["weight"].to_numpy(np.float64) * c_warm
            colder_share = float(w_c[colder].sum() / w_c.sum()) if w_c.sum() > 0 else 0.0
            notes.append(
                f"{int(colder.sum())} samples ({100 * colder_share:.1f}% of the weighted "
                f"sampled cycles) still miss more than the profile after the warm-up "
                f"({metric or miss_column}): their warm cycles are upper bounds; each is "
                f"placed {_excess_words(miss_cycles)} below them, with that range in the "
                "95% interval")
    gap = np.where(np.isfinite(predicted), predicted - c_warm, 0.0)
    bracketed = in_cold | (method == "pilot")
    excess = np.zeros(n, dtype=bool)
    if profiled is not None:
        with np.errstate(invalid="ignore"):
            excess = (m_warm > profiled) & ~bracketed
        # below the warm run: its cycles are the top of the range the full run lies in
        gap = np.where(excess, -excess_range(c_warm, miss_cycles), gap)
        position = np.where(excess, 0.5, position)
    cycles = c_warm + position * gap
    variance = np.where(bracketed | excess,
                        gap * gap / 12.0 + (STATE_SD_BRACKETED * cycles) ** 2,
                        (STATE_SD_WARM * cycles) ** 2)
    if method == "warm" and profiled is None:
        variance = np.zeros(n)  # nothing measured about the state: no state term
    table = pd.DataFrame({
        "launch_id": ids,
        "weight": samples["weight"].to_numpy(np.float64),
        "cluster": samples["cluster"].to_numpy(np.int64),
        "kernel": w_stats["kernel"].astype(str).to_numpy(),
        "cycles": cycles,
        "cycles_warm": c_warm,
        "cycles_cold": c_cold,
        "position": position,
        "state_variance": variance,
        "profiled_misses": profiled if profiled is not None else np.full(n, np.nan),
        "misses_warm": m_warm,
        "misses_cold": m_cold,
    })
    for col in counters:
        if col in table.columns:
            continue
        warm_v = w_stats[col].to_numpy(np.float64)
        value = warm_v.copy()
        if c_stats is not None and col in c_stats and in_cold.any():
            cold_v = np.full(n, np.nan)
            cold_v[in_cold] = c_stats.loc[ids[in_cold], col].to_numpy(np.float64)
            value = np.where(in_cold, warm_v + fraction * (cold_v - warm_v), warm_v)
        table[col] = value
    return StatePlacement(table, method, metric, notes, int(colder.sum()), colder_share,
                          miss_cycles)


__all__ = [
    "MISS_METRICS",
    "MISS_TOLERANCE_SECTORS",
    "MISS_TOLERANCE_SHARE",
    "POSITION_EXPONENT",
    "SAMPLE_COLUMNS",
    "STATE_SD_BRACKETED",
    "STATE_SD_WARM",
    "StatePlacement",
    "WARM_EXCESS_CAP",
    "WARM_EXCESS_LATENCIES",
    "WARM_EXCESS_SHARE",
    "colder_than_warm",
    "dram_miss_cycles",
    "excess_range",
    "place_samples",
    "profiled_misses",
    "warmer_than_profile",
]
