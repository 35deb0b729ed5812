"""Principal Kernel Analysis, selection step (PKA, Avalos Baddouh et al., MICRO 2021).

Principal Kernel Selection (PKS, PKA section 3.1):

1. Features: the twelve microarchitecture-agnostic Nsight Compute metrics of
   PKA Table 2 (:data:`hilsim.core.metric_names.TABLE2_METRICS`). Those present in the
   bundle's metrics are used; missing ones are named in a plan note (``strict=True`` makes a
   missing one an error). ``launch__grid_size`` is derived from the launches'
   ``grid_x * grid_y * grid_z`` when the metrics lack it (noted in the plan).
2. ``StandardScaler`` then ``PCA`` keeping the fewest components whose
   cumulative explained variance reaches ``pca_variance`` (0.95 by default;
   ``1.0`` keeps all). Columns that are constant over the profiled launches
   carry no information and are dropped before scaling (listed in the
   diagnostics).
3. k-means for K = 1..``k_max`` ("typically from 1 to 20"). For each K the
   representative of every group is its *first chronological* launch (smallest
   ``launch_id``; section 3.1 found it as good as the launch nearest the centre
   and cheaper to trace), and the projected total is
   ``sum(group size * time of the representative)``. The first K whose
   relative error against the profiled total is at or below ``target_error``
   (5% in the paper) is chosen; when none is, the K with the smallest error is
   chosen and a note says so.
4. Weights are group sizes, so the plan's estimate of a per-launch quantity is
   the paper's projection.

Two-level profiling (PKA section 3.1, "Two-level profiling", Figure 3): with
``detailed_first=j`` PKS runs on the first ``j`` launches (which must have
metrics), a classifier (``sgd`` = ``SGDClassifier``, ``gnb`` = ``GaussianNB``,
``mlp`` = ``MLPClassifier``, the three models the paper names) is trained on
their light features (what Nsight Systems records, see :func:`light_features`)
and labels every later launch with one of the K groups. Group sizes then count
all N launches. The K choice uses the error over the first ``j`` (as the
paper's PKS step does); the diagnostics also give the error over all N
launches measured with the light (Nsight Systems) durations, and the
classifier's accuracy on a held-out, stratified 25% of the first ``j``. The
paper names the classifiers but reports no accuracy figure for them; this
number is ours.

Scale (the paper's SSD training has 5.3 million launches): everything is
vectorised; with more than ``minibatch_threshold`` rows ``MiniBatchKMeans``
replaces ``KMeans``, and k-means is fitted on at most
:data:`KMEANS_FIT_ROWS` rows drawn with the fixed seed, then ``predict`` labels
all rows. Group sizes and first launches use ``np.bincount`` and
``np.minimum.at``; no Python loop runs per launch.

PKA's second step, Principal Kernel Projection (section 3.2, stopping a
simulated kernel once its IPC is stable), is a simulator-side technique and is
not part of this plan.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import BOOLEAN, SEED, Constraints, Interval, Options
from hilsim.analyzer.methods.support import ordered_launches, relative_error

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.metric_names import CYCLES, GRID_SIZE, TABLE2_METRICS
from hilsim.core.plan import Plan, members_by_launch, samples_frame
from hilsim.core.schema import LAUNCH_RESOURCE_COLUMNS

TIME_METRICS: tuple[str, ...] = ("duration_ns", CYCLES)
CLASSIFIERS: tuple[str, ...] = ("sgd", "gnb", "mlp")

#: k-means is fitted on at most this many rows (seeded uniform subsample), then
#: ``predict`` labels every row.
KMEANS_FIT_ROWS = 200_000
#: the two-level classifier trains on at most this many rows (seeded subsample).
CLASSIFIER_MAX_TRAIN = 50_000
#: the held-out accuracy is measured on at most this many rows (seeded subsample).
CLASSIFIER_MAX_TEST = 100_000
#: share of the first j launches held out to measure the classifier's accuracy.
HOLDOUT_FRACTION = 0.25
#: one-hot columns for the most frequent kernel names of the training launches;
#: any other (or unseen) name sets one shared "other" column.
MAX_NAME_COLUMNS = 64
#: launch-table columns used as light features (log2(1 + value), null -> 0).
LIGHT_INT_COLUMNS: tuple[str, ...] = LAUNCH_RESOURCE_COLUMNS
#: the launch columns one-level PKA reads besides ids, names and durations: the grid, for
#: launch__grid_size when the metrics lack it (two-level PKA reads LIGHT_INT_COLUMNS too)
GRID_COLUMNS: tuple[str, ...] = ("grid_x", "grid_y", "grid_z")
_PREDICT_CHUNK = 131_072


@dataclass
class Selection:
    """Outcome of Principal Kernel Selection on the detailed launches."""

    labels: np.ndarray  # group per detailed row, 0..K-1, chronological order
    first: np.ndarray  # detailed row position of each group's representative
    sizes: np.ndarray  # detailed rows per group
    diagnostics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@register
class PKA(Method):
    """Principal Kernel Selection (PKA section 3.1), one- or two-level.

    Args:
        target_error: largest acceptable relative error of the projected total
            time against the profiled total (PKA uses 5%).
        k_max: largest number of groups tried (K = 1..k_max, PKA: 20).
        pca_variance: keep the fewest principal components whose cumulative
            explained variance ratio reaches this share (0 < v <= 1; 1 keeps
            all components).
        minibatch_threshold: above this many detailed launches use
            ``MiniBatchKMeans`` instead of ``KMeans``.
        seed: random state of k-means, subsampling and the classifier.
        detailed_first: two-level mode: the number ``j`` of first launches
            with detailed metrics; ``None`` (one-level) clusters every launch
            that has metrics.
        classifier: two-level classifier, ``sgd``, ``gnb`` or ``mlp``.
        time_metric: the profiled time the projection error is measured
            against: ``duration_ns`` (launch table) or
            ``gpu__cycles_elapsed.max`` (metrics; the paper uses cycles).
        strict: make any missing Table 2 metric an error instead of a note.
    """

    name: ClassVar[str] = "pka"
    needs: ClassVar[tuple[str, ...]] = ("metrics",)
    launch_columns: ClassVar[tuple[str, ...] | None] = GRID_COLUMNS
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "target_error": [Interval(float, 0, 1, closed="neither")],
        # bounded: one k-means fit per K = 1..k_max (PKA: "typically from 1 to 20")
        "k_max": [Interval(int, 1, 1000)],
        "pca_variance": [Interval(float, 0, 1, closed="right")],
        "minibatch_threshold": [Interval(int, 1, None)],
        "seed": [SEED],
        "detailed_first": [Interval(int, 1, None), None],
        "classifier": [Options(*CLASSIFIERS)],
        "time_metric": [Options(*TIME_METRICS)],
        "strict": [BOOLEAN],
    }

    def __init__(
        self,
        target_error: float = 0.05,
        k_max: int = 20,
        pca_variance: float = 0.95,
        minibatch_threshold: int = 100_000,
        seed: int = 0,
        detailed_first: int | None = None,
        classifier: str = "sgd",
        time_metric: str = "duration_ns",
        strict: bool = False,
    ) -> None:
        self.init_params(locals())
        if detailed_first is not None:  # the light features of the two-level classifier
            self.launch_columns = LIGHT_INT_COLUMNS  # type: ignore[misc]

    # ------------------------------------------------------------------ plan
    def plan(self, bundle: Bundle) -> Plan:
        """Run PKS (and, with ``detailed_first``, two-level labelling) on ``bundle``."""
        launches = ordered_launches(bundle, "pka")
        n = len(launches)
        launch_ids = launches["launch_id"].to_numpy(dtype=np.int64)
        detailed_rows, metrics = self._detailed_rows(bundle, launches, launch_ids)
        notes: list[str] = []
        features, feature_diag = self._features(metrics, launches, detailed_rows, notes)
        times = self._times(metrics, launches, detailed_rows)
        del metrics  # (light profile: a launch_id column as long as the launches)
        selection = select_principal_kernels(
            features,
            times,
            target_error=self.target_error,
            k_max=self.k_max,
            pca_variance=self.pca_variance,
            minibatch_threshold=self.minibatch_threshold,
            seed=self.seed,
        )
        del features, times  # each as long as the profiled launches: not needed any more
        notes.extend(selection.notes)
        diagnostics: dict[str, Any] = {
            "mode": "one-level" if self.detailed_first is None else "two-level",
            "n_launches": n,
            "n_detailed": int(detailed_rows.size),
            "time_metric": self.time_metric,
            **feature_diag,
            **selection.diagnostics,
        }
        durations = launches["duration_ns"].to_numpy(dtype=np.int64)
        rep_rows = detailed_rows[selection.first]
        if self.detailed_first is None:
            if detailed_rows.size == n:  # every launch profiled: the rows are 0..n-1
                labels_all = selection.labels
            else:
                labels_all = np.full(n, -1, dtype=np.int64)
                labels_all[detailed_rows] = selection.labels
            if detailed_rows.size < n:
                notes.append(
                    f"metrics cover {detailed_rows.size} of {n} launches; one-level PKA "
                    "represents only those (weights sum to "
                    f"{detailed_rows.size}); use detailed_first for two-level PKA"
                )
        else:
            labels_all = self._two_level(
                launches, detailed_rows.size, selection, diagnostics, notes
            )
        k = int(selection.sizes.size)
        member = labels_all >= 0
        sizes = np.bincount(labels_all[member], minlength=k)
        if self.detailed_first is not None:
            rep_dur = durations[rep_rows].astype(np.float64)
            projected = float(np.dot(sizes, rep_dur))
            total = float(durations.sum())
            diagnostics["all_launches_error"] = relative_error(projected, total)
            diagnostics["all_launches_projected_ns"] = projected
            diagnostics["all_launches_total_ns"] = total
        diagnostics["group_sizes"] = sizes.tolist()
        clusters = _cluster_records(launches, labels_all, member, sizes, rep_rows, durations)
        if self.detailed_first is not None:
            for record, detailed in zip(clusters, selection.sizes.tolist(), strict=True):
                record["detailed_size"] = int(detailed)
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=clusters,
            samples=samples_frame(launch_ids[rep_rows], sizes, np.arange(k, dtype=np.int64)),
            notes=notes,
            diagnostics=diagnostics,
            members=members_by_launch(launch_ids, labels_all),
        )

    # --------------------------------------------------------------- helpers
    def _detailed_rows(
        self, bundle: Bundle, launches: pd.DataFrame, launch_ids: np.ndarray
    ) -> tuple[np.ndarray, pd.DataFrame]:
        """Launch-table rows of the detailed launches and their metrics, in order."""
        metrics = bundle.metrics
        if metrics is None or len(metrics) == 0:
            if self.strict or _grid_size(launches, np.arange(len(launches))) is None:
                raise HilsimError(
                    "pka: the bundle has no metrics; PKA clusters Nsight Compute metrics "
                    "(PKA Table 2) — profile with ncu or pick a method that needs durations "
                    "only"
                )
            # light profile with launch configurations: launch__grid_size (Table 2) is
            # known exactly for every launch; the other 11 metrics are named as missing.
            # Every launch is a row of its own (no sort, no search: at 50M launches each
            # would be another 0.4 GB array)
            if self.detailed_first is None:
                duplicate = _first_duplicate(launch_ids)
                if duplicate is not None:
                    raise HilsimError(f"pka: metrics: duplicate launch_id {duplicate}")
                return np.arange(launch_ids.size, dtype=np.int64), pd.DataFrame(
                    {"launch_id": launch_ids}
                )
            metrics = pd.DataFrame({"launch_id": launch_ids})
        if "launch_id" not in metrics.columns:
            raise HilsimError("pka: metrics table has no 'launch_id' column")
        metrics = metrics.sort_values("launch_id", kind="stable").reset_index(drop=True)
        ids = metrics["launch_id"].to_numpy(dtype=np.int64)
        if ids.size > 1 and (np.diff(ids) == 0).any():
            dup = int(ids[1:][np.diff(ids) == 0][0])
            raise HilsimError(f"pka: metrics: duplicate launch_id {dup}")
        rows = np.searchsorted(launch_ids, ids)
        bad = (rows >= launch_ids.size) | (launch_ids[np.minimum(rows, launch_ids.size - 1)] != ids)
        if bad.any():
            raise HilsimError(
                f"pka: metrics: launch_id {int(ids[bad][0])} is not in the launches table"
            )
        j = self.detailed_first
        if j is None:
            return rows.astype(np.int64), metrics
        n = launch_ids.size
        if j > n:
            raise HilsimError(f"pka: detailed_first={j} exceeds the {n} launches of the bundle")
        take = rows < j
        have = np.zeros(j, dtype=bool)
        have[rows[take]] = True
        if not have.all():
            missing = np.flatnonzero(~have)
            raise HilsimError(
                f"pka: detailed_first={j}, but {missing.size} of the first {j} launches have "
                f"no metrics (first: launch_id {int(launch_ids[missing[0]])}); two-level PKA "
                "needs detailed metrics for every one of the first j launches"
            )
        return rows[take].astype(np.int64), metrics.loc[take].reset_index(drop=True)

    def _features(
        self,
        metrics: pd.DataFrame,
        launches: pd.DataFrame,
        rows: np.ndarray,
        notes: list[str],
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """The Table 2 feature matrix (float64, one row per detailed launch)."""
        columns: list[np.ndarray] = []
        used: list[str] = []
        missing: list[str] = []
        derived = False
        filled: dict[str, int] = {}
        for metric in TABLE2_METRICS:
            values = None
            if metric in metrics.columns:
                values = pd.to_numeric(metrics[metric], errors="coerce").to_numpy(
                    dtype=np.float64, na_value=np.nan
                )
                if np.isnan(values).all():
                    values = None
            if values is None and metric == GRID_SIZE:
                values = _grid_size(launches, rows)
                derived = values is not None
            if values is None:
                missing.append(metric)
                continue
            nan = np.isnan(values) | np.isinf(values)
            if nan.any():
                values = values.copy()
                values[nan] = float(np.median(values[~nan]))
                filled[metric] = int(nan.sum())
            columns.append(values)
            used.append(metric)
        if not used:
            raise HilsimError(
                "pka: none of the PKA Table 2 metrics is in the bundle's metrics; missing: "
                + ", ".join(missing)
            )
        if missing and self.strict:
            raise HilsimError(
                "pka: strict: PKA Table 2 metric(s) missing from the metrics: " + ", ".join(missing)
            )
        if missing:
            notes.append(
                f"{len(missing)} of the 12 PKA Table 2 metrics missing, clustered without them: "
                + ", ".join(missing)
            )
        if derived:
            notes.append(
                "launch__grid_size not in the metrics; derived from grid_x * grid_y * grid_z"
            )
        for metric, count in filled.items():
            notes.append(f"{metric}: {count} missing value(s) replaced by the column median")
        diag = {
            "features_used": used,
            "features_missing": missing,
            "grid_size_derived": derived,
        }
        return np.column_stack(columns), diag

    def _times(self, metrics: pd.DataFrame, launches: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
        if self.time_metric == "duration_ns":
            values = launches["duration_ns"].to_numpy(dtype=np.float64)
            return values if rows.size == len(launches) else values[rows]
        if self.time_metric not in metrics.columns:
            raise HilsimError(
                f"pka: time_metric {self.time_metric!r} is not in the bundle's metrics; "
                "use time_metric='duration_ns' or profile that metric"
            )
        values = pd.to_numeric(metrics[self.time_metric], errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HilsimError(
                f"pka: metrics: launch_id {int(metrics['launch_id'].iloc[row])}: "
                f"{self.time_metric} is missing or negative"
            )
        return values

    def _two_level(
        self,
        launches: pd.DataFrame,
        j: int,
        selection: Selection,
        diagnostics: dict[str, Any],
        notes: list[str],
    ) -> np.ndarray:
        """Group of every launch: PKS labels for the first j, the classifier's after."""
        n = len(launches)
        labels_all = np.empty(n, dtype=np.int64)
        labels_all[:j] = selection.labels
        k = int(selection.sizes.size)
        info: dict[str, Any] = {"name": self.classifier, "n_light": n - j}
        diagnostics["classifier"] = info
        if k == 1 or j == n:
            labels_all[j:] = 0
            reason = "single group" if k == 1 else "no lightly profiled launches"
            info.update(accuracy=None, train_size=0, test_size=0, skipped=reason)
            if j == n:
                notes.append(f"detailed_first={j} covers every launch; no launch was classified")
            return labels_all
        encoder = LightFeatures.fit(launches.iloc[:j])
        info["features"] = encoder.describe()
        accuracy, train_size, test_size, stratified, model = _train_classifier(
            encoder, launches.iloc[:j], selection.labels, self.classifier, self.seed
        )
        info.update(
            accuracy=accuracy,
            train_size=train_size,
            test_size=test_size,
            stratified=stratified,
        )
        if accuracy is not None and accuracy < 0.9:
            notes.append(
                f"two-level classifier {self.classifier} held-out accuracy {accuracy:.3f} "
                "(< 0.9): group sizes of the lightly profiled launches are uncertain"
            )
        for start in range(j, n, _PREDICT_CHUNK):
            stop = min(n, start + _PREDICT_CHUNK)
            labels_all[start:stop] = model(encoder.transform(launches.iloc[start:stop]))
        return labels_all


