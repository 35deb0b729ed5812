"""The sweep spec: a TOML file of workloads, methods with parameter grids and seeds
(``docs/sweep.md``), checked into a :class:`SweepSpec` with one-line errors naming the
key at fault."""

from __future__ import annotations

import itertools
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.examples import EXAMPLES
from hilsim.simmodel.gpgpusim.cards import normalize_options

from hilsim.core import limits
from hilsim.core.errors import HilsimError
from hilsim.core.inputs import input_kind, read_input_text

_SPEC_KEYS = {"seeds", "simulate", "cards", "workloads", "methods"}
_WORKLOAD_KEYS = {
    "name", "path", "example", "holdout", "program", "card", "sim_options", "sim_timeout",
}
#: seconds before a simulation is killed (``hilsim simulate``'s default)
SIM_TIMEOUT = 4 * 3600.0
_METHOD_KEYS = {"name", "params"}
#: names a workload may not take: the files and folders the sweep writes beside its folders
RESERVED_NAMES = frozenset({"results.parquet", "summary.csv", "sim_summary.csv", "sim"})
#: characters of a workload's name (it names a folder and appears in tables and plots)
MAX_NAME = 128
#: method seeds are integers in [0, 2**32) (``hilsim.analyzer.methods.params.SEED``)
SEED_LIMIT = 2**32


@dataclass(frozen=True)
class Workload:
    """One profile to sample: ``path`` (bundle folder or profile file), optional holdout.

    For ``simulate``: ``program`` (the command that runs the workload on the simulated
    card and takes a launch list, as ``hilsim simulate``), ``card`` (else the spec's
    ``cards``), ``sim_options`` (the card's option overrides) and ``sim_timeout``.
    """

    name: str
    path: Path
    holdout: Path | None = None
    program: tuple[str, ...] | None = None
    card: str | None = None
    sim_options: dict[str, str] = field(default_factory=dict)
    sim_timeout: float = SIM_TIMEOUT


@dataclass(frozen=True)
class MethodGrid:
    """A method and its parameter grid: ``fixed`` values plus ``axes`` (lists) to cross."""

    name: str
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]

    def settings(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, params) for every point of the grid; the label names the grid values."""
        keys = sorted(self.axes)
        out = []
        for values in itertools.product(*(self.axes[k] for k in keys)):
            point = dict(zip(keys, values, strict=True))
            label = self.name
            if point:
                label += "(" + ", ".join(f"{k}={v}" for k, v in point.items()) + ")"
            out.append((label, {**self.fixed, **point}))
        return out


@dataclass
class SweepSpec:
    """A parsed sweep spec (see the module docstring and ``docs/sweep.md``)."""

    workloads: list[Workload]
    methods: list[MethodGrid]
    seeds: list[int]
    simulate: bool = False
    cards: list[str] = field(default_factory=list)
    source: Path | None = None


def _fail(source: Path, message: str) -> HilsimError:
    return HilsimError(f"{source}: {message}")


def _unknown(source: Path, where: str, table: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise _fail(
            source,
            f"{where}: unknown key(s) {', '.join(extra)} (known: {', '.join(sorted(allowed))})",
        )


def _resolve(
    base: Path, value: Any, source: Path, where: str, what: str = "a file or folder"
) -> Path:
    """``value`` as a path relative to the spec's folder; it must be a regular file or a
    folder (a FIFO or a device would hang or never end a digest)."""
    if not isinstance(value, str) or not value:
        raise _fail(source, f"{where}: expected a path string, got {value!r}")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    if not os.path.lexists(path):
        raise _fail(source, f"{where}: {path} does not exist")
    try:
        input_kind(path, what)
    except HilsimError as exc:
        raise _fail(source, f"{where}: {exc}") from None
    return path.resolve()


def _workload(base: Path, entry: Any, index: int, source: Path) -> Workload:
    where = f"workloads[{index}]"
    if not isinstance(entry, dict):
        raise _fail(source, f"{where}: expected a table")
    _unknown(source, where, entry, _WORKLOAD_KEYS)
    if ("path" in entry) == ("example" in entry):
        raise _fail(source, f"{where}: give either 'path' or 'example'")
    if "example" in entry:
        known = {e.name: e for e in EXAMPLES}
        example = known.get(entry["example"])
        if example is None:
            raise _fail(
                source, f"{where}: unknown example {entry['example']!r} (known: {', '.join(known)})"
            )
        path = example.path(example.profile).resolve()
        default_name = example.name
    else:
        path = _resolve(base, entry["path"], source, f"{where}.path")
        default_name = path.name.split(".")[0]
    holdout = (
        _resolve(base, entry["holdout"], source, f"{where}.holdout") if "holdout" in entry else None
    )
    name = _workload_name(entry.get("name", default_name), f"{where}.name", source)
    return Workload(name, path, holdout, *_simulation(base, entry, where, source))


def _card(base: Path, value: Any, source: Path, where: str) -> str:
    """A card name as given; a config file path resolved against the spec's folder."""
    if not isinstance(value, str) or not value:
        raise _fail(source, f"{where}: expected a card name or a gpgpusim.config path")
    if value.endswith(".config") or os.sep in value:
        return str(_resolve(base, value, source, where))
    return value


