"""Values derived from a bundle table, reused while one evaluation loop runs.

Scoring a method over seeds (``hilsim evaluate --seeds``, ``hilsim compare``) asks
for the same per-bundle facts for every seed: the per-metric totals, the total time,
STEM's launch key and its sort of every launch. At 10M launches each costs a
fraction of a second to seconds, every seed. Inside ``with TableCache():`` the
function :func:`derived` computes each value once per table *object* and returns it
again for the same object; outside any ``TableCache`` it just computes.

Like :meth:`hilsim.core.bundle.Bundle.sequence_digest` (cached per launches table),
an entry is tied to the table object and its shape and column names: assigning a
new table (``bundle.metrics = other``) recomputes. Unlike that cache, entries live
only as long as the ``TableCache`` that holds them, so an edit made to a table
*in place* between two evaluations can never be answered from a stale entry; the
loops that open a ``TableCache`` only read their bundles. The entry holds a
reference to its table, so a new table at a recycled ``id`` is never mistaken for
the old one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")

_ACTIVE: list[TableCache] = []


class TableCache:
    """A scope (context manager, re-enterable) in which :func:`derived` reuses values."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Hashable, int], tuple[pd.DataFrame, Hashable, Any]] = {}

    def __enter__(self) -> TableCache:
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.remove(self)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, table: pd.DataFrame, kind: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` for (``kind``, ``table``) once; recomputed if the table changed."""
        key = (kind, id(table))
        stamp = (table.shape, tuple(table.columns))
        hit = self._entries.get(key)
        if hit is not None and hit[0] is table and hit[1] == stamp:
            return hit[2]
        value = compute()
        self._entries[key] = (table, stamp, value)
        return value


def derived(table: pd.DataFrame, kind: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, reused for the same ``table`` and ``kind`` inside a :class:`TableCache`.

    ``kind`` names the value (and any parameter it depends on besides the table,
    e.g. ``("stem-points", by_config)``); ``compute`` must depend only on ``table``
    and ``kind``.
    """
    if not _ACTIVE:
        return compute()
    return _ACTIVE[-1].get(table, kind, compute)