# ---------------------------------------------------------------- selection
def select_principal_kernels(
    features: np.ndarray,
    times: np.ndarray,
    *,
    target_error: float = 0.05,
    k_max: int = 20,
    pca_variance: float = 0.95,
    minibatch_threshold: int = 100_000,
    seed: int = 0,
) -> Selection:
    """PKS (PKA section 3.1) on a feature matrix whose rows are in launch order.

    Returns groups numbered by their first member (group 0 holds row 0), the
    row of each group's first-chronological representative and the group sizes,
    plus diagnostics (error per K, chosen K, explained variance).
    """
    m = features.shape[0]
    times = np.asarray(times, dtype=np.float64)
    total = float(times.sum())
    variable = np.ptp(features, axis=0) > 0
    diag: dict[str, Any] = {
        "constant_features": int((~variable).sum()),
        "profiled_total": total,
        "kmeans": "MiniBatchKMeans" if m > minibatch_threshold else "KMeans",
        "kmeans_fit_rows": int(min(m, KMEANS_FIT_ROWS)),
    }
    notes: list[str] = []
    if m < 2 or not variable.any():
        z = np.zeros((m, 0))
        diag.update(pca_components=0, explained_variance=1.0, explained_variance_ratio=[])
    else:
        z, ratios = _pca(features[:, variable], pca_variance, seed)
        diag.update(
            pca_components=int(z.shape[1]),
            explained_variance=float(ratios.sum()),
            explained_variance_ratio=[float(r) for r in ratios],
        )
    fit_rows = None
    if m > KMEANS_FIT_ROWS:
        rng = np.random.default_rng(seed)
        fit_rows = np.sort(rng.choice(m, size=KMEANS_FIT_ROWS, replace=False))
    tried: list[dict[str, Any]] = []
    best: tuple[float, int, np.ndarray, np.ndarray, np.ndarray] | None = None
    chosen = None
    for k in range(1, min(k_max, m) + 1):
        raw = _kmeans_labels(z, k, fit_rows, minibatch_threshold, seed)
        labels, sizes, first = chronological_groups(raw, k)
        del raw  # (not held while the next K's labels are computed)
        projected = float(np.dot(sizes, times[first]))
        error = relative_error(projected, total)
        tried.append({"k": k, "groups": int(sizes.size), "error": error})
        if best is None or error < best[0]:
            best = (error, k, labels, sizes, first)
        if error <= target_error:
            chosen = best = (error, k, labels, sizes, first)
            break
        if z.shape[1] == 0:
            notes.append("all profiled launches have identical features: one group")
            break
    assert best is not None
    error, k, labels, sizes, first = best
    met = chosen is not None
    if not met:
        notes.append(
            f"no K <= {min(k_max, m)} reached target_error {target_error:g}; chose K={k} with "
            f"the smallest projected error {error:.4f}"
        )
    diag.update(
        error_by_k=tried,
        chosen_k=k,
        n_groups=int(sizes.size),
        target_met=met,
        projected_error=error,
        projected_total=float(np.dot(sizes, times[first])),
    )
    return Selection(labels=labels, first=first, sizes=sizes, diagnostics=diag, notes=notes)


