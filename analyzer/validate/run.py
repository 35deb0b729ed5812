"""One validation run, as ``hilsim validate`` makes it: a silicon bundle, its plans and
one source of simulated cycles, to the report (``OUT.html``, ``OUT.json``) and, with the
logs of a full simulation, the configuration vs sampling decomposition (``OUT.md``,
PKA Table 4; :mod:`~hilsim.analyzer.validate.decompose`).

The simulated cycles come from exactly one of: the folder ``hilsim simulate -o`` wrote (one
plan; warm-up and state placement included), GPGPU-Sim/Accel-Sim logs (of the samples of
one plan, or of every launch for several plans), or the analytical timing model over every
launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.analyzer.validate.decompose import attach_decomposition, check_full_log
from hilsim.analyzer.validate.numbers import (
    SimResults,
    memo_by_plan,
    results_from_model,
    results_from_placement,
    results_from_simlog,
    sm_clock_mhz,
)
from hilsim.analyzer.validate.report import validate, write_report
from hilsim.analyzer.validate.text import signed
from hilsim.simmodel.config import TimingConfig, read_timing
from hilsim.simmodel.gpgpusim.simlog import read_simlogs

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.jsonfile import read_json
from hilsim.core.plan import Plan, load_plan
from hilsim.formats.read import load_profile

#: the simulated results of a plan
SimFor = Callable[[Plan], SimResults]


@dataclass
class ValidationRun:
    """What a validation wrote: the report (the ``OUT.json`` document) and its files."""

    report: dict[str, Any]
    html_path: Path
    json_path: Path
    markdown_path: Path | None = None

    def lines(self) -> list[str]:
        """What ``hilsim validate`` prints: the files written, and per plan its total error,
        speedups, interval and (with a full simulation) the error decomposition."""
        lines = [] if self.markdown_path is None else [f"wrote {self.markdown_path}"]
        for r in self.report["plans"]:
            h = r["headline"]
            line = (f"{r['label']}: total error {signed(h['total_error'])}, profiled-time "
                    f"speedup {h['speedup']:.1f}x")
            if h.get("simulated_time_speedup"):
                line += f", simulated-time speedup {h['simulated_time_speedup']:.1f}x"
            if h.get("interval_cycles"):
                lo, hi = h["interval_cycles"]
                line += (f"; 95% interval [{lo:,.0f}, {hi:,.0f}] "
                         + ("contains" if h["interval_covers_silicon"] else "misses")
                         + f" silicon {h['silicon_total_cycles']:,.0f}")
            lines.append(line)
            if "decomposition" in r:
                t = r["decomposition"]["totals"]
                lines.append(f"{r['label']}: configuration {signed(t['configuration_error'])}, "
                             f"sampling {signed(t['sampling_error'])}, "
                             f"total {signed(t['total_error'])}")
        lines.append(f"wrote {self.html_path} and {self.json_path}")
        return lines


def validate_run(
    silicon: Path,
    plans: Sequence[Path],
    output: Path,
    *,
    sim: Sequence[Path] = (),
    sim_full: Sequence[Path] = (),
    model: Path | None = None,
    counters: str = "cumulative",
    clock_mhz: float | None = None,
) -> ValidationRun:
    """Validate the ``plans`` (made on the ``silicon`` bundle) against the simulated cycles
    of ``sim`` (a ``hilsim simulate`` folder or logs) or of the timing ``model``; with
    ``sim_full`` (logs of every launch on the ``sim`` card) also the configuration vs
    sampling decomposition. Writes ``output`` ``.html``/``.json`` (and ``.md``)."""
    if bool(sim) == bool(model):
        raise HilsimError("validate: give exactly one of --sim LOGS or --model CONFIG")
    if sim_full and not sim:
        raise HilsimError("validate: --sim-full needs --sim (the sampled logs on that card)")
    bundle = load_profile(silicon)
    loaded = [(p.stem, load_plan(p)) for p in plans]
    timing = read_timing(model) if model is not None else None
    sim_for = memo_by_plan(_sim_source(bundle, loaded, plans, sim, timing, counters))
    clock = sm_clock_mhz(bundle, clock_mhz, timing)
    if sim_full:  # read (and checked: every launch) before the report's plots
        full_log = check_full_log(read_simlogs(list(sim_full), counters), bundle)
    report, images = validate(bundle, loaded, sim_for, clock)
    md_path = None
    if sim_full:
        markdown = attach_decomposition(report, bundle, loaded, sim_for, full_log, clock)
        base = output.with_suffix("") if output.suffix in (".html", ".json") else output
        md_path = write_text_atomic(base.with_suffix(".md"), markdown)
    html_path, json_path = write_report(report, images, output)
    return ValidationRun(report, html_path, json_path, md_path)


def _sim_source(
    bundle: Bundle,
    loaded: list[tuple[str, Plan]],
    plans: Sequence[Path],
    sim: Sequence[Path],
    timing: TimingConfig | None,
    counters: str,
) -> SimFor:
    """The simulated results of each plan: the model's of every launch, a ``hilsim
    simulate`` folder's of its one plan (checked to be that plan's launches), or the
    logs'."""
    if timing is not None:
        shared = results_from_model(bundle, timing)
        return lambda plan: shared  # the model covers every launch
    placed = _simulate_folder(sim)
    if placed is not None:
        table, summary, where = placed
        if len(loaded) > 1:
            raise HilsimError(f"validate: {where} is the simulation of one plan; give that "
                              "plan only")
        shared_placed = results_from_placement(bundle, table, summary, str(where))
        ids = set(table["launch_id"].astype(int))
        if set(loaded[0][1].samples["launch_id"].astype(int)) != ids:
            raise HilsimError(f"validate: {where} simulated other launches than "
                              f"{plans[0]}: give the plan it was simulated for")
        return lambda plan: shared_placed  # one plan, checked above
    simlog = read_simlogs(list(sim), counters)
    if len(loaded) > 1 and len(simlog) != bundle.n_launches:
        raise HilsimError(
            "validate: several plans need logs of a full simulation (every launch); "
            f"the logs hold {len(simlog)} kernels for {bundle.n_launches} launches"
        )
    return lambda plan: results_from_simlog(plan, bundle, simlog)


def _simulate_folder(paths: Sequence[Path]) -> tuple[Any, dict, Path] | None:
    """(samples table, summary, folder) when ``paths`` is one ``hilsim simulate`` folder."""
    if len(paths) != 1 or not paths[0].is_dir():
        return None
    # lazy: the sampled-simulation module loads the simulator driver with it (0.2 s), which
    # only a `hilsim simulate` folder needs; importing this package stays without it
    from hilsim.analyzer.simulate import SUMMARY_JSON, read_placement

    table = read_placement(paths[0])
    if table is None:
        return None
    summary_path = paths[0] / SUMMARY_JSON
    summary = read_json(summary_path) if summary_path.exists() else {}
    return table, summary, paths[0]
