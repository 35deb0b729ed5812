"""The ``hilsim`` command line: the group, its global options, one-line errors and the table
of commands.

Every command lives in its own module of :mod:`hilsim.cli` and is imported only when it
runs (or is asked for its own --help): ``hilsim --help`` and ``--version`` list the commands
from :data:`LAZY_COMMANDS` and import neither pandas nor numpy. A command parses its
options, makes one library call that returns a result object, and prints it; no command
module imports another.

Errors caused by input or environment print one line (``hilsim: error: ...``) and
exit with code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
import warnings
from importlib import import_module

import click

import hilsim
from hilsim.core import limits
from hilsim.core.errors import HilsimError

#: every command: name -> (module, attribute, short help). The short help is what
#: ``hilsim --help`` prints without importing the module; tests/test_cli.py checks it
#: against the command's docstring.
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "agent": (
        "hilsim.cli.agent",
        "agent",
        "Commands for the GPU host: device probe, microbenchmarks, two-level profiling.",
    ),
    "compare": (
        "hilsim.cli.compare",
        "compare_cmd",
        "Compare every sampling method the profile's data allows (STEM Table 3 / Fig. 9).",
    ),
    "dse": (
        "hilsim.cli.dse",
        "dse_cmd",
        "Speedup of each hardware variation: full (all launches) vs sampled (the plan).",
    ),
    "evaluate": (
        "hilsim.cli.evaluate",
        "evaluate_cmd",
        "Score a plan (or a method over seeds) against the profiled truth.",
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
    "import": (
        "hilsim.cli.import_",
        "import_cmd",
        "Import profiler output into a profile bundle (bundle v1).",
    ),
    "methods": (
        "hilsim.cli.methods",
        "methods_cmd",
        "List the sampling methods, or show one method's parameters.",
    ),
    "pkp": (
        "hilsim.cli.pkp",
        "pkp_cmd",
        "Project the sampled launches of PLAN intra-kernel (PKA section 3.2).",
    ),
    "plan": (
        "hilsim.cli.plan",
        "plan_cmd",
        "Build a sampling plan for PROFILE (a bundle folder or a profile file).",
    ),
    "portability": (
        "hilsim.cli.portability",
        "portability_cmd",
        "Error, per-kernel-class changes and predicted speedup of an A-plan on B.",
    ),
    "quickstart": (
        "hilsim.cli.quickstart",
        "quickstart_cmd",
        "Run the main job on the real profiles shipped with hilsim.",
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

#: subcommands a group's own module does not define: group -> name -> (module, attribute),
#: added when the group is loaded
LAZY_SUBCOMMANDS: dict[str, dict[str, tuple[str, str]]] = {
    "agent": {"microbench": ("hilsim.cli.microbench", "microbench_cmd")},
}


def load_command(name: str) -> click.Command:
    """Import the command ``name`` of :data:`LAZY_COMMANDS` (with its
    :data:`LAZY_SUBCOMMANDS`); GPU imports inside it stay lazy."""
    module, attribute, _ = LAZY_COMMANDS[name]
    command: click.Command = getattr(import_module(module), attribute)
    if isinstance(command, click.Group):
        for sub, (sub_module, sub_attribute) in LAZY_SUBCOMMANDS.get(name, {}).items():
            if sub not in command.commands:
                command.add_command(getattr(import_module(sub_module), sub_attribute), sub)
    return command


class LazyGroup(click.Group):
    """A click group whose :data:`LAZY_COMMANDS` are imported on first use; the group's
    --help lists them from their stored short help without importing them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
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


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"hilsim {hilsim.__version__}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option(
    "--limit",
    "assignments",
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
def cli(debug: bool, assignments: tuple[str, ...]) -> None:
    """hilsim: profile real GPUs, sample kernel launches, validate sampled simulation.

    Analysis commands run anywhere (no GPU); `hilsim agent ...` runs on a GPU host.
    """
    for assignment in assignments:
        limits.set_limit(assignment)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one-line errors, exit code 2 for bad input."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    limits.reset()
    try:
        with warnings.catch_warnings():
            # numpy/pandas RuntimeWarnings (0/0, overflow in a reduction) are not the
            # user's business: results are checked where they matter
            warnings.simplefilter("ignore", RuntimeWarning)
            # a command's ctx.exit(code) comes back as the return value (no command
            # returns anything else)
            code = cli.main(args=args, prog_name="hilsim", standalone_mode=False)
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
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
