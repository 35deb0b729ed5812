"""The ``gpgpusim`` backend: the workload runs whole on a simulated card (GPGPU-Sim).

The simulator's log holds every launch and every counter, so the card is both the light
and the detailed level: :func:`hilsim.simmodel.gpgpusim.listrun.profile_on_card` runs
the program on ``--card`` (with ``-O -OPT=VALUE`` overrides) and writes the bundle from
its log (the ``gpgpusim-log`` reader);
no device probe, no Nsight Compute pass. Chosen only by name (``--backend gpgpusim``);
``--card`` or ``-O`` without it is an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hilsim.agent.backends.base import Backend, ProfileOptions
from hilsim.simmodel.gpgpusim.cards import parse_override
from hilsim.simmodel.gpgpusim.listrun import profile_on_card

from hilsim.core.errors import HilsimError

#: a full simulation's time limit when ``--timeout`` is not given
DEFAULT_TIMEOUT_S = 4 * 3600.0


def claims(opts: ProfileOptions) -> bool:
    """``--backend gpgpusim``, or one of its own options (``--card``, ``-O``) given."""
    return opts.backend == "gpgpusim" or opts.card is not None or bool(opts.sim_options)


def profile_on_simulated_card(opts: ProfileOptions) -> tuple[Path, dict[str, Any]]:
    """Run the workload on the card and write the bundle; returns (path, manifest)."""
    if opts.backend != "gpgpusim":
        raise HilsimError("--card / -O need --backend gpgpusim")
    if opts.card is None:
        raise HilsimError("--backend gpgpusim needs --card (see `hilsim gpgpusim cards`)")
    if opts.detailed_given():
        raise HilsimError("--backend gpgpusim records every counter of every launch: "
                          "drop the --detailed-* options")
    overrides = dict(parse_override(o) for o in opts.sim_options)
    return profile_on_card(
        list(opts.command), opts.card, opts.out,
        options=overrides,
        timeout_s=opts.timeout_s if opts.timeout_s else DEFAULT_TIMEOUT_S,
        keep_raw=opts.keep_raw, force=opts.force,
    )


def profile_summary(path: Path, manifest: dict[str, Any]) -> str:
    """The line ``hilsim agent profile`` prints: launches, simulated cycles, CPU time."""
    prof = manifest["profilers"][0]
    n_regions = prof.get("regions")
    return (
        f"wrote {path}: {manifest.get('n_launches')} launches on {prof['card']} (gpgpusim), "
        f"{prof['total_cycles']:,.0f} simulated cycles at {prof['clock_mhz']:g} MHz, "
        f"{prof['sim_cpu_s']:.1f} CPU s ({prof['sim_wall_s']:.1f} s wall)"
        + (f", {n_regions} regions" if n_regions else "")
    )


BACKEND = Backend(
    name="gpgpusim",
    profile=profile_on_simulated_card,
    claims=claims,
    summary=profile_summary,
)

__all__ = ["BACKEND", "DEFAULT_TIMEOUT_S", "claims", "profile_on_simulated_card", "profile_summary"]
