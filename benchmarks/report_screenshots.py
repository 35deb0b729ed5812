"""Screenshots of the validation report and of ``hilsim compare``'s pareto.png on the
shipped NeRF profile: what a reader sees first.

    python benchmarks/report_screenshots.py OUT_DIR [--chromium /usr/bin/chromium]

Writes OUT_DIR/report.html (+ .json), OUT_DIR/report-1400.png (headless Chromium,
1400 px wide), OUT_DIR/compare/ (compare.json, compare.csv, pareto.png) and prints the
compare table. No simulator output exists for this profile (it has no counters for the
analytical model and no Accel-Sim traces), so the report's "simulation" is a STAND-IN,
said so in the report itself: silicon cycles times a per-kernel factor (lognormal,
sigma 0.15, seed 0). It shows the report's layout on a real plan, not a simulator's
accuracy.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    from hilsim.analyzer import methods
    from hilsim.analyzer.examples import EXAMPLES
    from hilsim.analyzer.validate import SimResults, silicon_cycles, validate, write_report

    from hilsim.cli.main import main as hilsim
    from hilsim.formats.read import import_profile

    example = next(e for e in EXAMPLES if e.profile.endswith(".sqlite"))
    profile = example.path(example.profile)
    args.out.mkdir(parents=True, exist_ok=True)
    hilsim(["compare", str(profile), "--seeds", str(args.seeds), "-o", str(args.out / "compare")])

    bundle = import_profile(profile)
    bundle.path = Path(example.profile)
    clock = float(bundle.manifest["device"]["max_sm_clock_mhz"])
    silicon, _ = silicon_cycles(bundle, clock)
    codes = bundle.launches["name"].cat.codes.to_numpy()
    factor = np.random.default_rng(0).lognormal(0.0, 0.15, codes.max() + 1)
    sim = SimResults(
        silicon * factor[codes],
        source="STAND-IN simulator",
        detail="(silicon cycles x a per-kernel factor, lognormal sigma 0.15, seed 0: no "
        "simulator output exists for this profile; the numbers show the layout only)",
    )
    plans = [
        ("stem", methods.create("stem").plan(bundle).attach_names(bundle.launches["name"])),
        ("tbpoint", methods.create("tbpoint").plan(bundle).attach_names(bundle.launches["name"])),
    ]
    report, images = validate(bundle, plans, lambda plan: sim, clock)
    html_path, _ = write_report(report, images, args.out / "report")
    shot = args.out / "report-1400.png"
    subprocess.run(
        [args.chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--hide-scrollbars", f"--screenshot={shot}",
         "--window-size=1400,2400", html_path.as_uri()],
        check=True, timeout=180, capture_output=True,
    )
    print(f"wrote {html_path}, {shot}, {args.out / 'compare' / 'pareto.png'}")


if __name__ == "__main__":
    main()