def _simulation(
    base: Path, entry: dict[str, Any], where: str, source: Path
) -> tuple[tuple[str, ...] | None, str | None, dict[str, str], float]:
    """A workload's ``program``, ``card``, ``sim_options`` and ``sim_timeout``, checked."""
    program = entry.get("program")
    if program is not None:
        if (
            not isinstance(program, list)
            or not program
            or not all(isinstance(a, str) and a for a in program)
        ):
            raise _fail(source, f"{where}.program: expected a list of strings (the command)")
        first = program[0]
        if os.sep in first:  # a path: relative to the spec; a bare name is looked up on PATH
            first = str(_resolve(base, first, source, f"{where}.program[0]"))
        program = (first, *program[1:])
    card = _card(base, entry["card"], source, f"{where}.card") if "card" in entry else None
    raw = entry.get("sim_options", {})
    if not isinstance(raw, dict) or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in raw.values()
    ):
        raise _fail(source, f"{where}.sim_options: expected a table of option = value")
    try:
        options = normalize_options(raw)
    except HilsimError as exc:
        raise _fail(source, f"{where}.sim_options: {exc}") from exc
    timeout = entry.get("sim_timeout", SIM_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise _fail(source, f"{where}.sim_timeout: expected seconds > 0, got {timeout!r}")
    return program, card, options, float(timeout)


def _method(entry: Any, index: int, source: Path) -> MethodGrid:
    where = f"methods[{index}]"
    if not isinstance(entry, dict):
        raise _fail(source, f"{where}: expected a table")
    _unknown(source, where, entry, _METHOD_KEYS)
    name = entry.get("name")
    if name not in methods.available():
        raise _fail(
            source,
            f"{where}.name: unknown method {name!r} (known: {', '.join(methods.available())})",
        )
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise _fail(source, f"{where}.params: expected a table of parameters")
    axes = {k: v for k, v in params.items() if isinstance(v, list)}
    if any(not v for v in axes.values()):
        raise _fail(source, f"{where}.params: an empty list gives no grid point")
    fixed = {k: v for k, v in params.items() if k not in axes}
    grid = MethodGrid(name, fixed, axes)
    if "seed" in params:
        raise _fail(source, f"{where}.params: set seeds with the top-level 'seeds', not params")
    for _, point in grid.settings():
        try:
            methods.create(name, **point)
        except HilsimError as exc:
            raise _fail(source, f"{where}: {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise _fail(source, f"{where}: parameters {point}: {exc}") from exc
    return grid


def _seeds(value: Any, source: Path) -> list[int]:
    """``seeds``: a count (seeds 0..N-1) or a list of seeds, each a method seed (an integer
    in [0, 2**32)), at most ``max_seeds`` of them (the list is built in memory)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        limits.check_seeds(value, f"{source}: seeds")
        return list(range(value))
    if isinstance(value, list) and value and all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s < SEED_LIMIT for s in value
    ):
        limits.check_seeds(len(value), f"{source}: seeds")
        return sorted(set(value))
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
    raise _fail(
        source, f"seeds: expected a count >= 1 or a list of seeds in [0, 2**32), got {shown}"
    )


def _workload_name(name: Any, where: str, source: Path) -> str:
    """A workload's name: the name of its output folder, so a usable and free one."""
    ok = (
        isinstance(name, str)
        and 0 < len(name) <= MAX_NAME
        and len(name.encode("utf-8", "surrogatepass")) <= 255
        and "/" not in name
        and not name.startswith(".")
        and name.isprintable()
        and name not in RESERVED_NAMES
    )
    if not ok:
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:60] + "..."
        raise _fail(
            source,
            f"{where}: {shown} is not a usable folder name (1-{MAX_NAME} printable "
            "characters, no '/', not starting with '.', not one of the sweep's own files "
            f"{', '.join(sorted(RESERVED_NAMES))})",
        )
    return name


def parse_spec(data: dict[str, Any], source: Path, base: Path | None = None) -> SweepSpec:
    """Validate a spec's tables; one-line :class:`HilsimError` naming the key on a problem."""
    base = base if base is not None else source.parent
    _unknown(source, "spec", data, _SPEC_KEYS)
    seeds = _seeds(data.get("seeds", 10), source)
    simulate = data.get("simulate", False)
    if not isinstance(simulate, bool):
        raise _fail(source, f"simulate: expected true or false, got {simulate!r}")
    cards = data.get("cards", [])
    if not isinstance(cards, list):
        raise _fail(source, "cards: expected a list of card names or config paths")
    cards = [_card(base, c, source, f"cards[{i}]") for i, c in enumerate(cards)]
    workloads_raw = data.get("workloads")
    if not isinstance(workloads_raw, list) or not workloads_raw:
        raise _fail(source, "workloads: expected at least one [[workloads]] table")
    methods_raw = data.get("methods")
    if not isinstance(methods_raw, list) or not methods_raw:
        raise _fail(source, "methods: expected at least one [[methods]] table")
    workloads = [_workload(base, w, i, source) for i, w in enumerate(workloads_raw)]
    names = [w.name for w in workloads]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _fail(source, f"workloads: name(s) {', '.join(dup)} used twice (set 'name')")
    grids = [_method(m, i, source) for i, m in enumerate(methods_raw)]
    for i, workload in enumerate(workloads if simulate else []):
        if workload.program is None:
            raise _fail(
                source,
                f"workloads[{i}]: simulate = true needs 'program' (the command that runs "
                "the workload on the simulated card)",
            )
        if workload.card is None and not cards:
            raise _fail(
                source,
                f"workloads[{i}]: simulate = true needs 'card' (or the top-level 'cards')",
            )
    return SweepSpec(workloads, grids, seeds, simulate, list(cards), source)


def load_spec(path: str | Path) -> SweepSpec:
    """Read a TOML sweep spec (paths in it are relative to its folder)."""
    source = Path(path)
    text = read_input_text(source, "a sweep spec (TOML)")  # regular files only, bounded
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HilsimError(f"{source}: not valid TOML ({exc})") from None
    except RecursionError:
        raise HilsimError(f"{source}: not valid TOML (nested too deeply)") from None
    return parse_spec(data, source)
