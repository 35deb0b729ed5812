"""Size guards on untrusted input (stated in ``docs/limits.md``).

A small file must not cost unbounded time or memory: a gzip stream that inflates a
thousandfold, a number of a billion digits, JSON nested a million deep, a CSV followed by
gigabytes of zero bytes (a sparse hole), or a bundle of 5 MB that claims 400 million rows.
Each guard refuses in one line that names the limit and how to raise it: the global
option ``hilsim --limit NAME=VALUE ...`` or the environment variable ``HILSIM_<NAME>``
(upper case).
"""

from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass

from hilsim.core.errors import HilsimError


@dataclass(frozen=True)
class Limit:
    """One guard: its name, default and what it bounds."""

    name: str
    default: int
    what: str


LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit(
            "max_decompression_ratio",
            200,
            "decompressed bytes per compressed byte of a .gz input (real traces: 5-30)",
        ),
        Limit("max_number_digits", 100, "characters of one number in a text input"),
        Limit(
            "max_zero_run_bytes",
            1 << 20,
            "bytes of NUL (a sparse hole or zero fill) in one run inside a text input",
        ),
        Limit(
            "max_rows_per_byte",
            16,
            "rows a bundle table may hold per byte of its parquet file (real bundles: < 1)",
        ),
        Limit(
            "max_input_bytes",
            4 << 30,
            "bytes of one input file read whole (a spec, plan, config or simulator log; "
            "inflated, for a .gz)",
        ),
        Limit(
            "max_seeds",
            10_000,
            "seeds of one evaluate, compare, recommend or sweep (each seed is a plan)",
        ),
        Limit(
            "max_archive_members",
            50_000,
            "members of a source tarball (the GPGPU-Sim tree: 681)",
        ),
        Limit(
            "max_archive_bytes",
            1 << 30,
            "bytes a source tarball may extract to (the GPGPU-Sim tree: 12 MB)",
        ),
    )
}

_overrides: dict[str, int] = {}


def value(name: str) -> int:
    """The limit in force: ``--limit`` (this process), else ``HILSIM_<NAME>``, else default."""
    if name in _overrides:
        return _overrides[name]
    raw = os.environ.get(f"HILSIM_{name.upper()}")
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            raise HilsimError(f"HILSIM_{name.upper()}={raw!r}: expected an integer") from None
    return LIMITS[name].default


def set_limit(assignment: str) -> None:
    """Apply one ``NAME=VALUE`` from ``hilsim --limit``."""
    name, sep, raw = assignment.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in LIMITS:
        raise HilsimError(
            f"--limit {assignment!r}: expected NAME=VALUE with NAME one of {', '.join(LIMITS)}"
        )
    try:
        number = int(raw)
    except ValueError:
        raise HilsimError(f"--limit {assignment!r}: VALUE must be an integer") from None
    if number < 1:
        raise HilsimError(f"--limit {assignment!r}: VALUE must be at least 1")
    _overrides[name] = number


def reset() -> None:
    """Forget ``--limit`` overrides (each CLI invocation starts from the defaults)."""
    _overrides.clear()


def check_seeds(count: int, source: object = "--seeds") -> int:
    """``count`` if it is a number of seeds this run may use (1 to ``max_seeds``)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise HilsimError(f"{source}: expected a number of seeds >= 1, got {count!r}")
    if count > value("max_seeds"):
        raise exceeded(source, "max_seeds", f"{count} seeds")
    return count


def exceeded(source: object, name: str, detail: str) -> HilsimError:
    """The one-line refusal: what was seen, the limit, and how to raise it."""
    return HilsimError(
        f"{source}: {detail}: over the limit {name}={value(name)} "
        f"(raise it with `hilsim --limit {name}=N ...` or HILSIM_{name.upper()})"
    )


#: bytes a command holds per launch of a bundle it reads: the columns it converts plus the
#: method's temporaries (measured on the densest bundle, ``benchmarks/bench_dense_bundle.py``:
#: 65-148 bytes per launch; ``docs/limits.md``)
BYTES_PER_LAUNCH = 150


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def memory_available() -> int | None:
    """Bytes this process may still allocate: the least of the system's ``MemAvailable``,
    the cgroup's ``memory.max - memory.current`` and the address-space limit
    (``RLIMIT_AS``) less what is mapped now; ``None`` where none of them can be read."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    cap, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if cap is not None and used is not None:
        found.append(cap - used)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm", encoding="ascii") as handle:
                mapped = int(handle.read().split()[0]) * resource.getpagesize()
        except (OSError, ValueError, IndexError):
            mapped = 0
        found.append(soft - mapped)
    return max(min(found), 0) if found else None


