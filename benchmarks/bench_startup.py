"""Start-up time of the command line: ``hilsim --version``,
``hilsim --help`` and ``hilsim plan -m stem`` on a small bundle (the shipped NeRF
profile, 1,106 launches).

    python benchmarks/bench_startup.py [--tree DIR ...] [--runs 5]

Each command runs ``--runs`` times in a fresh interpreter; the median wall time and
the median CPU time (user + system of the child, less sensitive to a loaded machine)
are printed, plus the modules a command imported. ``--tree DIR`` times another checkout
of the repository (e.g. ``git worktree add /tmp/before <commit>``) by putting a
throw-away ``hilsim`` package that maps to DIR's folders first on ``PYTHONPATH`` (the
installed editable finder comes after ``PYTHONPATH``); without it, the installed
hilsim is timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FOLDERS = ("agent", "analyzer", "simmodel", "microbench")


def farm(tree: Path, where: Path) -> Path:
    """A ``hilsim`` package whose subpackages are DIR's folders (package-dir mapping) and
    DIR's own ``hilsim/`` subpackages (``core``, ``cli``)."""
    package = where / "hilsim"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text((tree / "hilsim" / "__init__.py").read_text())
    for folder in FOLDERS:
        (package / folder).symlink_to(tree / folder)
    for sub in (tree / "hilsim").iterdir():
        if sub.is_dir() and (sub / "__init__.py").is_file():
            (package / sub.name).symlink_to(sub)
    return where


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # cwd outside any checkout: `python -c` puts the cwd first on sys.path
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def bench(label: str, env: dict[str, str], runs: int, work: Path) -> None:
    from hilsim.analyzer.examples import EXAMPLES

    nerf = next(e for e in EXAMPLES if e.profile.endswith(".sqlite"))
    bundle = work / f"nerf-{label}.bundle"
    entry = "from hilsim.cli.main import main; import sys; sys.exit(main())"
    base = [sys.executable, "-c", entry]
    subprocess.run(
        [*base, "import", str(nerf.path(nerf.profile)), "-o", str(bundle)],
        env=env, check=True, capture_output=True, cwd=work,
    )
    commands = {
        "--version": ["--version"],
        "--help": ["--help"],
        "plan -m stem (1,106 launches)": ["plan", str(bundle), "-m", "stem", "-o",
                                          str(work / "plan.json")],
    }
    print(f"[{label}]")
    for name, args in commands.items():
        walls, cpus = zip(*(timed([*base, *args], env, work) for _ in range(runs)), strict=True)
        probe = (
            "import sys; from hilsim.cli.main import main; main(" + repr(args) + "); "
            "print(len(sys.modules), ' '.join(m for m in ('pandas', 'pyarrow', 'scipy', "
            "'sklearn', 'matplotlib', 'rich') if m in sys.modules))"
        )
        loaded = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=work
        ).stdout.strip().splitlines()
        print(
            f"  {name:32s} wall {statistics.median(walls):.3f} s  cpu "
            f"{statistics.median(cpus):.3f} s  modules: {loaded[-1] if loaded else '?'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tree", type=Path, action="append", default=[])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
              f"median of {args.runs} runs")
        bench("installed", dict(os.environ), args.runs, work)
        for i, tree in enumerate(args.tree):
            env = dict(os.environ, PYTHONPATH=str(farm(tree.resolve(), work / f"farm{i}")))
            bench(str(tree), env, args.runs, work)


if __name__ == "__main__":
    main()
