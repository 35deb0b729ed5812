"""Run the microbenchmark suite (Accel-Sim Section II-C: the microbenchmarks that feed
the configuration tuner; Section IV: the same suite run per GPU generation).

``run_suite(only=["latency", "bandwidth"])`` runs the chosen families in a fixed order
(``clock`` first so the others convert with the measured SM clock) behind one rich
progress bar and returns every :class:`~hilsim.core.measurement.Measurement`. A
benchmark that raises is recorded as an invalid measurement with the error's first
line, and the suite goes on. Aimed at < 2 minutes on an H100.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hilsim.microbench._gpu import Context, device_facts, require_cupy

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement

__all__ = ["FAMILIES", "device_facts", "parse_only", "run_suite"]

FAMILIES: tuple[str, ...] = ("clock", "launch", "latency", "bandwidth", "compute", "atomics")


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


def _benchmarks(families: list[str]) -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    from hilsim.microbench.sources import FAMILY_MODULES  # noqa: PLC0415

    return [b for family in families for b in FAMILY_MODULES[family].benchmarks()]


def run_suite(
    only: Sequence[str] | str | None = None,
    device: int = 0,
    progress: bool = True,
    facts: dict[str, Any] | None = None,
    seed: int = 0,
    on_measured: Callable[[list[Measurement]], None] | None = None,
) -> list[Measurement]:
    """Run the selected families on CUDA device ``device``; every measurement in order.

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
    benches = _benchmarks(families)
    results: list[Measurement] = []
    from hilsim.core.console import progress_bar  # noqa: PLC0415

    with cp.cuda.Device(device):
        ctx = Context(cp=cp, device=device, facts=facts, seed=seed)
        with progress_bar("microbenchmarks", total=len(benches), enabled=progress) as advance:
            for name, bench in benches:
                results.extend(_run_one(ctx, name, bench))
                if on_measured is not None:
                    on_measured(list(results))
                advance()
        cp.get_default_memory_pool().free_all_blocks()
    return results


def _run_one(
    ctx: Context, name: str, bench: Callable[[Any], list[Measurement]]
) -> list[Measurement]:
    try:
        out = bench(ctx)
    except Exception as exc:  # one broken benchmark must not lose the others' results
        line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        out = [
            Measurement(
                name=name,
                value=None,
                unit="",
                valid=False,
                note=f"failed: {type(exc).__name__}: {line}",
            )
        ]
    finally:
        ctx.cp.get_default_memory_pool().free_all_blocks()
    return out
