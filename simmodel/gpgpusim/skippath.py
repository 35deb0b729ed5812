"""The skip path: programs that take a launch list and make only those launches.

hilsim's own workloads (``workloads/README.md``) can skip launches themselves: they take
the list as ``--launches FILE`` (or where an argument holds ``{launches}``), make only the
listed launches and print ``hilsim-launch K`` before launch ``K`` so each kernel is placed
by its full-run id. Faster than fast-forward (nothing else is computed), and optional: any
program runs unmodified with fast-forward (:mod:`hilsim.simmodel.gpgpusim.fastforward`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

#: what replaces this in the program's arguments (else ``--launches FILE`` is appended)
LAUNCHES_PLACEHOLDER = "{launches}"
#: the launch list a run is given (one launch id a line)
LAUNCH_LIST = "launches.txt"
#: a launch of the skip path starts at its mark
SKIP_MARK = re.compile(r"^hilsim-launch +[0-9]+", re.M)


def launch_list_argv(command: Sequence[str], list_path: Path) -> list[str]:
    """The program's argv with the launch list: ``{launches}`` replaced, else appended."""
    argv = [str(a) for a in command]
    if any(LAUNCHES_PLACEHOLDER in a for a in argv):
        return [a.replace(LAUNCHES_PLACEHOLDER, str(list_path)) for a in argv]
    return [*argv, "--launches", str(list_path)]


def takes_launch_list(command: Sequence[str]) -> bool:
    """Whether an argument holds the ``{launches}`` placeholder."""
    return any(LAUNCHES_PLACEHOLDER in str(a) for a in command)
