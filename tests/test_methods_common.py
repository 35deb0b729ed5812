"""Checks every registered sampling method must pass (``methods.available()``).

In the manner of scikit-learn's estimator checks: one list of properties, run over
every method at its defaults, so a new method gets them without writing them.

* the plan file round-trips: the parameters read back from ``plan.json`` rebuild
  the method, and re-planning gives the same bytes (a plan is reproducible from its
  JSON alone, and the same seed gives the same plan);
* a stochastic method's ``with_seed`` copy is deterministic too;
* every launch lies in exactly one cluster, and (for methods whose weights count
  launches) the weights sum to the launch count;
* a method reads only the launch columns it declares (``launch_columns``): the plan
  is the same when the others are absent or garbage;
* every declared constraint refuses values outside it with one line naming the
  method and the parameter, and ``methods.create`` says "bad parameter value";
* every parameter is declared, documented and has a default its constraints accept.

Real data: the first 200 launches of the H100 transformer training profile
(``tests/data/silicon/H100/bundles/transformer-cupti``: Nsight Compute metrics for
those 200 launches, NVTX regions), on which every method plans. Synthetic bundles
serve only the property check over several random workloads.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.methods.describe import describe
from hilsim.analyzer.methods.params import (
    Boolean,
    Constraint,
    Interval,
    InvalidParameter,
    Names,
    Options,
    Regex,
    StrMapping,
    Text,
)

from hilsim.core.bundle import Bundle, read_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, load_plan
from hilsim.core.schema import LAUNCH_COLUMNS, REQUIRED_LAUNCH_COLUMNS, normalize_launches
from tests.conftest import DATA

METHODS = methods.available()
#: methods whose weights are not launch counts, and why (their clusters still cover
#: every launch once)
WEIGHTS_NOT_COUNTS = {
    "photon": "IPC projection: a representative weighs its members' instructions over its own",
    "megsim": "region unit: each launch of a representative region weighs its cluster's regions",
}


def _first_launches(path: Path, n: int) -> Bundle:
    whole = read_bundle(path)
    launches = whole.launches.iloc[:n].reset_index(drop=True)
    metrics = whole.metrics
    if metrics is not None:
        metrics = metrics[metrics["launch_id"] < n].reset_index(drop=True)
    return Bundle(launches, metrics, whole.regions, whole.manifest)


@pytest.fixture(scope="module")
def real() -> Bundle:
    """200 real H100 launches with metrics for each and NVTX regions."""
    bundle = _first_launches(DATA / "silicon" / "H100" / "bundles" / "transformer-cupti", 200)
    assert bundle.metrics is not None and len(bundle.metrics) == 200
    return bundle


@pytest.fixture(scope="module")
def default_plans(real: Bundle) -> dict[str, tuple[Any, Plan]]:
    """Each method at its defaults and its plan of the real bundle (made once)."""
    made = {}
    for name in METHODS:
        method = methods.create(name)
        made[name] = (method, method.plan(real))
    return made


def _plan_bytes(plan: Plan, path: Path) -> bytes:
    plan.save(path)
    return path.read_bytes()


@pytest.mark.parametrize("name", METHODS)
def test_plan_json_round_trip_reproduces_the_plan(name, real, default_plans, tmp_path) -> None:
    method, plan = default_plans[name]
    first = _plan_bytes(plan, tmp_path / "a.json")
    loaded = load_plan(tmp_path / "a.json")
    assert loaded.method == name
    assert loaded.params == method.params() == json.loads(json.dumps(method.params()))
    assert _plan_bytes(loaded, tmp_path / "b.json") == first
    rebuilt = methods.create(name, **loaded.params)
    assert rebuilt.params() == method.params()
    assert _plan_bytes(rebuilt.plan(real), tmp_path / "c.json") == first  # same seed, same plan


@pytest.mark.parametrize("name", [n for n in METHODS if methods.get(n).stochastic])
def test_with_seed_is_deterministic(name, real, tmp_path) -> None:
    method = methods.create(name).with_seed(5)
    assert method.params()["seed"] == 5
    one = _plan_bytes(method.plan(real), tmp_path / "one.json")
    two = _plan_bytes(methods.create(name, seed=5).plan(real), tmp_path / "two.json")
    assert one == two


def _check_covers_every_launch(name: str, plan: Plan, n: int) -> None:
    sizes = [int(c["size"]) for c in plan.clusters]
    assert sum(sizes) == n, f"{name}: cluster sizes sum to {sum(sizes)}, not {n}"
    members = plan.cluster_of_launches()
    if members is not None:
        assert len(members) == n and (members >= 0).all()
        by_cluster = np.bincount(members, minlength=len(sizes))
        assert by_cluster.tolist() == sizes
    weights = plan.samples["weight"].to_numpy(dtype=np.float64)
    assert (weights > 0).all() and np.isfinite(weights).all()
    if name not in WEIGHTS_NOT_COUNTS:
        assert math.isclose(float(weights.sum()), n, rel_tol=1e-9), (
            f"{name}: weights sum to {weights.sum()}, not the {n} launches"
        )


@pytest.mark.parametrize("name", METHODS)
def test_clusters_cover_every_launch_and_weights_count_them(name, real, default_plans) -> None:
    _check_covers_every_launch(name, default_plans[name][1], real.n_launches)


def _synthetic(seed: int) -> Bundle:
    """A random workload: a few kernels, lognormal durations, configs, regions, metrics."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 240))
    kernel = rng.integers(0, int(rng.integers(1, 6)), n)
    step = np.arange(n) * 8 // n  # 8 iterations
    durations = np.round(rng.lognormal(8 + kernel, 0.3)).astype(np.int64) + 1
    frame = pd.DataFrame(
        {
            "name": [f"k{k}" for k in kernel],
            "duration_ns": durations,
            "grid_x": 2 ** (kernel + 1),
            "grid_y": 1,
            "grid_z": 1,
            "block_x": 128,
            "block_y": 1,
            "block_z": 1,
            "start_ns": np.cumsum(durations + 500),
            "region": [f"train/step{s}" for s in step],
        }
    )
    launches = normalize_launches(frame, f"synthetic-{seed}")
    starts = launches["start_ns"].to_numpy(dtype=np.int64)
    regions = pd.DataFrame(
        {
            "region_id": np.arange(8, dtype=np.int64),
            "name": [f"step{s}" for s in range(8)],
            "path": [f"train/step{s}" for s in range(8)],
            "depth": 1,
            "start_ns": [int(starts[step == s].min()) - 100 for s in range(8)],
            "end_ns": [int(starts[step == s].max()) + 10**6 for s in range(8)],
        }
    )
    metrics = pd.DataFrame({"launch_id": np.arange(n, dtype=np.int64)})
    inst = durations * (3.0 + kernel)
    metrics["smsp__inst_executed.sum"] = inst
    metrics["smsp__inst_executed_op_global_ld.sum"] = inst * (0.1 + 0.1 * kernel)
    metrics["smsp__inst_executed_op_shared_ld.sum"] = inst * (0.5 - 0.05 * kernel)
    return Bundle(launches, metrics, regions)


