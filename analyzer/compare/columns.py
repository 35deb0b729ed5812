"""Which launch columns a comparison reads, and when.

At 50M launches each nullable integer launch column left on disk is 0.45 GB not held, so
a comparison of a bundle folder starts from the columns every method reads and reads a
method's own (:attr:`~hilsim.analyzer.methods.base.Method.launch_columns`) when its runs
start (:func:`bundle_columns_reader`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from hilsim.analyzer import methods

from hilsim.core.bundle import Bundle, read_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import LAUNCH_COLUMNS

#: reads the launch columns a method names (``None``: all) into a bundle; see
#: :func:`~hilsim.analyzer.compare.run.compare_methods`'s ``columns_of``
ColumnReader = Callable[[tuple[str, ...] | None], Bundle]


def launch_columns(
    names: Iterable[str], params: dict[str, dict[str, Any]] | None = None
) -> tuple[str, ...] | None:
    """The launch columns the methods ``names`` ("all": every registered one), with their
    ``params``, read together (:attr:`~hilsim.analyzer.methods.base.Method.launch_columns`
    of each method as created); ``None`` when one of them reads every column. A comparison
    reads only these: at 50M launches each nullable integer column left on disk is 0.45 GB
    not held."""
    chosen = list(names)
    if not chosen or chosen == ["all"]:
        chosen = methods.available()
    params = params or {}
    wanted: dict[str, None] = {}
    for name in chosen:
        try:
            columns = methods.create(name, **params.get(name, {})).launch_columns
        except HilsimError:
            return None  # an unknown name or parameter: the comparison words it
        if columns is None:
            return None
        wanted.update(dict.fromkeys(columns))
    return tuple(wanted)


def bundle_columns_reader(bundle: Bundle, path: str | Path | None) -> ColumnReader | None:
    """A :data:`ColumnReader` that adds the columns ``bundle`` lacks from the bundle folder
    ``path`` (its launch columns shared, not copied); ``None`` when ``path`` is not a
    bundle folder (a profile file is read whole)."""
    if path is None or not Path(path).is_dir():
        return None
    folder = Path(path)

    def read(columns: tuple[str, ...] | None) -> Bundle:
        have = bundle.launches
        wanted = list(LAUNCH_COLUMNS) if columns is None else list(columns)
        missing = [c for c in wanted if c in LAUNCH_COLUMNS and c not in have.columns]
        if not missing:
            return bundle
        read = read_bundle(folder, columns=missing)
        if read.manifest.get("digest") != bundle.manifest.get("digest"):
            raise HilsimError(f"{folder}: changed while it was compared (run compare again)")
        extra = read.launches
        del read
        frame = pd.DataFrame(
            {c: (have[c] if c in have.columns else extra[c]) for c in LAUNCH_COLUMNS
             if c in have.columns or c in extra.columns},
            index=have.index,
            copy=False,
        )
        del extra
        return Bundle(frame, bundle.metrics, bundle.regions, bundle.manifest, bundle.microbench,
                      bundle.path)

    return read
