"""``hilsim gpgpusim ...``: build GPGPU-Sim, list its cards, run a program on one, check
the tuner against a simulated card (closed loop) and measure the simulator's option ->
latency map (calibrate).

See :mod:`hilsim.simmodel.gpgpusim` (``docs/gpgpusim.md``, ``docs/tuner.md``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from hilsim.core.errors import HilsimError
from hilsim.simmodel.gpgpusim.build import build_info, ensure_build, find_build
from hilsim.simmodel.gpgpusim.cards import card_config, parse_override, shipped_cards
from hilsim.simmodel.gpgpusim.run import run_program
from hilsim.simmodel.gpgpusim.toolchain import SCRIPT, find_toolchain
from hilsim.simmodel.tuner.calibrate import write_calibration
from hilsim.simmodel.tuner.calibration import FILE, UNIT_FILE
from hilsim.simmodel.tuner.closedloop import check_card, markdown_table


@click.group("gpgpusim")
def gpgpusim() -> None:
    """The simulated GPU: GPGPU-Sim built from source, runs of CUDA programs on its cards.

    Start with `hilsim gpgpusim setup` (checks the CUDA <= 11.x toolchain, builds into a
    cache keyed by commit + gcc + CUDA version; seconds when already built).
    """


@gpgpusim.command("setup")
@click.option("--source", type=click.Path(dir_okay=False, path_type=Path),
              help="GPGPU-Sim source tarball (its name ends in -<commit>.tar.gz).")
@click.option("--git", "git_url", help="Git URL to clone instead of a tarball (needs --commit).")
@click.option("--commit", help="The commit to build (from the tarball's name if not given).")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Cache folder [$HILSIM_GPGPUSIM_CACHE or ~/.cache/hilsim/gpgpusim].")
@click.option("--jobs", default=2, show_default=True, help="make -j.")
def setup_cmd(source: Path | None, git_url: str | None, commit: str | None,
              cache_dir: Path | None, jobs: int) -> None:
    """Check the toolchain and build GPGPU-Sim (idempotent)."""
    started = time.monotonic()
    tc = find_toolchain()
    # progress goes to stdout: on an error stderr holds the one error line only
    click.echo(f"toolchain: nvcc {tc.cuda_version} ({tc.nvcc}), gcc {tc.gcc_version}")
    build = ensure_build(source=source, git_url=git_url, commit=commit, cache_dir=cache_dir,
                         jobs=jobs, toolchain=tc, progress=click.echo)
    click.echo(f"GPGPU-Sim {build.key}: {build.lib_dir}/libcudart.so "
               f"(setup took {time.monotonic() - started:.1f} s)")


@gpgpusim.command("info")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Cache folder to look in.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def info_cmd(cache_dir: Path | None, as_json: bool) -> None:
    """The build found (and its key, provenance) and the toolchain."""
    info = build_info(cache_dir)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"cache:     {info['cache']}")
    t = info["toolchain"]
    click.echo("toolchain: " + (t["error"] if "error" in t else
                                f"nvcc {t['cuda']} ({t['nvcc']}), gcc {t['gcc']}"))
    build = info["build"]
    if build is None:
        click.echo("build:     none (run `hilsim gpgpusim setup`)")
    else:
        click.echo(f"build:     {build['key']}\nlib:       {build['lib_dir']}")
        if build["provenance"]:
            p = build["provenance"]
            click.echo(f"source:    {p.get('source')} (commit {p.get('commit')}, "
                       f"built {p.get('built_at')} in {p.get('build_seconds')} s)")


@gpgpusim.command("cards")
def cards_cmd() -> None:
    """List the shipped card configs of the build found."""
    build = find_build()
    if build is None:
        raise HilsimError("no GPGPU-Sim build found: run `hilsim gpgpusim setup`")
    for name in shipped_cards(build):
        try:
            c = card_config(name, build)
            l2_kib = c.facts()["l2_bytes"] >> 10
            desc = f"{c.sm_count:>3} SMs  {c.core_clock_mhz:g} MHz  L2 {l2_kib} KiB"
        except HilsimError as exc:
            desc = f"(unreadable: {exc})"
        click.echo(f"{name:<18} {desc}")


@gpgpusim.command("toolchain-script")
def toolchain_script_cmd() -> None:
    """Print the path of the Debian toolchain install script (run it with bash, as root)."""
    click.echo(str(SCRIPT))


@gpgpusim.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--card", required=True,
              help="Shipped card name (see `hilsim gpgpusim cards`) or a gpgpusim.config path.")
@click.option("-O", "--sim-option", "overrides", multiple=True, metavar="-OPT=VALUE",
              help="Override a card option, e.g. -O -gpgpu_n_clusters=1 (repeatable; the "
                   "same as `hilsim agent profile -O` and `hilsim simulate -O`).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Run folder [gpgpusim-runs/<card>-<time>].")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True,
              help="Seconds before the run is killed.")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(card: str, overrides: tuple[str, ...], run_dir: Path | None, timeout_s: float,
            program: tuple[str, ...]) -> None:
    """Run PROGRAM (compiled with nvcc <= 11.x, -cudart shared) on a simulated card.

    Put `--` before the program: hilsim gpgpusim run --card SM7_QV100 -- ./a.out 1024
    """
    opts = dict(parse_override(o) for o in overrides)
    if run_dir is None:
        stem = Path(card).parent.name if card.endswith(".config") else Path(card).name
        run_dir = Path("gpgpusim-runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    run = run_program(list(program), card, run_dir, options=opts, timeout_s=timeout_s)
    kernels = run.kernel_cycles()
    for name, cycles in kernels:
        click.echo(f"{cycles:>12,} cycles  {name}")
    total = sum(c for _, c in kernels)
    click.echo(f"{len(kernels)} kernels, {total:,} simulated cycles, {run.wall_s:.1f} s wall; "
               f"log {run.log_path}")


@gpgpusim.command("closed-loop")
@click.argument("pairs", nargs=-1, required=True,
                metavar="CONFIG MICROBENCH [CONFIG MICROBENCH ...]")
@click.pass_context
def closed_loop_cmd(ctx: click.Context, pairs: tuple[str, ...]) -> None:
    """Tune on a simulated card's microbenchmarks and compare with the card's own config.

    CONFIG: the card (shipped name or gpgpusim.config) the suite ran on; MICROBENCH: the
    microbench.json of `hilsim agent microbench --backend gpgpusim` on it. Prints one
    markdown table per pair (quantity, configured, tuned, tolerance, ok) in three parts:
    measured, read from the device (the config read back, not counted) and the preset's;
    exit code 1 when a measured quantity is outside its tolerance (docs/tuner.md).
    """
    if len(pairs) % 2:
        raise HilsimError("closed-loop: expected CONFIG MICROBENCH pairs")
    bad = 0
    for config, bench in zip(pairs[::2], pairs[1::2], strict=True):
        check = check_card(config, bench)
        bad += sum(not r.ok for r in check.rows if r.category == "measured")
        click.echo(f"\n### {check.heading}\n")
        click.echo(markdown_table(check.rows))
    if bad:
        ctx.exit(1)


@gpgpusim.command("calibrate")
@click.argument("card")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=f"The file to merge into [the shipped {FILE}, or {UNIT_FILE} with --units].")
@click.option("--units", is_flag=True,
              help="Calibrate the execution units (-ptx_opcode_latency_fp/dp/int) instead.")
def calibrate_cmd(card: str, output: Path | None, units: bool) -> None:
    """Measure GPGPU-Sim's option -> latency map on CARD and merge it into the file.

    Runs the latency chases at a calibration point and once per option raised (about ten
    simulator runs), stored under the card's compute capability; the tuner's `gpgpusim`
    convention reads the map (docs/tuner.md).
    """
    cc, path = write_calibration(card, output, units)
    click.echo(f"{card} (cc {cc}): wrote {path}")
