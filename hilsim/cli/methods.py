"""``hilsim methods [NAME]``: the sampling methods and their parameters.

See :mod:`hilsim.analyzer.methods` (the registry) and
:func:`hilsim.analyzer.methods.describe.describe` (one method's paper, needs, parameters).
"""

from __future__ import annotations

import click
from rich.table import Table

from hilsim.analyzer import methods
from hilsim.analyzer.methods.describe import describe
from hilsim.core.console import out


@click.command("methods")
@click.argument("name", required=False)
def methods_cmd(name: str | None) -> None:
    """List the sampling methods, or show one method's parameters.

    NAME: a method (e.g. `hilsim methods stem`): its paper and section, what its
    profile must hold, and every parameter with its default and meaning.
    """
    if name is not None:
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
