"""Sieve: stratified GPU-compute workload sampling (Naderan-Tahan, SeyyedAghaei and
Eeckhout, ISPASS 2023), as described and re-implemented by the STEM+ROOT paper
(Chung et al., MICRO'25: Table 1, sections 4.1-4.3 and 6).

Kernel signature (STEM Table 1): the kernel name and the instruction count of
each invocation (``smsp__inst_executed.sum`` from Nsight Compute; the STEM
authors collected it with NVBit). Every launch must have it.

Stratification (STEM section 6: "stratifies the kernels into three groups based
on the degree of instruction count variation across different invocations of
the same kernel code"; thresholds as in the STEM authors' Sieve re-implementation,
``ejchung0406/STEM-AE``, ``figure7/sampling_methods/sieve.py``), per kernel name:

* stratum 1: every invocation has the same instruction count (CoV 0; a kernel
  launched once is stratum 1 too);
* stratum 2: coefficient of variation ``sigma / mu`` (population sigma) of the
  instruction counts below ``cov_threshold`` (0.4);
* stratum 3: the rest. With ``kde=True`` each such kernel is split further at
  the local minima of a Gaussian kernel density estimate of its instruction
  counts; a resulting sub-stratum whose CoV is still above
  :data:`RESPLIT_COV` (0.5) is split once more (as the re-implementation does).
  STEM section 4.2 turned KDE off for CASIO ("it led to oversampling"): ``kde=False``
  keeps each stratum-3 kernel as one stratum.

Representative (STEM section 6: "samples the first-chronological one for each
kernel with the most dominant CTA size"): within every (sub-)stratum the most
frequent launch size, grid x*y*z times block x*y*z threads as in the
re-implementation (ties: the size seen first), and of those launches the first
one. ``representative="random"`` draws one of them at random instead (seeded);
STEM section 4.2 hand-tuned Sieve this way for gaussian and heartwall.

Projection (``weighting``):

* ``"count"`` (default): stratum time = representative time * number of launches
  in the stratum, which is what the STEM authors' re-implementation computes
  (the baseline of STEM Table 3), so each representative weighs its stratum size;
* ``"instructions"``: the stratum's time is projected from the representative's
  IPC, stratum time = representative time * (stratum instructions /
  representative instructions), i.e. the weight is the instruction ratio. The
  original Sieve paper is not in our corpus, so we could not check which of the
  two its text prescribes; both are offered and the plan records the choice.

Deviations: the re-implementation applies the dominant-size rule only to stratum 2
and takes, in stratum 3, the sub-stratum's launch with the fewest instructions;
we apply the section 6 rule (dominant size, first chronological) to every
stratum. The re-implementation's KDE uses ``sklearn.neighbors.KernelDensity`` with
bandwidth 1 instruction evaluated at the data points, which splits at almost every
distinct count; we use a Silverman (default) or Scott bandwidth evaluated on a
1,024-point grid (linear binning, exact Gaussian convolution), so sub-strata are
modes of the distribution.

Scale: grouping, moments, strata and representatives are ``np.bincount`` /
``np.lexsort`` passes over all launches; only the KDE runs per stratum-3 kernel
(a loop over kernel names, not launches).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import (
    BOOLEAN,
    SEED,
    Constraints,
    Interval,
    Options,
    Text,
)
from hilsim.analyzer.methods.support import (
    INSTRUCTIONS,
    aligned_metric,
    cluster_moments,
    launch_threads,
    ordered_launches,
    relative_error,
)

from hilsim.core.bundle import Bundle
from hilsim.core.plan import Plan, members_by_launch, samples_frame
from hilsim.core.schema import LAUNCH_CONFIG_COLUMNS

#: a KDE sub-stratum whose CoV stays above this is split once more (STEM-AE Sieve).
RESPLIT_COV = 0.5
#: grid points of the density estimate.
KDE_GRID = 1024
REPRESENTATIVES: tuple[str, ...] = ("first", "random")
WEIGHTINGS: tuple[str, ...] = ("count", "instructions")
BANDWIDTHS: tuple[str, ...] = ("silverman", "scott")


def kde_cuts(values: np.ndarray, bandwidth: str = "silverman") -> np.ndarray:
    """Instruction counts at which to cut a kernel's launches: local density minima.

    A Gaussian KDE of ``values`` (Silverman's or Scott's rule of thumb) is evaluated
    on :data:`KDE_GRID` points spanning the data (linear binning, then convolution
    with the Gaussian sampled to 10 bandwidths). A cut lies in the middle of every
    valley: a fall of the density followed, after any flat run (an empty gap), by a
    rise. Returns the sorted cut values (possibly empty).
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    lo, hi = float(x.min()), float(x.max())
    if n < 2 or hi <= lo:
        return np.empty(0)
    std = float(x.std(ddof=1))
    q75, q25 = np.percentile(x, [75, 25])
    spread = min(std, (q75 - q25) / 1.349) if q75 > q25 else std
    h = (1.059 * std if bandwidth == "scott" else 0.9 * spread) * n ** (-0.2)
    if not h > 0:
        return np.empty(0)
    step = (hi - lo) / (KDE_GRID - 1)
    pos = (x - lo) / step
    left = np.minimum(np.floor(pos).astype(np.int64), KDE_GRID - 2)
    frac = pos - left
    hist = np.bincount(left, weights=1.0 - frac, minlength=KDE_GRID)
    hist += np.bincount(left + 1, weights=frac, minlength=KDE_GRID)
    width = h / step
    reach = int(min(np.ceil(10.0 * width), KDE_GRID - 1))
    offsets = np.arange(-reach, reach + 1, dtype=np.float64)
    kernel = np.exp(-0.5 * (offsets / width) ** 2)
    density = np.convolve(hist, kernel, mode="full")[reach : reach + KDE_GRID]
    # slopes below a relative tolerance count as flat, so rounding cannot make valleys;
    # a valley is a descent followed (after any flat run) by an ascent, cut mid-run
    slope = np.diff(density)
    sign = np.where(np.abs(slope) <= density.max() * 1e-9, 0, np.sign(slope))
    steps = np.flatnonzero(sign)
    turn = np.flatnonzero((sign[steps[:-1]] < 0) & (sign[steps[1:]] > 0))
    valley = 0.5 * (steps[turn] + 1 + steps[turn + 1])
    return lo + valley * step


