"""How many worker processes a comparison can afford.

Every worker holds its own copy of the bundle (and of the holdout), so memory grows with
the number of workers (about 14 GB with 2 workers at 10M launches).
:func:`memory_capped_workers` lowers the number of workers to what the available memory
(``MemAvailable`` of ``/proc/meminfo``) holds; with one worker the runs happen in this
process, on the bundle already in memory. (Workers reading the bundle from disk instead
would not help: each would still hold its own decoded copy.)
"""

from __future__ import annotations

from collections.abc import Iterable

from hilsim.core.bundle import Bundle
from hilsim.core.schema import LAUNCH_COLUMNS

#: memory one worker needs at its peak, in bundle sizes (:func:`bundle_bytes`): its copy,
#: the methods' working arrays and the interpreter (default methods, in one process:
#: 0.86 GB for a 0.25 GB bundle at 1M launches, 6.8 GB for 2.5 GB at 10M)
WORKER_BUNDLE_FACTOR = 3.0
GB = 1024**3
# bytes per launch of a nullable integer launch column in memory (values + null mask)
_INT_COLUMN_BYTES = 9


def bundle_bytes(bundles: Iterable[Bundle]) -> int:
    """In-memory size of the bundles' tables (distinct bundles counted once)."""
    total, seen = 0, set()
    for bundle in bundles:
        if id(bundle) in seen:
            continue
        seen.add(id(bundle))
        for table in (bundle.launches, bundle.metrics, bundle.regions):
            if table is not None:
                total += int(table.memory_usage(index=True, deep=True).sum())
    return total


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes; None where it cannot be read."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_capped_workers(
    requested: int, per_worker: int, available: int | None
) -> tuple[int, str | None]:
    """Workers that fit in ``available`` bytes at ``per_worker`` bytes each, and why fewer.

    Returns ``(workers, note)``; ``note`` is None when ``requested`` fits or
    ``available`` is unknown. Fewer than two fitting workers means one: the runs
    then happen in this process, which holds the bundle already.
    """
    if requested <= 1 or available is None or per_worker <= 0:
        return requested, None
    fit = int(available // per_worker)
    if fit >= requested:
        return requested, None
    workers = max(fit, 1)
    return workers, (
        f"workers reduced from {requested} to {workers}"
        + (" (runs in this process)" if workers == 1 else "")
        + f": each worker holds its own copy of the bundle (~{per_worker / GB:.1f} GB "
        f"with its working memory) and {available / GB:.1f} GB is available"
    )


def unread_column_bytes(bundle: Bundle, columns: tuple[str, ...] | None) -> int:
    """Bytes the launch columns ``columns`` (``None`` or empty: every launch column) that
    ``bundle`` lacks take once read (nullable int64: 9 bytes a launch each)."""
    return bundle.n_launches * _INT_COLUMN_BYTES * sum(
        c not in bundle.launches.columns for c in (columns or LAUNCH_COLUMNS)
    )


def comparison_workers(
    requested: int, bundles: Iterable[Bundle], extra_bytes: int = 0
) -> tuple[int, str | None]:
    """:func:`memory_capped_workers` for workers that each hold ``bundles`` and
    ``extra_bytes`` more (columns they read besides those given), at
    :data:`WORKER_BUNDLE_FACTOR` times that size, in the memory available now."""
    per_worker = int(WORKER_BUNDLE_FACTOR * (bundle_bytes(bundles) + extra_bytes))
    return memory_capped_workers(requested, per_worker, available_bytes())
