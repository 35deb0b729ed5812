"""Run the microbenchmark suite (Accel-Sim Section II-C: the microbenchmarks that feed
the configuration tuner; Section IV: the same suite run per GPU generation).

:func:`run_benchmarks` runs any device's benchmarks (each family's
``benchmarks(device)``, :func:`family_benchmarks`): a benchmark that raises is recorded as
an invalid measurement with the error's first line, and the suite goes on.
``run_suite(only=["latency", "bandwidth"])`` runs the chosen families on a CUDA GPU in a
fixed order (``clock`` first so the others convert with the measured SM clock) behind one
rich progress bar and returns every :class:`~hilsim.core.measurement.Measurement`. Aimed
at < 2 minutes on an H100.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hilsim.microbench.cupy_device import CupyDevice
from hilsim.microbench.device import Benchmark, Device
from hilsim.microbench.gpu import device_facts, first_line, require_cupy
from hilsim.microbench.sources import FAMILY_MODULES

from hilsim.core import measurement_names as mn
from hilsim.core.console import progress_bar
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement

__all__ = [
    "FAMILIES",
    "QUICK_SKIP",
    "device_facts",
    "family_benchmarks",
    "parse_only",
    "parse_skip",
    "run_benchmarks",
    "run_suite",
    "without_skipped",
]

#: every family, in suite order
FAMILIES: tuple[str, ...] = tuple(FAMILY_MODULES)


def parse_only(only: str | Sequence[str] | None) -> list[str]:
    """Families to run, in suite order, from ``"latency,bandwidth"`` or a list.

    ``None`` or empty means all. Unknown names raise a one-line ``HilsimError``.
    """
    if only is None:
        return list(FAMILIES)
    items = only.split(",") if isinstance(only, str) else list(only)
    names = {item.strip().lower() for item in items if item.strip()}
    if not names:
        return list(FAMILIES)
    unknown = sorted(names - set(FAMILIES))
    if unknown:
        raise HilsimError(
            f"--only: unknown family {', '.join(unknown)} (choose from {', '.join(FAMILIES)})"
        )
    return [f for f in FAMILIES if f in names]


def family_benchmarks(device: Device, families: Sequence[str]) -> list[Benchmark]:
    """The benchmarks of ``families`` on ``device``, in order."""
    return [b for family in families for b in FAMILY_MODULES[family].benchmarks(device)]


#: what ``--quick`` skips: the footprint sweep (most of the suite's time on a simulated
#: card: 4 x the unified L1 in dependent loads per point) and the stride sweep; the tuner
#: takes the L1 size from the device facts, which it prefers to the sweep anyway
QUICK_SKIP: tuple[str, ...] = (mn.LATENCY_FOOTPRINT_SWEEP, mn.LATENCY_STRIDE_SWEEP)


def parse_skip(skip: str | Sequence[str] | None) -> list[str]:
    """Benchmark names from ``"a,b"`` or a list (empty for None)."""
    if skip is None:
        return []
    items = skip.split(",") if isinstance(skip, str) else list(skip)
    return [item.strip() for item in items if item.strip()]


def without_skipped(
    benches: Sequence[Benchmark], skip: Sequence[str], backend_params: dict[str, Any],
    *, quick: bool = False,
) -> tuple[list[Benchmark], list[Measurement]]:
    """(the benchmarks to run, a skipped measurement per benchmark left out). A name in
    ``skip`` that is no benchmark of this device is a one-line ``HilsimError`` naming the
    ones there are; ``quick`` adds :data:`QUICK_SKIP` (those the device has)."""
    names = [name for name, _ in benches]
    unknown = [s for s in skip if s not in names]
    if unknown:
        raise HilsimError(
            f"--skip: no benchmark {', '.join(unknown)} here (choose from {', '.join(names)})"
        )
    why = {name: "--skip" for name in skip}
    if quick:
        why.update({name: "--quick" for name in QUICK_SKIP if name in names and name not in why})
    kept = [b for b in benches if b[0] not in why]
    skipped = [
        Measurement(name, None, "", dict(backend_params), [], 0.0, False,
                    f"skipped: not run ({reason})")
        for name, reason in why.items()
    ]
    return kept, skipped


def run_benchmarks(
    device: Device,
    benches: Sequence[Benchmark],
    failed: Callable[[str, Exception], Measurement],
    *,
    before: Callable[[str], None] | None = None,
    after: Callable[[list[Measurement]], None] | None = None,
) -> list[Measurement]:
    """Every benchmark's measurements, in order. A benchmark that raises gives
    ``failed(name, exc)`` instead; ``before(name)`` runs before each benchmark and
    ``after(measurements so far)`` after it."""
    results: list[Measurement] = []
    for name, bench in benches:
        if before is not None:
            before(name)
        try:
            out = bench(device)
        except Exception as exc:  # one broken benchmark must not lose the others' results
            out = [failed(name, exc)]
        results.extend(out)
        if after is not None:
            after(results)
    return results


def _failed(name: str, exc: Exception) -> Measurement:
    return Measurement(
        name=name,
        value=None,
        unit="",
        valid=False,
        note=f"failed: {type(exc).__name__}: {first_line(exc)}",
    )


def run_suite(
    only: Sequence[str] | str | None = None,
    device: int = 0,
    progress: bool = True,
    facts: dict[str, Any] | None = None,
    seed: int = 0,
    on_measured: Callable[[list[Measurement]], None] | None = None,
    skip: Sequence[str] = (),
    quick: bool = False,
) -> list[Measurement]:
    """Run the selected families on CUDA device ``device``; every measurement in order
    (benchmarks in ``skip``, and with ``quick`` those of :data:`QUICK_SKIP`, recorded as
    skipped instead: :func:`without_skipped`).

    ``on_measured`` is called with every measurement so far after each benchmark (the
    CLI writes them to the output file, so a suite stopped by a timeout or a hung kernel
    keeps what it measured). Raises ``HilsimError("no CUDA GPU/driver found: ...")``
    without a GPU, and a one-line error for an unknown family (checked before touching
    the GPU).
    """
    families = parse_only(only)
    if facts is None:
        facts = device_facts(device)
    cp = require_cupy()
    with cp.cuda.Device(device):
        gpu = CupyDevice(cp=cp, device=device, facts=facts, seed=seed)
        benches, skipped = without_skipped(family_benchmarks(gpu, families), skip,
                                           gpu.backend_params, quick=quick)
        with progress_bar("microbenchmarks", total=len(benches), enabled=progress) as advance:

            def after(results: list[Measurement]) -> None:
                cp.get_default_memory_pool().free_all_blocks()
                if on_measured is not None:
                    on_measured(list(results))
                advance()

            results = run_benchmarks(gpu, benches, _failed, after=after)
        cp.get_default_memory_pool().free_all_blocks()
    return results + skipped