def kde_labels(values: np.ndarray, bandwidth: str, depth: int = 2) -> np.ndarray:
    """Sub-stratum of each value: KDE cuts, then once more where the CoV exceeds 0.5."""
    x = np.asarray(values, dtype=np.float64)
    labels = np.searchsorted(kde_cuts(x, bandwidth), x, side="right").astype(np.int64)
    if depth <= 1:
        return labels
    out = np.zeros(x.size, dtype=np.int64)
    next_label = 0
    for sub in np.unique(labels):
        member = labels == sub
        part = x[member]
        mean = float(part.mean())
        cov = float(part.std()) / mean if mean > 0 else 0.0
        if cov > RESPLIT_COV:
            inner = kde_labels(part, bandwidth, depth - 1)
            out[member] = next_label + inner
            next_label += int(inner.max()) + 1
        else:
            out[member] = next_label
            next_label += 1
    return out


@register
class Sieve(Method):
    """Sieve (ISPASS'23) as in STEM+ROOT Table 1 / section 6: name + instruction-count strata.

    Args:
        cov_threshold: stratum 2 holds kernels whose instruction-count CoV is
            above 0 and below this (0.4).
        kde: split stratum-3 kernels at the minima of a kernel density estimate
            of their instruction counts (STEM turned it off for CASIO).
        kde_bandwidth: ``silverman`` or ``scott`` rule of thumb.
        representative: ``first`` (first chronological launch of the dominant
            launch size, the paper's rule) or ``random`` (one of those at random;
            STEM's hand-tuning for gaussian and heartwall).
        weighting: ``count`` (stratum size) or ``instructions`` (instruction
            ratio, IPC-based projection); see the module docstring.
        instruction_metric: metrics column holding each launch's instruction count.
        seed: random state of ``representative="random"``.
    """

    name: ClassVar[str] = "sieve"
    needs: ClassVar[tuple[str, ...]] = ("durations", "metrics")
    launch_columns: ClassVar[tuple[str, ...] | None] = LAUNCH_CONFIG_COLUMNS
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "cov_threshold": [Interval(float, 0, None, closed="neither")],
        "kde": [BOOLEAN],
        "kde_bandwidth": [Options(*BANDWIDTHS)],
        "representative": [Options(*REPRESENTATIVES)],
        "weighting": [Options(*WEIGHTINGS)],
        "instruction_metric": [Text("a metric name")],
        "seed": [SEED],
    }

    def __init__(
        self,
        cov_threshold: float = 0.4,
        kde: bool = True,
        kde_bandwidth: str = "silverman",
        representative: str = "first",
        weighting: str = "count",
        instruction_metric: str = INSTRUCTIONS,
        seed: int = 0,
    ) -> None:
        self.init_params(locals())
        # random representatives make the plan a random draw: evaluate over seeds
        self.stochastic = self.representative == "random"  # type: ignore[misc]

    def plan(self, bundle: Bundle) -> Plan:
        """Stratify ``bundle``'s launches and pick one representative per stratum."""
        launches = ordered_launches(bundle, "sieve")
        n = len(launches)
        inst = aligned_metric(
            bundle,
            launches,
            self.instruction_metric,
            "sieve",
            "Sieve stratifies kernels by their instruction counts and needs one for every "
            "launch (profile it with ncu, or name another column with instruction_metric)",
        )
        notes: list[str] = []
        group = launches["name"].cat.codes.to_numpy(dtype=np.int64)
        strata, stratum_of_group, sub = self._stratify(group, inst)
        n_strata = int(strata.max()) + 1
        threads = launch_threads(launches)
        if threads is None:
            threads = np.zeros(n, dtype=np.int64)
            notes.append(
                "launch configurations (grid, block) not recorded: the representative is "
                "the first launch of each stratum (no dominant launch size)"
            )
        rng = np.random.default_rng(self.seed)
        rep_rows = _representatives(strata, threads, n_strata, self.representative, rng)
        sizes, means, stds = cluster_moments(
            strata, launches["duration_ns"].to_numpy(dtype=np.float64), n_strata
        )
        inst_sum = np.bincount(strata, weights=inst, minlength=n_strata)
        rep_inst = inst[rep_rows]
        if self.weighting == "instructions":
            zero = rep_inst <= 0
            weights = np.where(zero, sizes, inst_sum / np.where(zero, 1.0, rep_inst))
            if zero.any():
                notes.append(
                    f"{int(zero.sum())} stratum representative(s) executed 0 instructions: "
                    "weighted by launch count instead"
                )
        else:
            weights = sizes.astype(np.float64)
        stratum_no = stratum_of_group[group[rep_rows]]
        durations = launches["duration_ns"].to_numpy(dtype=np.float64)
        projected = float(np.dot(weights, durations[rep_rows]))
        total = float(durations.sum())
        if launches.attrs.get("durations_measured") is False:
            notes.append("durations are placeholders (not measured): projected error is moot")
        ids = launches["launch_id"].to_numpy(dtype=np.int64)
        names = launches["name"].cat.categories
        clusters = [
            {
                "cluster": s,
                "label": str(names[group[rep_rows[s]]]),
                "stratum": int(stratum_no[s]),
                "substratum": int(sub[rep_rows[s]]),
                "size": int(sizes[s]),
                "draws": 1,
                "mean_ns": float(means[s]),
                "std_ns": float(stds[s]),
                "representative": int(ids[rep_rows[s]]),
                "instructions": float(inst_sum[s]),
                "representative_instructions": float(rep_inst[s]),
                "weight": float(weights[s]),
            }
            for s in range(n_strata)
        ]
        per_stratum = {
            str(k): {
                "kernels": int((stratum_of_group == k).sum()),
                "launches": int(np.isin(strata, np.flatnonzero(stratum_no == k)).sum()),
                "strata": int((stratum_no == k).sum()),
            }
            for k in (1, 2, 3)
        }
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=clusters,
            samples=samples_frame(ids[rep_rows], weights, np.arange(n_strata, dtype=np.int64)),
            members=members_by_launch(ids, strata),
            sampling="random" if self.representative == "random" else "deterministic",
            notes=notes,
            diagnostics={
                "n_launches": n,
                "n_strata": n_strata,
                "by_stratum": per_stratum,
                "projected_total_ns": projected,
                "projected_error": relative_error(projected, total),
                "instruction_metric": self.instruction_metric,
            },
        )

    def _stratify(
        self, group: np.ndarray, inst: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(stratum id per launch, Sieve stratum 1/2/3 per kernel, sub-stratum per launch).

        Stratum ids are numbered by their first launch (chronological).
        """
        n_groups = int(group.max()) + 1
        counts = np.bincount(group, minlength=n_groups)
        safe = np.maximum(counts, 1)
        mean = np.bincount(group, weights=inst, minlength=n_groups) / safe
        dev = inst - mean[group]
        std = np.sqrt(np.bincount(group, weights=dev * dev, minlength=n_groups) / safe)
        lo = np.full(n_groups, np.inf)
        hi = np.full(n_groups, -np.inf)
        np.minimum.at(lo, group, inst)
        np.maximum.at(hi, group, inst)
        with np.errstate(divide="ignore", invalid="ignore"):
            cov = np.where(mean > 0, std / mean, 0.0)
        level = np.where(hi == lo, 1, np.where(cov < self.cov_threshold, 2, 3)).astype(np.int64)
        level[counts == 0] = 0
        sub = np.zeros(group.size, dtype=np.int64)
        if self.kde:
            high = np.flatnonzero(level == 3)
            if high.size:
                rows = np.flatnonzero(np.isin(group, high))
                order = rows[np.lexsort((inst[rows], group[rows]))]
                bounds = np.flatnonzero(np.diff(group[order])) + 1
                for chunk in np.split(order, bounds):
                    sub[chunk] = kde_labels(inst[chunk], self.kde_bandwidth)
        key = group * (int(sub.max()) + 1) + sub
        _, raw = np.unique(key, return_inverse=True)
        raw = raw.reshape(-1)
        k = int(raw.max()) + 1
        first = np.full(k, group.size, dtype=np.int64)
        np.minimum.at(first, raw, np.arange(group.size, dtype=np.int64))
        remap = np.empty(k, dtype=np.int64)
        remap[np.argsort(first, kind="stable")] = np.arange(k, dtype=np.int64)
        return remap[raw], level, sub


def _representatives(
    strata: np.ndarray, threads: np.ndarray, k: int, mode: str, rng: np.random.Generator
) -> np.ndarray:
    """Row of each stratum's representative: dominant launch size, first (or random) launch.

    Dominant = most launches of that size in the stratum; ties go to the size whose
    first launch comes first. Vectorised with one lexsort over all launches.
    """
    n = strata.size
    rows = np.arange(n, dtype=np.int64)
    order = np.lexsort((rows, threads, strata))  # by stratum, size, then time
    s_sorted, t_sorted = strata[order], threads[order]
    new_pair = np.r_[True, (np.diff(s_sorted) != 0) | (np.diff(t_sorted) != 0)]
    pair_start = np.flatnonzero(new_pair)
    pair_count = np.diff(np.r_[pair_start, n])
    pair_stratum = s_sorted[pair_start]
    pair_first = order[pair_start]  # earliest launch of each (stratum, size)
    pick = np.lexsort((pair_first, -pair_count, pair_stratum))
    chosen = pick[np.r_[True, np.diff(pair_stratum[pick]) != 0]]
    best = np.empty(k, dtype=np.int64)
    if mode == "first":
        best[pair_stratum[chosen]] = pair_first[chosen]
        return best
    offsets = np.floor(rng.random(chosen.size) * pair_count[chosen]).astype(np.int64)
    best[pair_stratum[chosen]] = order[pair_start[chosen] + offsets]
    return best