@pytest.mark.parametrize("seed", range(4))
def test_property_clusters_cover_every_launch_on_random_workloads(seed: int) -> None:
    bundle = _synthetic(seed)
    for name in METHODS:
        plan = methods.create(name).plan(bundle)
        _check_covers_every_launch(name, plan, bundle.n_launches)


def _garbage(launches: pd.DataFrame, keep: set[str], seed: int) -> pd.DataFrame:
    """``launches`` with every column not in ``keep`` replaced by random values."""
    rng = np.random.default_rng(seed)
    out = launches.copy()
    n = len(out)
    for column in out.columns:
        if column in keep:
            continue
        if column == "region":
            junk = rng.choice(["zz/a", "zz/b", "zz/b/c"], n)
            out[column] = pd.Series(junk, dtype="category")
        else:
            out[column] = pd.array(rng.integers(0, 10**6, n), dtype=out[column].dtype)
    return out


#: settings besides the defaults under which the column check runs: the paths that
#: read other launch columns (light features, grid sizes, scalars)
COLUMN_SETTINGS: dict[str, list[dict[str, Any]]] = {
    "pka": [{"detailed_first": 100}],
    "tbpoint": [{"features": "light"}],
    "megsim": [{"scalars": ["regs"], "outside": "drop"}],
    "stem": [{"by_config": False}],
    "sieve": [{"representative": "random", "seed": 1}],
}
_COLUMN_CASES = [(n, {}) for n in METHODS] + [
    (n, params) for n, settings in COLUMN_SETTINGS.items() for params in settings
]


