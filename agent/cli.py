"""``hilsim agent ...``: commands that run on a GPU host.

GPU libraries (cupy, pynvml, nvtx, cupti) are imported inside the commands only,
so this module imports on any machine.
"""

from __future__ import annotations

import click


@click.group("agent")
def agent() -> None:
    """Commands for the GPU host: device probe, microbenchmarks, two-level profiling.

    Install the GPU extra there: pip install 'hilsim[gpu]'.
    """
