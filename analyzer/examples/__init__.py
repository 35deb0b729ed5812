"""Real profiles shipped inside the package (provenance in README.md here)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class Example:
    """A shipped profile: ``profile`` file, optional ``ncu`` metrics, description."""

    name: str
    profile: str
    description: str
    ncu: str | None = None

    def path(self, filename: str) -> Path:
        return Path(str(resources.files("hilsim.analyzer.examples").joinpath(filename)))


EXAMPLES: tuple[Example, ...] = (
    Example(
        name="casio-durations",
        profile="casio-kernel-durations.csv",
        description="CASIO ML kernels, 85,217 launches timed by Nsight Systems (STEM Fig. 1)",
    ),
    Example(
        name="casio-nerf-a100",
        profile="casio-nerf-a100.nsys.sqlite",
        description="CASIO NeRF on an A100-PCIE-40GB, Nsight Systems SQLite export, "
        "1,106 launches with grid/block and NVTX",
    ),
)
