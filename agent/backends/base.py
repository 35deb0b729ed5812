"""What a profiler backend of ``hilsim agent profile`` is, and what every backend shares.

A :class:`Backend` is one module under :mod:`hilsim.agent.backends` declaring one
object: its name (the ``--backend`` choice), how to detect it on this host (a
:class:`~hilsim.agent.tools.Tool`), whether it needs a Python workload (the in-process
launchers), its place in ``auto``'s order, the texts of its errors, and either

* ``run``: the light level (PKA section 3.1: every launch, cheap), returning a
  :class:`LightResult`; :func:`hilsim.agent.profile.profile_workload` adds the device
  facts, the optional Nsight Compute detailed level and the manifest; or
* ``profile``: the whole bundle written by the backend itself (a simulated card is its
  own light and detailed level).

:class:`ProfileOptions` is everything ``hilsim agent profile`` was asked to do; the
helpers below (:func:`say`, :func:`workload_argv`, :func:`run_launcher`) are what the
light backends have in common.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.agent import ncu as ncu_mod
from hilsim.agent.runner import GRACE_S, RunResult, run_workload
from hilsim.agent.tools import Tool, python_target, require_python_target

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError


def say(message: str) -> None:
    """Progress line on stderr (stdout belongs to the workload)."""
    print(f"hilsim: {message}", file=sys.stderr, flush=True)


@dataclass
class ProfileOptions:
    """Everything ``hilsim agent profile`` was asked to do.

    ``detailed_first`` / ``detailed_launches`` / ``detailed_all`` are the Nsight Compute
    selection as given (at most one; :func:`hilsim.agent.ncu.selection` checks them);
    ``card`` and ``sim_options`` (``-OPT=VALUE``) belong to the ``gpgpusim`` backend.
    """

    command: list[str]
    out: Path
    backend: str = "auto"
    detailed_first: int | None = None
    detailed_launches: str | None = None
    detailed_all: bool = False
    metrics: list[str] = field(default_factory=lambda: list(ncu_mod.DEFAULT_METRICS))
    cache_control: str = ncu_mod.DEFAULT_CACHE_CONTROL
    timeout_s: float | None = None
    detailed_timeout_s: float | None = None
    measure_overhead: bool = False
    nvtx_modules: list[str] = field(default_factory=list)
    force: bool = False
    keep_raw: Path | None = None
    probe: bool = True
    device_index: int = 0
    grace_s: float = GRACE_S
    card: str | None = None
    sim_options: list[str] = field(default_factory=list)

    def detailed_given(self) -> bool:
        """Whether any ``--detailed-*`` option was given (a zero ``--detailed-first`` is
        none)."""
        return any(
            d not in (None, False)
            for d in (self.detailed_first, self.detailed_launches, self.detailed_all)
        )


@dataclass
class LightResult:
    """The light level of one run: the imported launches, how the run ended, and the
    backend's manifest entry (``profilers[0]``); ``recorded_complete`` is false when the
    recorder itself says the records stop early."""

    bundle: Bundle
    run: RunResult
    profiler: dict[str, Any]
    recorded_complete: bool = True


class ExportFailed(HilsimError):
    """The profiler ran but its report could not be read (``auto`` may fall back)."""


#: the light level: (options, this backend's tool, folder for raw files, environment)
LightRunner = Callable[[ProfileOptions, Tool, Path, dict[str, str]], LightResult]


def _usable(tool: Tool) -> bool:
    return tool.usable


def light_summary(path: Path, manifest: dict[str, Any]) -> str:
    """The line ``hilsim agent profile`` prints after a two-level profile."""
    light = manifest["profilers"][0]
    work = manifest["workload"]
    summary = (
        f"wrote {path}: {manifest.get('n_launches')} launches ({light.get('backend')}), "
        f"exit code {work['exit_code']}, {work['wall_s']:.2f} s"
    )
    for prof in manifest["profilers"][1:]:
        if "launches_with_metrics" in prof:
            summary += f", {prof['launches_with_metrics']} with ncu metrics"
    if "overhead" in manifest and manifest["overhead"].get("ratio") is not None:
        summary += f", overhead x{manifest['overhead']['ratio']:.2f}"
    return summary


@dataclass(frozen=True)
class Backend:
    """One profiler backend: one module of :mod:`hilsim.agent.backends` declares it.

    * ``detect``: whether it is usable here, without importing a GPU library.
    * ``needs_python``: only for Python workloads (``script.py ARGS``, ``python -m mod``);
      ``native_refusal``: when given, why this host's tool cannot run a native program
      (None: it can), for a backend whose reach depends on what was detected.
    * ``auto_rank``: place in ``--backend auto``'s order (lowest first); None: only when
      asked for by name.
    * ``auto_ready``: whether ``auto`` may pick it (default: the tool is usable);
      ``not_ready_note`` says why not when the tool gives no reason.
    * ``install_hint``: appended to ``--backend NAME: <reason>`` when it is not usable;
      ``install_name``: what to install, in ``auto``'s error when nothing is usable.
    * ``run`` (light level) or ``profile`` (the whole bundle; ``claims`` says whether the
      options ask for this backend, e.g. its own options given without ``--backend``).
    * ``summary``: the line the command prints about the written bundle.
    """

    name: str
    detect: Callable[[], Tool] | None = None
    needs_python: bool = False
    native_refusal: Callable[[Tool], str | None] | None = None
    auto_rank: int | None = None
    auto_ready: Callable[[Tool], bool] = _usable
    not_ready_note: str = "not usable here"
    install_hint: str | None = None
    install_name: str | None = None
    run: LightRunner | None = None
    profile: Callable[[ProfileOptions], tuple[Path, dict[str, Any]]] | None = None
    claims: Callable[[ProfileOptions], bool] | None = None
    summary: Callable[[Path, dict[str, Any]], str] = light_summary

    def python_only(self, tool: Tool) -> str | None:
        """Why this backend runs only Python workloads here, or None when it runs any."""
        if self.needs_python:
            return self.not_ready_note
        return self.native_refusal(tool) if self.native_refusal is not None else None

    def auto_skip_reason(self, tool: Tool, is_python: bool) -> str | None:
        """None when ``auto`` may use it for this workload, else why not."""
        if not self.auto_ready(tool):
            return tool.reason or self.not_ready_note
        if is_python:
            return None
        return self.python_only(tool)

    def check_requested(self, tool: Tool, command: list[str]) -> None:
        """One-line error when ``--backend NAME`` cannot run ``command`` here."""
        if not tool.usable:
            hint = f" ({self.install_hint})" if self.install_hint else ""
            raise HilsimError(f"--backend {self.name}: {tool.reason}{hint}")
        why = self.python_only(tool)
        if why is not None and python_target(command) is None:
            if self.needs_python:
                require_python_target(command, f"--backend {self.name}")
            raise HilsimError(
                f"--backend {self.name} needs a Python workload here ({why}); "
                f"got {' '.join(command[:3])!r}")


def nvtx_options(modules: list[str]) -> list[str]:
    """``--nvtx MODULE:FUNCTION`` for each module, as the launchers take them."""
    return [x for m in modules for x in ("--nvtx", m)]


def workload_argv(command: list[str], nvtx_modules: list[str]) -> list[str]:
    """The command itself, or run through ``hilsim.agent.launch`` with ``--nvtx-module``."""
    if not nvtx_modules:
        return list(command)
    target = require_python_target(command, "--nvtx-module")
    return target.launcher_argv("hilsim.agent.launch", nvtx_options(nvtx_modules))


def run_launcher(
    opts: ProfileOptions,
    env: dict[str, str],
    backend: str,
    module: str,
    output: Path,
    what: str,
) -> tuple[list[str], RunResult]:
    """Run the workload under an in-process launcher that must write ``output``."""
    target = require_python_target(opts.command, f"--backend {backend}")
    argv = target.launcher_argv(module, ["--out", str(output), *nvtx_options(opts.nvtx_modules)])
    say(f"light pass ({backend}): {' '.join(argv)}")
    run = run_workload(argv, opts.timeout_s, env=env, grace_s=opts.grace_s)
    if not output.is_file():
        raise HilsimError(
            f"the {what} launcher wrote no output (exit code {run.exit_code}"
            + (", timed out" if run.timed_out else "")
            + "): see the output above"
        )
    return argv, run


__all__ = [
    "Backend",
    "ExportFailed",
    "LightResult",
    "LightRunner",
    "ProfileOptions",
    "light_summary",
    "nvtx_options",
    "run_launcher",
    "say",
    "workload_argv",
]