@pytest.mark.parametrize(("name", "params"), _COLUMN_CASES)
def test_reads_only_declared_launch_columns(name, params, real, tmp_path) -> None:
    method = methods.create(name, **params)
    declared = method.launch_columns
    assert declared is not None, f"{name}: declare the launch columns plan() reads"
    assert set(declared) <= set(LAUNCH_COLUMNS) | {"region_id"} | set(params.get("scalars", []))
    keep = set(REQUIRED_LAUNCH_COLUMNS) | set(declared)
    launches = real.launches
    narrow = Bundle(
        launches[[c for c in launches.columns if c in keep]].copy(),
        real.metrics,
        real.regions,
        real.manifest,
    )
    noisy = Bundle(_garbage(launches, keep, seed=1), real.metrics, real.regions, real.manifest)
    expected = _plan_bytes(method.plan(real), tmp_path / "whole.json")
    assert _plan_bytes(method.plan(narrow), tmp_path / "narrow.json") == expected
    assert _plan_bytes(method.plan(noisy), tmp_path / "noisy.json") == expected


#: values of the wrong kind for each kind of constraint
_WRONG: dict[type, list[Any]] = {
    Interval: ["not-a-number", True, float("nan"), float("inf"), [1], None],
    Options: ["no-such-option", 3, None],
    Boolean: ["yes", "False", 1, None],
    Text: ["", 3, None],
    Regex: ["(", 3],
    Names: [3, [3], "", []],
    StrMapping: [3, [("a", 1.0)], {1: 1.0}],
}


def _out_of_range(rule: Constraint) -> list[Any]:
    if not isinstance(rule, Interval):
        return []
    values: list[Any] = []
    for bound, step in ((rule.low, -1), (rule.high, 1)):
        if bound is not None:
            values += [bound, bound + step, bound + step * 0.5]
    return values


def _refused(constraints: list[Constraint | None], value: Any) -> bool:
    return not any(
        (value is None) if rule is None else rule.accepts(value) for rule in constraints
    )


def _bad_values(constraints: list[Constraint | None]) -> list[Any]:
    candidates: list[Any] = []
    for rule in constraints:
        if rule is not None:
            candidates += _WRONG[type(rule)] + _out_of_range(rule)
    candidates.append(object())
    return [v for v in candidates if _refused(constraints, v)]


_PARAMS = [
    (name, param)
    for name in METHODS
    for param in methods.get(name).parameter_constraints
]


@pytest.mark.parametrize(("name", "param"), _PARAMS)
def test_invalid_values_are_one_line_errors(name: str, param: str) -> None:
    cls = methods.get(name)
    constraints = cls.parameter_constraints[param]
    bad = _bad_values(constraints)
    assert len(bad) >= 2, f"{name}.{param}: no invalid value generated"
    for value in bad:
        with pytest.raises(InvalidParameter) as info:
            cls(**{param: value})
        message = str(info.value)
        assert "\n" not in message and message.startswith(f"{name}: {param} "), message
        assert info.value.name == param
        with pytest.raises(HilsimError) as wrapped:
            methods.create(name, **{param: value})
        text = str(wrapped.value)
        assert "\n" not in text and "bad parameter value" in text and param in text, text
    with pytest.raises(HilsimError, match="unknown parameter"):
        methods.create(name, no_such_parameter=1)


@pytest.mark.parametrize("name", METHODS)
def test_every_parameter_declared_documented_and_defaulted(name: str) -> None:
    cls = methods.get(name)
    defaults = cls.parameters()
    assert list(cls.parameter_constraints) != [] or defaults == {}
    assert set(cls.parameter_constraints) == set(defaults)
    info = describe(name)
    assert info.summary and info.paper and "shared/" not in info.paper
    assert [p.name for p in info.params] == list(defaults)
    for param in info.params:
        assert param.meaning, f"{name}.{param.name} is not documented in the Args: section"
        assert param.accepts, f"{name}.{param.name} has no constraint"
    made = cls().params()
    assert list(made) == list(defaults)
    for key, default in defaults.items():
        assert default is not inspect.Parameter.empty, f"{name}.{key} has no default"
        assert not _refused(cls.parameter_constraints[key], default), (name, key, default)
        assert json.loads(json.dumps(made[key])) == made[key]
