"""The ``hilsim`` command line: analysis commands plus the ``hilsim agent`` group.

Errors caused by input or environment print one line (``hilsim: error: ...``) and
exit with code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from hilsim.analyzer.importers import FORMATS
from hilsim.core.errors import HilsimError


def _parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise HilsimError(f"--param {pair!r}: expected KEY=VALUE")
        key, raw = pair.split("=", 1)
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        params[key.strip().replace("-", "_")] = value
    return params


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    import hilsim

    click.echo(f"hilsim {hilsim.__version__}")
    ctx.exit()


#: commands living in their own modules: (module, attribute, short help). They are imported
#: only when run (or asked for their own --help), so `hilsim --help` and `--version` stay
#: fast; tests/test_cli.py checks each short help against the command's docstring.
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "agent": (
        "hilsim.cli.agent",
        "agent",
        "Commands for the GPU host: device probe, microbenchmarks, two-level profiling.",
    ),
    "dse": (
        "hilsim.cli.dse",
        "dse_cmd",
        "Speedup of each hardware variation: full (all launches) vs sampled (the plan).",
    ),
    "export": (
        "hilsim.cli.export",
        "export_cmd",
        "Write PLAN's sampled launches as an Accel-Sim kernelslist and weights CSV.",
    ),
    "gpgpusim": (
        "hilsim.cli.gpgpusim",
        "gpgpusim",
        "The simulated GPU: GPGPU-Sim built from source, runs of CUDA programs on its cards.",
    ),
    "pkp": (
        "hilsim.cli.pkp",
        "pkp_cmd",
        "Project the sampled launches of PLAN intra-kernel (PKA section 3.2).",
    ),
    "portability": (
        "hilsim.cli.portability",
        "portability_cmd",
        "Error, per-kernel-class changes and predicted speedup of an A-plan on B.",
    ),
    "recommend": (
        "hilsim.cli.recommend",
        "recommend_cmd",
        "Choose the sampling method and parameters with the highest speedup whose error "
        "stays under --target-error (its --quantile over --seeds), and write its plan.",
    ),
    "simulate": (
        "hilsim.cli.simulate",
        "simulate_cmd",
        "Run only PLAN's launches of PROGRAM on a simulated card (sampled simulation).",
    ),
    "sweep": (
        "hilsim.cli.sweep",
        "sweep_cmd",
        "Run a sweep SPEC (TOML: workloads, methods with parameter grids, seeds) on Dask.",
    ),
    "tune": (
        "hilsim.cli.tune",
        "tune_cmd",
        "Build a timing config and Accel-Sim gpgpusim.config/trace.config.",
    ),
    "validate": (
        "hilsim.cli.validate",
        "validate_cmd",
        "Compare sampled simulation with silicon: one self-contained HTML + JSON.",
    ),
}


def _load_command(name: str) -> click.Command:
    """Import a command of :data:`LAZY_COMMANDS` (GPU imports inside it stay lazy)."""
    from importlib import import_module

    module, attribute, _ = LAZY_COMMANDS[name]
    command: click.Command = getattr(import_module(module), attribute)
    group = isinstance(command, click.Group)
    if name == "agent" and group and "microbench" not in command.commands:
        from hilsim.cli.microbench import microbench_cmd

        command.add_command(microbench_cmd)
    return command


class LazyGroup(click.Group):
    """A click group whose :data:`LAZY_COMMANDS` are imported on first use; the group's
    --help lists them from their stored short help without importing them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            self.add_command(_load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        for name in names:
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                stub = click.Command(name, help=LAZY_COMMANDS[name][2])
                rows.append((name, stub.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE",
    help="Raise a size guard on untrusted input (docs/limits.md), e.g. "
    "--limit max_decompression_ratio=1000.",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli(debug: bool, limits: tuple[str, ...]) -> None:
    """hilsim: profile real GPUs, sample kernel launches, validate sampled simulation.

    Analysis commands run anywhere (no GPU); `hilsim agent ...` runs on a GPU host.
    """
    from hilsim.core import limits as guards

    for assignment in limits:
        guards.set_limit(assignment)


@cli.command("import")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Bundle folder to write (written atomically).",
)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", *FORMATS]),
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
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
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
    from hilsim.analyzer.importers.profile import import_profile
    from hilsim.core.bundle import write_bundle
    from hilsim.core.console import out, status, warn

    if output.exists() and not force:
        raise HilsimError(f"{output}: already exists (use --force to replace it)")
    from hilsim.analyzer.importers.streaming import stream_profile

    with status(f"importing {profile}"):
        # large nsys CSV/SQLite files: chunk by chunk, straight to OUTPUT (issue 18 §2)
        streamed = stream_profile(profile, output, fmt, ncu_csv, overwrite=force)
        if streamed is None:
            bundle = import_profile(
                profile, fmt=fmt, ncu=ncu_csv, ncu_join=ncu_join, ncu_first_launch=ncu_first_launch
            )
    if streamed is not None:  # no --ncu on this path: no metrics
        path, manifest = streamed.path, streamed.manifest
        n_launches, n_kernels, n_metrics = streamed.n_launches, streamed.n_kernels, 0
    else:
        path, manifest = write_bundle(bundle, output, overwrite=force), bundle.manifest
        n_launches, n_kernels = bundle.n_launches, bundle.launches["name"].nunique()
        n_metrics = 0 if bundle.metrics is None else len(bundle.metrics)
    for line in manifest.get("warnings", []):
        warn(line)
    out.print(f"wrote {path}: {n_launches} launches, {n_kernels} kernels, "
              f"{n_metrics} with metrics")


@cli.command("methods")
@click.argument("name", required=False)
def methods_cmd(name: str | None) -> None:
    """List the sampling methods, or show one method's parameters.

    NAME: a method (e.g. `hilsim methods stem`): its paper and section, what its
    profile must hold, and every parameter with its default and meaning.
    """
    from rich.table import Table

    from hilsim.analyzer import methods
    from hilsim.core.console import out

    if name is not None:
        from hilsim.analyzer.methods.describe import describe

        info = describe(name)
        out.print(f"[bold]{name}[/bold]: {info.summary}", highlight=False)
        out.print(f"paper: {info.paper}", highlight=False)
        out.print(f"needs: {', '.join(info.needs)}; stochastic: {info.stochastic}")
        table = Table("parameter", "default", "meaning")
        for param in info.params:
            table.add_row(param.name, param.default, param.meaning)
        out.print(table)
        return
    table = Table("method", "needs", "parameters (defaults)")
    for method_name in methods.available():
        method = methods.create(method_name)
        params = ", ".join(f"{k}={v}" for k, v in method.params().items())
        table.add_row(method_name, ", ".join(method.needs), params)
    out.print(table)
    out.print("`hilsim methods NAME` shows one method's parameters and paper section.")


@cli.command("plan")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "-m", "--method", "method_name", required=True, help="Sampling method (see `hilsim methods`)."
)
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Method parameter, e.g. -p epsilon=0.01 -p seed=3.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Plan JSON to write (hilsim.plan/1).",
)
def plan_cmd(profile: Path, method_name: str, params: tuple[str, ...], output: Path) -> None:
    """Build a sampling plan for PROFILE (a bundle folder or a profile file).

    The plan lists the launches to simulate with their weights; the estimate of
    any per-launch quantity is sum(weight * value).
    """
    from hilsim.analyzer import methods
    from hilsim.analyzer.importers.profile import load_profile
    from hilsim.analyzer.tracecheck import bundle_warnings, method_warnings
    from hilsim.core.console import out, status, warn

    method = methods.create(method_name, **_parse_params(params))
    with status(f"reading {profile}"):
        # only the launch columns the method reads (a bundle's other columns stay on disk)
        bundle = load_profile(profile, columns=method.launch_columns)
    with status(f"planning with {method_name}"):
        plan = method.plan(bundle).attach_names(bundle.launches["name"])
    warnings = bundle_warnings(bundle) + method_warnings(bundle.launches, method_name)
    plan.diagnostics["trace_warnings"] = warnings
    for line in warnings:
        warn(line)
    plan.save(output)
    out.print(
        f"wrote {output}: {method_name}, {len(plan.clusters)} clusters, "
        f"{plan.n_samples} launches to simulate of {bundle.n_launches}"
    )
    for note in plan.notes:
        out.print(f"note: {note}")