def chronological_groups(raw: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Renumber labels ``0..k-1`` by first appearance, dropping empty groups.

    Returns ``(labels, sizes, first)``: the new label per row, the size of each
    group and the row of its first member (its PKA representative).
    """
    m = raw.size
    first = np.full(k, m, dtype=np.int64)
    for start in range(0, m, _BLOCK_ROWS):  # (block by block: no row index as long as raw)
        stop = min(start + _BLOCK_ROWS, m)
        np.minimum.at(first, raw[start:stop], np.arange(start, stop, dtype=np.int64))
    used = np.flatnonzero(first < m)
    order = used[np.argsort(first[used], kind="stable")]
    remap = np.full(k, -1, dtype=np.int64)
    remap[order] = np.arange(order.size, dtype=np.int64)
    labels = remap[raw]
    sizes = np.bincount(labels, minlength=order.size).astype(np.int64)
    return labels, sizes, first[order]


def _pca(x: np.ndarray, variance: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardise ``x`` and project it on the components reaching ``variance``."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    scaled = StandardScaler(copy=False).fit_transform(np.array(x, dtype=np.float64))
    solver = "covariance_eigh" if _sklearn_at_least(1, 5) else "full"
    n_components: float | None = None if variance >= 1.0 else variance
    pca = PCA(n_components=n_components, svd_solver=solver, random_state=seed)
    z = pca.fit_transform(scaled)
    return np.ascontiguousarray(z), np.asarray(pca.explained_variance_ratio_)


def _sklearn_at_least(major: int, minor: int) -> bool:
    import sklearn

    parts = sklearn.__version__.split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (major, minor)
    except (IndexError, ValueError):
        return False


def _kmeans_labels(
    z: np.ndarray,
    k: int,
    fit_rows: np.ndarray | None,
    minibatch_threshold: int,
    seed: int,
) -> np.ndarray:
    """k-means labels of every row of ``z`` (fitted on ``fit_rows`` when given)."""
    m = z.shape[0]
    if k == 1 or z.shape[1] == 0:
        return np.zeros(m, dtype=np.int64)
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from sklearn.exceptions import ConvergenceWarning

    if m > minibatch_threshold:
        model: Any = MiniBatchKMeans(
            n_clusters=k, random_state=seed, n_init=3, batch_size=4096, max_no_improvement=10
        )
    else:
        model = KMeans(n_clusters=k, random_state=seed, n_init=3)
    sample = z if fit_rows is None else z[fit_rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        model.fit(sample)
        if fit_rows is None and isinstance(model, KMeans):
            return np.asarray(model.labels_, dtype=np.int64)
        # each row's nearest centre, block by block (the same labels; scikit-learn's
        # per-row weights and labels then never span all the rows)
        labels = np.empty(m, dtype=np.int64)
        for start in range(0, m, _BLOCK_ROWS):
            labels[start : start + _BLOCK_ROWS] = model.predict(z[start : start + _BLOCK_ROWS])
        return labels


#: rows per block where a whole-length temporary is avoided
_BLOCK_ROWS = 1 << 20


def _first_duplicate(ids: np.ndarray, block: int = 1 << 20) -> int | None:
    """The first id equal to the one before it in ``ids`` (ascending), block by block (no
    temporary as long as ``ids``); ``None`` when every id differs from its neighbour."""
    for start in range(1, ids.size, block):
        stop = min(start + block, ids.size)
        same = ids[start:stop] == ids[start - 1 : stop - 1]
        if same.any():
            return int(ids[start + int(np.argmax(same))])
    return None


def _grid_size(launches: pd.DataFrame, rows: np.ndarray) -> np.ndarray | None:
    """grid_x * grid_y * grid_z of ``rows``, or None when any factor is unknown."""
    product = np.ones(rows.size, dtype=np.float64)
    for column in ("grid_x", "grid_y", "grid_z"):
        if column not in launches.columns:
            return None
        values = launches[column].to_numpy(dtype=np.float64, na_value=np.nan)
        if rows.size < len(launches):  # (rows ascending and distinct: all of them is 0..n-1)
            values = values[rows]
        if np.isnan(values).any():
            return None
        product *= values
    return product


def _cluster_records(
    launches: pd.DataFrame,
    labels: np.ndarray,
    member: np.ndarray,
    sizes: np.ndarray,
    rep_rows: np.ndarray,
    durations: np.ndarray,
) -> list[dict[str, Any]]:
    """Plan cluster records; means, standard deviations and modes by bincount."""
    k = sizes.size
    # (full-length temporaries are reused in place and dropped when done, none taken when
    # every launch is a member: at 50M launches each is 0.4 GB)
    every = bool(member.all())
    lab = labels if every else labels[member]
    dev = durations.astype(np.float64) if every else durations[member].astype(np.float64)
    safe = np.maximum(sizes, 1)
    means = np.bincount(lab, weights=dev, minlength=k) / safe
    dev -= means[lab]
    dev *= dev
    stds = np.sqrt(np.bincount(lab, weights=dev, minlength=k) / safe)
    del dev
    kernel = launches["kernel"]
    kernel_codes = kernel.cat.codes.to_numpy()  # (the categorical's own codes: no copy)
    if not every:
        kernel_codes = kernel_codes[member]
    width = int(kernel_codes.max()) + 2 if kernel_codes.size else 1
    # the (group, kernel) key of each launch, from 0 to k * width - 1
    codes = lab * width
    del lab
    np.add(codes, kernel_codes, out=codes)
    codes += 1
    per_key = np.bincount(codes, minlength=k * width)
    del codes, kernel_codes
    keys = np.flatnonzero(per_key)  # ascending, as np.unique gives them
    counts = per_key[keys]
    key_group = keys // width
    order = np.lexsort((-counts, key_group))  # per group, most frequent first
    firsts = order[np.r_[True, np.diff(key_group[order]) != 0]]
    dominant = np.full(k, -1, dtype=np.int64)
    dominant[key_group[firsts]] = keys[firsts] % width - 1
    distinct = np.bincount(key_group, minlength=k)
    categories = kernel.cat.categories
    ids = launches["launch_id"].to_numpy(dtype=np.int64)
    records: list[dict[str, Any]] = []
    for g in range(k):
        records.append(
            {
                "cluster": g,
                "size": int(sizes[g]),
                "draws": 1,
                "mean_ns": float(means[g]),
                "std_ns": float(stds[g]),
                "label": str(categories[dominant[g]]) if dominant[g] >= 0 else "",
                "representative": int(ids[rep_rows[g]]),
                "n_kernels": int(distinct[g]),
            }
        )
    return records


# ---------------------------------------------------------------- two-level
@dataclass
class LightFeatures:
    """Light (Nsight Systems level) features of launches for the two-level classifier.

    PKA section 3.1 labels the lightly profiled launches from "the kernel name
    and grid dimensions" (plus PyProf tensor data, not available here). Columns:
    ``log2(1 + v)`` of grid x/y/z, block x/y/z, registers, static and dynamic
    shared memory (null -> 0; columns null for every training launch dropped),
    ``log2(1 + duration_ns)``, and a one-hot of the full kernel ``name``: one
    column for each of the :data:`MAX_NAME_COLUMNS` most frequent names of the
    training launches, one shared column for any other or unseen name. The
    classifier pipeline standardises all columns.
    """

    int_columns: list[str]
    name_columns: np.ndarray  # name category code -> one-hot column (last = other)
    n_names: int

    @classmethod
    def fit(cls, launches: pd.DataFrame) -> LightFeatures:
        int_columns = [
            c for c in LIGHT_INT_COLUMNS if c in launches.columns and launches[c].notna().any()
        ]
        codes = launches["name"].cat.codes.to_numpy(dtype=np.int64)
        n_cat = len(launches["name"].cat.categories)
        counts = np.bincount(codes[codes >= 0], minlength=n_cat)
        seen = np.flatnonzero(counts)
        top = seen[np.argsort(-counts[seen], kind="stable")][:MAX_NAME_COLUMNS]
        mapping = np.full(n_cat, top.size, dtype=np.int64)
        mapping[top] = np.arange(top.size, dtype=np.int64)
        return cls(int_columns=int_columns, name_columns=mapping, n_names=int(top.size))

    def describe(self) -> dict[str, Any]:
        return {
            "numeric": [*self.int_columns, "duration_ns"],
            "name_one_hot": self.n_names,
            "transform": "log2(1+v); one-hot of the most frequent kernel names + other",
        }

    def transform(self, launches: pd.DataFrame) -> np.ndarray:
        n = len(launches)
        width = len(self.int_columns) + 1 + self.n_names + 1
        out = np.zeros((n, width), dtype=np.float64)
        for i, column in enumerate(self.int_columns):
            values = launches[column].to_numpy(dtype=np.float64, na_value=0.0)
            out[:, i] = np.log2(1.0 + np.maximum(values, 0.0))
        base = len(self.int_columns)
        out[:, base] = np.log2(1.0 + launches["duration_ns"].to_numpy(dtype=np.float64))
        codes = launches["name"].cat.codes.to_numpy(dtype=np.int64)
        known = (codes >= 0) & (codes < self.name_columns.size)
        column = np.full(n, self.n_names, dtype=np.int64)
        column[known] = self.name_columns[codes[known]]
        out[np.arange(n), base + 1 + column] = 1.0
        return out


def _make_classifier(kind: str, seed: int) -> Any:
    from sklearn.linear_model import SGDClassifier
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "sgd":
        model: Any = SGDClassifier(random_state=seed, max_iter=1000, tol=1e-3)
    elif kind == "gnb":
        model = GaussianNB()
    else:
        model = MLPClassifier(
            hidden_layer_sizes=(32,), max_iter=200, random_state=seed, early_stopping=False
        )
    return make_pipeline(StandardScaler(), model)


def _train_classifier(
    encoder: LightFeatures, detailed: pd.DataFrame, y: np.ndarray, kind: str, seed: int
) -> tuple[float | None, int, int, bool, Any]:
    """Fit on 75% of the detailed launches, score on the held-out 25%.

    The split is stratified by group when every group has two members. Training
    uses at most :data:`CLASSIFIER_MAX_TRAIN` rows and scoring at most
    :data:`CLASSIFIER_MAX_TEST` (seeded subsamples). The model used to label the
    light launches is the one scored, so the reported accuracy describes it.
    Returns (accuracy, train size, test size, stratified, predict function).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(seed)
    index = np.arange(y.size)
    counts = np.bincount(y)
    n_classes = int((counts > 0).sum())
    test_n = int(math.ceil(HOLDOUT_FRACTION * y.size))
    stratified = bool(counts[counts > 0].min() >= 2 and test_n >= n_classes)
    if y.size >= 4:
        train, test = train_test_split(
            index,
            test_size=HOLDOUT_FRACTION,
            random_state=seed,
            stratify=y if stratified else None,
        )
    else:
        train, test, stratified = index, index[:0], False
    if train.size > CLASSIFIER_MAX_TRAIN:
        train = rng.choice(train, size=CLASSIFIER_MAX_TRAIN, replace=False)
    if test.size > CLASSIFIER_MAX_TEST:
        test = rng.choice(test, size=CLASSIFIER_MAX_TEST, replace=False)
    train, test = np.sort(train), np.sort(test)
    classes = np.unique(y[train])
    if classes.size == 1:
        only = int(classes[0])

        def predict_constant(rows: np.ndarray) -> np.ndarray:
            return np.full(rows.shape[0], only, dtype=np.int64)

        predict = predict_constant
    else:
        model = _make_classifier(kind, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(encoder.transform(detailed.iloc[train]), y[train])

        def predict_model(rows: np.ndarray) -> np.ndarray:
            return np.asarray(model.predict(rows), dtype=np.int64)

        predict = predict_model
    if test.size:
        accuracy: float | None = float(
            np.mean(predict(encoder.transform(detailed.iloc[test])) == y[test])
        )
    else:
        accuracy = None
    return accuracy, int(train.size), int(test.size), stratified, predict
