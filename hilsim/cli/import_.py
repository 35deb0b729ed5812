"""``hilsim import PROFILE -o BUNDLE``: profiler output into a profile bundle (bundle v1).

See :func:`hilsim.analyzer.facade.import_bundle`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.cli.options import force_option, output_option
from hilsim.core.console import out, status, warn
from hilsim.formats import IMPORTABLE


@click.command("import")
@click.argument("profile", type=click.Path(path_type=Path))
@output_option("Bundle folder to write (written atomically).", required=True)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", *IMPORTABLE]),
    help="Input format (auto: sniffed from the file's first bytes).",
)
@click.option(
    "--ncu",
    "ncu_csv",
    type=click.Path(path_type=Path),
    help="Nsight Compute CSV (long or --page raw) with detailed metrics.",
)
@click.option(
    "--ncu-join",
    type=click.Choice(["order", "id"]),
    default="order",
    show_default=True,
    help="Match ncu rows to launches by launch order or by ncu ID = launch_id.",
)
@click.option(
    "--ncu-first-launch",
    type=int,
    default=0,
    show_default=True,
    help="launch_id of the first ncu row (ncu --launch-skip).",
)
@force_option("Replace OUTPUT if it exists.")
def import_cmd(
    profile: Path,
    output: Path,
    fmt: str,
    ncu_csv: Path | None,
    ncu_join: str,
    ncu_first_launch: int,
    force: bool,
) -> None:
    """Import profiler output into a profile bundle (bundle v1).

    PROFILE: one profile file: `nsys stats --format csv` output (cuda_gpu_trace or
    cuda_kern_exec_trace), an Nsight Systems SQLite export, a PyTorch-profiler
    (Kineto) trace (.json / .json.gz), or a wide table of per-kernel durations.
    With --ncu, Nsight Compute counters are joined to the launches. Writes
    OUTPUT/manifest.json, launches.parquet and, when present, metrics.parquet and
    regions.parquet.
    """
    # lazy: `hilsim import --help` (the --format choices come from the registry, which
    # imports nothing heavy) loads neither pandas nor the facade
    from hilsim.analyzer.facade import import_bundle

    with status(f"importing {profile}"):
        result = import_bundle(profile, output, fmt, ncu_csv, ncu_join, ncu_first_launch, force)
    for line in result.warnings:
        warn(line)
    out.print(f"wrote {result.path}: {result.n_launches} launches, {result.n_kernels} kernels, "
              f"{result.n_metrics} with metrics")