def check_launch_memory(source: object, launches: int) -> None:
    """Refuse, in one line and before any row is read, a table of more launches than the
    memory this process may still allocate holds at :data:`BYTES_PER_LAUNCH` each (a
    small, densely encoded bundle would otherwise be killed mid-command)."""
    free = memory_available()
    need = launches * BYTES_PER_LAUNCH
    if free is not None and need > free:
        raise HilsimError(
            f"{source}: {launches} launches need about {need / 2**30:.1f} GiB "
            f"({BYTES_PER_LAUNCH} bytes each) but this process may allocate "
            f"{free / 2**30:.1f} GiB (free memory, cgroup and ulimit -v): run it on a larger "
            "machine or on part of the profile"
        )


#: JSON nesting is bounded by Python's recursion limit (about 1,000 levels; real traces,
#: plans and manifests nest fewer than 10): fixed, not raisable
JSON_DEPTH = "about 1000 levels (Python's recursion limit)"


def too_deep(source: object) -> HilsimError:
    """The refusal of JSON nested beyond :data:`JSON_DEPTH`."""
    return HilsimError(f"{source}: JSON nested too deeply (limit: {JSON_DEPTH}; fixed)")


class Inflation:
    """Guard of a decompressed stream: refuses more than ``max_decompression_ratio``
    bytes out per compressed byte in (after a 1 MiB allowance, so small files pass)."""

    def __init__(self, source: object, compressed_bytes: int) -> None:
        self.source = source
        self.compressed = max(compressed_bytes, 1)
        self.cap = value("max_decompression_ratio") * self.compressed + (1 << 20)

    def check(self, total: int) -> None:
        if total > self.cap:
            raise exceeded(
                self.source,
                "max_decompression_ratio",
                f"inflates past {total} bytes from {self.compressed} compressed "
                f"(ratio > {total // self.compressed})",
            )


class DigitRuns:
    """Guard of a text stream fed block by block: refuses a number (a run of digits)
    longer than ``max_number_digits``, including one split across blocks."""

    def __init__(self, source: object) -> None:
        self.source = source
        self.limit = value("max_number_digits")
        self.pattern = re.compile(rb"[0-9]{%d}" % (self.limit + 1))
        self.carry = 0  # digits at the end of the previous block

    def feed(self, block: bytes) -> None:
        if not block:
            return
        lead = len(block) - len(block.lstrip(b"0123456789"))
        if self.carry + lead > self.limit or self.pattern.search(block):
            raise exceeded(self.source, "max_number_digits", "a number of more digits")
        if lead == len(block):
            self.carry += lead
        else:
            self.carry = len(block) - len(block.rstrip(b"0123456789"))


def check_sparse(path: os.PathLike[str] | str) -> None:
    """Refuse a file whose size exceeds its allocated blocks by more than
    ``max_zero_run_bytes``: a sparse hole reads as that many zero bytes."""
    try:
        stat = os.stat(path)
    except OSError:
        return
    allocated = getattr(stat, "st_blocks", None)
    if allocated is None:
        return
    hole = stat.st_size - allocated * 512
    if hole > value("max_zero_run_bytes"):
        raise exceeded(path, "max_zero_run_bytes", f"a sparse file with {hole} bytes of holes")