@cli.command("evaluate")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--plan", "plan_path", type=click.Path(path_type=Path), help="Evaluate this plan JSON."
)
@click.option("-m", "--method", "method_name", help="Or plan with this method over seeds.")
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Method parameter (with --method).",
)
@click.option(
    "--seeds",
    default=20,
    show_default=True,
    help="Seeds 0..N-1 for stochastic methods (with --method).",
)
@click.option(
    "--on",
    "on_path",
    type=click.Path(path_type=Path),
    help="Score on another bundle of the same workload (another run or GPU).",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Result JSON to write.")
def evaluate_cmd(
    profile: Path,
    plan_path: Path | None,
    method_name: str | None,
    params: tuple[str, ...],
    seeds: int,
    on_path: Path | None,
    output: Path | None,
) -> None:
    """Score a plan (or a method over seeds) against the profiled truth.

    Error = |estimate - truth| / truth; speedup = total time / time of the distinct
    sampled launches; 95% interval from the stratified sampling variance; per-metric
    errors for every counter when metrics cover all launches.
    """
    from hilsim.analyzer import methods
    from hilsim.analyzer.evaluate import evaluate_method, score_plan
    from hilsim.analyzer.importers.profile import load_profile
    from hilsim.analyzer.report import print_summary, write_result
    from hilsim.core.console import progress_bar, status
    from hilsim.core.plan import load_plan

    if (plan_path is None) == (method_name is None):
        raise HilsimError("evaluate: give either --plan PLAN.json or --method NAME")
    method = methods.create(method_name, **_parse_params(params)) if method_name else None
    # scoring reads names and durations; planning what the method reads
    columns = () if method is None else method.launch_columns
    with status(f"reading {profile}"):
        bundle = load_profile(profile, columns=columns)
        target = load_profile(on_path, columns=columns) if on_path else bundle
    if plan_path is not None:
        plan = load_plan(plan_path)
        score = score_plan(plan, target)
        result = {"plan": str(plan_path), "method": plan.method, "score": score.to_dict()}
        print_summary([(plan.method, score, None)])
    else:
        assert method is not None and method_name is not None
        runs = seeds if method.stochastic else 1
        with progress_bar(f"{method_name} over {runs} seed(s)", runs) as advance:
            summary = evaluate_method(method, bundle, seeds, on=target, progress=advance)
        result = {"method": method_name, "summary": summary.to_dict()}
        print_summary([(method_name, summary.first_score, summary)])
    if output:
        write_result(output, result)


@cli.command("quickstart")
@click.option(
    "-o",
    "--output",
    default="hilsim-quickstart",
    show_default=True,
    type=click.Path(path_type=Path),
    help="Folder for bundles, plans and result.",
)
@click.option("--seeds", default=20, show_default=True, help="Seeds for stochastic methods.")
@click.option("--example", "example", type=click.Choice(["profiles", "simulated-v100"]),
              default="profiles", show_default=True,
              help="profiles: the shipped real profiles; simulated-v100: validate, pkp, "
                   "portability and dse on shipped GPGPU-Sim runs (docs/tutorial-new-card.md).")
def quickstart_cmd(output: Path, seeds: int, example: str) -> None:
    """Run the main job on the real profiles shipped with hilsim.

    Imports each example, builds STEM+ROOT and PKA plans (plus the random and
    first-n baselines), evaluates them over seeds, prints the summary table and
    writes OUTPUT/<example>/{bundle/, plan-*.json} and OUTPUT/result.json
    (files of an earlier quickstart run there are replaced).
    """
    if example == "simulated-v100":
        from hilsim.analyzer.simexample import run_simulated_example

        run_simulated_example(output)
        return
    from hilsim.analyzer.quickstart import run_quickstart

    run_quickstart(output, seeds=seeds)


@cli.command("compare")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--methods",
    "method_list",
    default="all",
    show_default=True,
    help="Comma-separated methods, or 'all' (every registered method).",
)
@click.option("--seeds", default=10, show_default=True, help="Seeds for stochastic methods.")
@click.option(
    "--holdout",
    type=click.Path(path_type=Path),
    help="Choose plans on PROFILE, score them on this other run of the workload.",
)
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="METHOD.KEY=VALUE",
    help="Method parameter, e.g. -p stem.epsilon=0.01.",
)
@click.option(
    "--budget-of",
    default="stem",
    show_default=True,
    help="Run random and first-n at this method's budget, seed by seed ('none': at "
    "their own defaults).",
)
@click.option(
    "--budget",
    type=click.Choice(["time", "launches"]),
    default="time",
    show_default=True,
    help="What the baselines match: the simulated time (same speedup) or the number of "
    "simulated launches.",
)
@click.option("--workers", type=int, default=None, help="Worker processes (default: CPUs).")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Folder for compare.json, compare.csv and pareto.png.",
)
def compare_cmd(
    profile: Path,
    method_list: str,
    seeds: int,
    holdout: Path | None,
    params: tuple[str, ...],
    budget_of: str,
    budget: str,
    workers: int | None,
    output: Path,
) -> None:
    """Compare every sampling method the profile's data allows (STEM Table 3 / Fig. 9).

    Methods whose inputs are missing (e.g. Nsight Compute metrics, NVTX regions)
    are listed as skipped with the reason; a method run on part of its inputs is
    labelled with what it had (e.g. "pka (1/12 metrics)") and its warnings are
    listed. The random and first-n baselines run at the budget of --budget-of
    (default stem): the same simulated time, seed by seed, so they are compared at
    the same speedup. Rows whose speedup is below 2x or that simulate half the
    launches or more are marked "no reduction" and kept off the Pareto front.
    """
    from hilsim.analyzer.compare import (
        compare_methods,
        input_digest,
        pareto_plot,
        workload_name,
    )
    from hilsim.analyzer.importers.profile import load_profile
    from hilsim.analyzer.report import print_comparison, write_comparison
    from hilsim.core.bundle import hilsim_version
    from hilsim.core.console import progress_bar, status

    per_method: dict[str, dict[str, Any]] = {}
    for key, value in _parse_params(params).items():
        if "." not in key:
            raise HilsimError(f"--param {key!r}: expected METHOD.KEY=VALUE")
        name, param = key.split(".", 1)
        per_method.setdefault(name, {})[param] = value
    with status(f"reading {profile}"):
        bundle = load_profile(profile)
        other = load_profile(holdout) if holdout else None
    names = [m.strip() for m in method_list.split(",") if m.strip()]
    reference = None if budget_of.lower() == "none" else budget_of
    with progress_bar("comparing methods", None) as advance:
        result = compare_methods(
            bundle, names, seeds, other, per_method, workers, advance, reference, budget
        )
    from hilsim.analyzer.tracecheck import bundle_warnings, method_warnings

    # the trace's warnings once; STEM's row also says how much time its CLT rule misses
    input_warnings = bundle_warnings(bundle) + method_warnings(bundle.launches, "any method")
    for summary in result["methods"]:
        if summary["name"] == "stem":
            summary["warnings"] = method_warnings(bundle.launches, "stem") + summary["warnings"]
    workload = workload_name(bundle, profile)
    device = (bundle.manifest.get("device") or {}).get("name")
    result = {
        "schema": "hilsim.compare/1",
        "hilsim_version": hilsim_version(),
        "workload": workload,
        "device": device,
        "n_launches": bundle.n_launches,
        "input": input_digest(profile) | {"sequence_digest": bundle.sequence_digest()},
        "holdout_input": input_digest(holdout) if holdout else None,
        "profile": str(profile),
        "holdout_profile": str(holdout) if holdout else None,
        "input_warnings": input_warnings,
    } | result
    print_comparison(result)
    write_comparison(output, result)
    if result["methods"]:
        title = (
            f"{workload}"
            + (f" on {device}" if device else "")
            + f": {bundle.n_launches:,} launches"
        ) + (f", scored on {holdout.name}" if holdout else "")
        pareto_plot(result["methods"], output / "pareto.png", title)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one-line errors, exit code 2 for bad input."""
    from hilsim.core import limits

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    limits.reset()
    try:
        with warnings.catch_warnings():
            # numpy/pandas RuntimeWarnings (0/0, overflow in a reduction) are not the
            # user's business: results are checked where they matter (issue 16 F9)
            warnings.simplefilter("ignore", RuntimeWarning)
            cli.main(args=args, prog_name="hilsim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("hilsim: aborted", err=True)
        return 130
    except HilsimError as exc:
        if debug:
            raise
        click.echo(f"hilsim: error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("hilsim: interrupted", err=True)
        return 130
    except OSError as exc:  # the environment (permissions, a full disk, /proc): one line
        if debug:
            raise
        where = exc.filename if exc.filename is not None else "hilsim"
        click.echo(f"hilsim: error: {where}: {exc.strerror or exc}", err=True)
        return 2
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            raise
        click.echo(
            f"hilsim: internal error: {type(exc).__name__}: {exc} (run with --debug for the "
            "traceback)",
            err=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
