"""``hilsim agent ...``: commands that run on a GPU host.

GPU libraries (cupy, pynvml, nvtx, cupti) are imported by :mod:`hilsim.agent` only when a
command uses them, so this module imports on any machine. ``hilsim agent microbench`` is
its own module, added to the group by :data:`hilsim.cli.main.LAZY_SUBCOMMANDS`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from hilsim.agent import ncu as ncu_mod
from hilsim.agent.backends import CHOICES
from hilsim.agent.backends.base import ProfileOptions
from hilsim.agent.probe import probe_device
from hilsim.agent.profile import profile_workload
from hilsim.cli.options import force_option, output_option
from hilsim.core.console import out
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic


class IncompleteRun(HilsimError):
    """The bundle was written but the workload did not finish: exit code 1."""

    exit_code = 1


@click.group("agent")
def agent() -> None:
    """Commands for the GPU host: device probe, microbenchmarks, two-level profiling.

    Install the GPU extra there by compute capability: 'hilsim[gpu-cuda12]' below 7.5
    (V100: CUDA 13 has no sm_70) or with a CUDA 12 driver, else 'hilsim[gpu-cuda13]'.
    """


@agent.command("probe")
@click.option("--device", "device_index", default=0, show_default=True, help="GPU index.")
@output_option("Where to save the facts (JSON).", file_only=True,
               default=Path("hilsim-probe.json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def probe(device_index: int, output: Path, as_json: bool) -> None:
    """Print and save the device facts and which profilers are usable.

    NVML (nvidia-ml-py) for what the driver knows, CUDA device properties (CuPy) for
    SM count, L2 size and the CUDA runtime.
    """
    facts = probe_device(device_index)
    text = json.dumps(facts, indent=2, default=str)
    write_text_atomic(output, text + "\n")
    if as_json:
        click.echo(text)
        return
    table = Table(title=f"GPU {device_index}")
    table.add_column("fact")
    table.add_column("value")
    for key, value in facts.items():
        if key != "tools":
            table.add_row(key, str(value))
    out.print(table)
    tools = Table(title="profilers")
    for column in ("tool", "usable", "version", "note"):
        tools.add_column(column)
    for name, tool in facts.get("tools", {}).items():
        note = tool.get("reason") or ""
        if name == "nsys" and tool.get("usable") and not tool.get("extra", {}).get("export"):
            note = "nsys export unavailable: " + tool.get("extra", {}).get("export_error", "")
        tools.add_row(name, "yes" if tool.get("usable") else "no", tool.get("version") or "",
                      note)
    out.print(tools)
    extra = facts.get("pip_extra")
    if extra:
        click.echo(
            f"pip extra for this GPU (compute capability {facts.get('compute_capability')}, "
            f"CUDA driver {facts.get('cuda_driver_version')}): pip install 'hilsim[{extra}]'"
        )
    click.echo(f"saved {output}", err=True)


@agent.command(
    "profile", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@output_option("Bundle folder to write.", required=True)
@click.option("--backend", type=click.Choice(CHOICES),
              default="auto", show_default=True,
              help="Light profiler (every launch); gpgpusim: run on a simulated card (--card).")
@click.option("--card", default=None,
              help="gpgpusim backend: shipped card name or a gpgpusim.config path.")
@click.option("-O", "--sim-option", "sim_options", multiple=True, metavar="-OPT=VALUE",
              help="gpgpusim backend: override a card option, e.g. -O -gpgpu_n_clusters=4.")
@click.option("--detailed-first", type=int, default=None, metavar="J",
              help="Nsight Compute counters for the first J launches.")
@click.option("--detailed-launches", default=None, metavar="PLAN|IDS",
              help="Counters for these launch ids: a plan JSON (samples) or '3,17,42'.")
@click.option("--detailed-all", is_flag=True, help="Counters for every launch (slow).")
@click.option("--metrics", default=None, metavar="A,B,...",
              help="ncu metrics (default: PKA Table 2 + cycles, DRAM, L1/L2, instruction mix).")
@click.option("--detailed-cache-control", type=click.Choice(ncu_mod.CACHE_CONTROLS),
              default=ncu_mod.DEFAULT_CACHE_CONTROL, show_default=True,
              help="ncu --cache-control: none keeps the caches the workload left (the warm "
                   "state PKA's features and the warm-state placement read); all flushes "
                   "them before every profiled launch (cold-cache counters).")
@click.option("--timeout", type=float, default=None, metavar="SECONDS",
              help="Stop the workload after this long (bundle kept, marked incomplete).")
@click.option("--detailed-timeout", type=float, default=None, metavar="SECONDS",
              help="Time limit of the ncu pass.")
@click.option("--measure-overhead", is_flag=True,
              help="Also run the workload without a profiler and record the wall-time ratio.")
@click.option("--nvtx-module", "nvtx_modules", multiple=True, metavar="MODULE:FUNCTION",
              help="Wrap this function in an NVTX range (Python workloads; repeatable).")
@click.option("--keep-raw", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the profilers' own files (reports, CSV, logs) in this folder.")
@click.option("--no-probe", is_flag=True,
              help="Do not query NVML/CUDA for device facts (use the profiler's records).")
@click.option("--device", "device_index", default=0, show_default=True, help="GPU to probe.")
@force_option("Replace an existing bundle.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def profile(
    output: Path,
    backend: str,
    card: str | None,
    sim_options: tuple[str, ...],
    detailed_first: int | None,
    detailed_launches: str | None,
    detailed_all: bool,
    metrics: str | None,
    detailed_cache_control: str,
    timeout: float | None,
    detailed_timeout: float | None,
    measure_overhead: bool,
    nvtx_modules: tuple[str, ...],
    keep_raw: Path | None,
    no_probe: bool,
    device_index: int,
    force: bool,
    command: tuple[str, ...],
) -> None:
    """Run CMD under a two-level profile and write a bundle:  -o OUT [options] -- CMD ARGS...

    Exit code 0: complete bundle; 1: bundle written but the workload failed, was
    interrupted or timed out (launches captured so far kept, manifest complete=false);
    2: nothing written (one-line error).
    """
    metric_list = (
        [m.strip() for m in metrics.split(",") if m.strip()]
        if metrics else list(ncu_mod.DEFAULT_METRICS)
    )
    opts = ProfileOptions(
        command=list(command), out=output, backend=backend, detailed_first=detailed_first,
        detailed_launches=detailed_launches, detailed_all=detailed_all, metrics=metric_list,
        timeout_s=timeout, detailed_timeout_s=detailed_timeout,
        measure_overhead=measure_overhead, nvtx_modules=list(nvtx_modules), force=force,
        keep_raw=keep_raw, probe=not no_probe, device_index=device_index, card=card,
        sim_options=list(sim_options), cache_control=detailed_cache_control,
    )
    result = profile_workload(opts)
    click.echo(result.summary(), err=True)
    if not result.complete:
        work = result.manifest["workload"]
        why = ("timed out" if work["timed_out"] else "interrupted" if work["interrupted"]
               else f"exit code {work['exit_code']}")
        raise IncompleteRun(
            f"the workload did not finish ({why}); {result.path} holds the launches captured "
            "so far and is marked incomplete"
        )


@agent.command("cupti-build")
@click.option("--force", is_flag=True, help="Compile again even when the cache holds it.")
def cupti_build(force: bool) -> None:
    """Build the CUPTI injection library (the cupti backend for any CUDA program).

    Compiled with gcc against this host's CUPTI (the nvidia-cuda-cupti wheel, a CUDA
    toolkit, or $HILSIM_CUPTI_ROOT) into $HILSIM_CACHE/cupti-inject; `agent profile
    --backend cupti` builds it on first use too. Prints the library's path.
    """
    from hilsim.agent.cupti_build import build_injection  # lazy: only this command compiles

    library = build_injection(force=force)
    state = "built" if library.built_now else "cached"
    click.echo(f"{state}: {library.install.describe()}", err=True)
    click.echo(str(library.path))
