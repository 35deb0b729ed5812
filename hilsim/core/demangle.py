"""Readable kernel names: Itanium C++ names demangled by ``c++filt`` where it is installed."""

from __future__ import annotations

import shutil
import subprocess


def demangle(names: list[str]) -> tuple[list[str], bool]:
    """Demangle Itanium C++ names with ``c++filt`` if installed; ``(names, demangled?)``."""
    todo = [n for n in names if n.startswith("_Z")]
    tool = shutil.which("c++filt")
    if not todo or tool is None:
        return names, False
    try:
        done = subprocess.run(
            [tool],
            input="\n".join(todo) + "\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return names, False
    if len(done) != len(todo):
        return names, False
    table = dict(zip(todo, done, strict=True))
    return [table.get(n, n) for n in names], True


__all__ = ["demangle"]
