"""Did a run compute what the reference run computed? The program's outputs, compared.

A fast-forwarded run (:mod:`hilsim.simmodel.gpgpusim.fastforward`) computes every launch,
most of them functionally; its data must be those of the full (all-performance) run. A
program whose result depends on timing (it reads ``%clock`` or ``%smid`` into its data,
races between blocks, sums floats with atomics in arrival order) computes other data when
launches change mode, and a sampled run of it measures another program. This module
collects what a run of a program produced and names the first place two runs differ:

* **copy digests** (``HILSIM_COPY_DIGESTS=1``, simulator patch 0002): the size and FNV-1a
  64 digest of every copy to the host, in order, each with the launches made before it.
  Exact, and independent of what the program prints: the first copy that differs bounds
  the launch where the data parted (after the last equal copy, up to this one);
* **result lines**: the program's own printed result, the log's lines that match a pattern
  the caller gives (the log interleaves them with the simulator's lines);
* **output files**: files the program writes into the run folder, by sha256.

The check compares the sequences whole: a run with a copy more or less, a line more or
less, or a file missing differs too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.build import sha256_file

from hilsim.core.errors import HilsimError

# host-thread lines, found anywhere in a line: the simulation thread may be half-way
# through a line of a kernel's statistics when the host prints them
_EVENTS = re.compile(
    r"GPGPU-Sim PTX: pushing kernel '([^']*)'"
    r"|GPGPU-Sim API: hilsim copy digest: (\S+) (\d+) bytes fnv1a64 ([0-9a-f]{16})$",
    re.M)


@dataclass(frozen=True)
class CopyDigest:
    """One copy to the host as the simulator printed it."""

    index: int  # 0-based among the run's copies to the host
    kind: str  # "device-to-host" or "from-symbol"
    nbytes: int
    digest: str  # FNV-1a 64, hex
    after_uid: int  # launches pushed before the copy printed (0: none)
    after_kernel: str  # the kernel of launch ``after_uid`` ("" when none)


@dataclass(frozen=True)
class ProgramOutputs:
    """What one run of a program produced (see the module docstring)."""

    digests: tuple[CopyDigest, ...]
    lines: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)  # name -> sha256 (None: missing)
    launches: int = 0
    #: False for a run stopped once it had what it was run for (a chunk of a parallel
    #: sampled simulation): its copies are compared as a prefix of the reference's
    complete: bool = True


def copy_digests(log_text: str) -> list[CopyDigest]:
    """The copy digests of a log, each with the launches pushed before it."""
    out: list[CopyDigest] = []
    launches, kernel = 0, ""
    for m in _EVENTS.finditer(log_text):
        if m.group(1) is not None:
            launches, kernel = launches + 1, m.group(1)
        else:
            out.append(CopyDigest(len(out), m.group(2), int(m.group(3)), m.group(4),
                                  launches, kernel))
    return out


def program_outputs(
    log_text: str,
    run_dir: str | os.PathLike[str] | None = None,
    *,
    line_pattern: str | re.Pattern[str] | None = None,
    files: Sequence[str] = (),
) -> ProgramOutputs:
    """Collect a run's outputs: copy digests, the log lines matching ``line_pattern``
    (``re.M`` search per line; ``None``: no lines), and the sha256 of ``files`` (names in
    ``run_dir``; a missing file is recorded as missing, not an error)."""
    lines: tuple[str, ...] = ()
    if line_pattern is not None:
        pattern = re.compile(line_pattern) if isinstance(line_pattern, str) else line_pattern
        lines = tuple(ln for ln in log_text.splitlines() if pattern.search(ln))
    hashed: dict[str, str] = {}
    for name in files:
        if run_dir is None:
            raise HilsimError(f"output file {name}: no run folder given")
        path = Path(run_dir) / name
        hashed[name] = sha256_file(path) if path.is_file() else "missing"
    pushes = sum(1 for m in _EVENTS.finditer(log_text) if m.group(1) is not None)
    return ProgramOutputs(tuple(copy_digests(log_text)), lines, hashed, pushes)


def before_launch(outputs: ProgramOutputs, uid: int) -> ProgramOutputs:
    """``outputs`` cut to what a run stopped after launch ``uid`` made for certain: the
    copies made before that launch was pushed, as a stopped run (compared as a prefix).
    The stop lands some time after the launch's statistics block, so copies made after it
    are in some logs and not in others; cut here, a run's verdict does not depend on how
    quickly it was stopped. ``launches`` stays what the run made."""
    kept = tuple(d for d in outputs.digests if d.after_uid < uid)
    return replace(outputs, digests=kept, complete=False)


def digests_record(digests: Sequence[CopyDigest]) -> list[list[Any]]:
    """Copy digests as a manifest keeps them: ``[kind, bytes, digest, after_uid, kernel]``."""
    return [[d.kind, d.nbytes, d.digest, d.after_uid, d.after_kernel] for d in digests]


def digests_from_record(rows: Any, where: str) -> tuple[CopyDigest, ...]:
    """The copy digests a manifest recorded (:func:`digests_record`); one-line error naming
    ``where`` on anything else."""
    try:
        return tuple(CopyDigest(i, str(kind), int(nbytes), str(digest), int(uid), str(kernel))
                     for i, (kind, nbytes, digest, uid, kernel) in enumerate(rows))
    except (TypeError, ValueError) as exc:
        raise HilsimError(f"{where}: copy_digests is not a list of [kind, bytes, digest, "
                          f"uid, kernel] rows ({exc})") from None


def _digest_divergence(ref: Sequence[CopyDigest], other: Sequence[CopyDigest],
                       labels: tuple[str, str]) -> str | None:
    for i, (a, b) in enumerate(zip(ref, other, strict=False)):
        if (a.kind, a.nbytes, a.digest) == (b.kind, b.nbytes, b.digest):
            continue
        first = ref[i - 1].after_uid + 1 if i else 1
        where = (f"launch uid {a.after_uid} ('{a.after_kernel}')" if first == a.after_uid
                 else f"launch uids {first}..{a.after_uid} (the last: '{a.after_kernel}')"
                 if a.after_uid >= first else "no launch (host data)")
        return (f"{labels[1]} differs from the {labels[0]} at copy to the host {i + 1} of "
                f"{len(ref)} ({a.kind}, {a.nbytes:,} bytes: {a.digest} vs {b.kind}, "
                f"{b.nbytes:,} bytes: {b.digest}); the copies before it agree, so the data "
                f"parted in {where}")
    if len(ref) != len(other):
        return (f"{labels[1]} made {len(other)} copies to the host, the {labels[0]} "
                f"{len(ref)} (the first {min(len(ref), len(other))} agree)")
    return None


def _line_divergence(ref: Sequence[str], other: Sequence[str],
                     labels: tuple[str, str]) -> str | None:
    for i, (a, b) in enumerate(zip(ref, other, strict=False)):
        if a != b:
            return (f"{labels[1]} differs from the {labels[0]} at result line {i + 1} of "
                    f"{len(ref)}: {b[:80]!r} vs {a[:80]!r}")
    if len(ref) != len(other):
        return (f"{labels[1]} printed {len(other)} result lines, the {labels[0]} {len(ref)}")
    return None


def find_divergences(reference: ProgramOutputs, other: ProgramOutputs,
                     labels: tuple[str, str] = ("full run", "fast-forwarded run")) -> list[str]:
    """Where ``other`` differs from ``reference``: one message per kind of output that
    differs (copies, result lines, each file), the first difference of each; empty when the
    two computed the same. A stopped run (``other.complete`` False) is compared on the
    copies it made: they must be the reference's first ones."""
    if not other.complete:  # a stopped run: its copies so far, nothing after them
        made = other.digests
        return [f for f in [_digest_divergence(reference.digests[:len(made)], made, labels)]
                if f]
    found = [_digest_divergence(reference.digests, other.digests, labels),
             _line_divergence(reference.lines, other.lines, labels)]
    if reference.launches != other.launches:
        found.append(f"{labels[1]} made {other.launches} launches, the {labels[0]} "
                     f"{reference.launches}")
    for name in sorted(set(reference.files) | set(other.files)):
        a, b = reference.files.get(name, "missing"), other.files.get(name, "missing")
        if a == b:
            continue
        if b == "missing":
            found.append(f"{labels[1]} did not write output file {name}")
        elif a == "missing":
            found.append(f"{labels[1]} wrote output file {name}, the {labels[0]} did not")
        else:
            found.append(f"{labels[1]} wrote output file {name} differently (sha256 "
                         f"{b[:12]}... vs {a[:12]}...)")
    return [f for f in found if f]


def check_same_outputs(reference: ProgramOutputs, other: ProgramOutputs,
                       labels: tuple[str, str] = ("full run", "fast-forwarded run")) -> None:
    """Raise :class:`HilsimError` naming the first divergence (all of them, ``; ``-joined)
    when ``other`` did not compute what ``reference`` computed; also when neither run has
    anything to compare (no digests, lines or files: the check would prove nothing)."""
    if not (reference.digests or reference.lines or reference.files):
        raise HilsimError(f"the {labels[0]} has no copy digests, result lines or output "
                          "files to compare (run with HILSIM_COPY_DIGESTS=1 on a simulator "
                          "with patch 0002, or name the result lines or files)")
    found = find_divergences(reference, other, labels)
    if found:
        raise HilsimError("; ".join(found))
