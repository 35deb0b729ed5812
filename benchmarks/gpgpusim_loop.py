"""The whole loop on the simulated card, timed, and the shipped example regenerated.

    python benchmarks/gpgpusim_loop.py --out runs/loop [--steps 36] [--reuse] [--jobs 2]
        [--ship analyzer/examples/simulated-v100] [--from-example analyzer/examples/simulated-v100]

The reference card (``SM7_QV100`` reduced to 4 SMs, ``REDUCED_QV100``) plays the silicon;
the tuned card is what ``hilsim tune --convention gpgpusim`` writes from the QV100
microbenchmarks (``tests/data/microbench/gpgpusim/SM7_QV100.microbench.json``), reduced the
same way; ``SM86_RTX3070`` (reduced the same way) is the second card for portability.
Steps, each printed with its wall time (simulator runs also with their CPU time):

1. compile ``transformer_step.cu``; ``hilsim tune`` -> ``tuned/``;
2. full runs (``hilsim agent profile --backend gpgpusim``) on the reference, tuned and
   RTX 3070 cards -> ``{reference,tuned,rtx3070}.bundle`` + ``*-raw/sim.log``
   (``--jobs 2`` runs two at once);
3. per method (stem, pka): ``hilsim plan`` on the reference bundle; ``hilsim simulate`` of
   the plan on the tuned and on the reference card (``--warmup auto --profile`` the
   reference bundle: the samples' state warmed and bracketed; visualizer samples on, for
   pkp);
4. ``hilsim validate --sim-full`` per method and card (configuration vs sampling error);
5. ``hilsim pkp --gpgpusim-log`` on the STEM samples (tuned card); ``hilsim compare`` on
   the reference bundle; ``hilsim portability`` QV100 -> RTX 3070; ``hilsim dse``;
6. ``--ship DIR``: the example's files into DIR (logs gzip-compressed, ``provenance.json``);
   then ``hilsim quickstart --example simulated-v100`` is timed when DIR is the package's.

``--reuse`` skips every step whose output exists (its recorded time is printed, marked
"reused"). ``--from-example DIR`` first fills ``OUT`` with a shipped example's full runs
(bundles, slimmed full logs, plans, tuned config, step times) and implies ``--reuse``:
only the sampled simulations and the steps after them run again. Figures go to stdout and
``OUT/loop.json``. Needs a GPGPU-Sim build and nvcc <= 11.x. One full run costs about 7.5
CPU-minutes (453 CPU-s measured on the reference card; every step's time:
``docs/tutorial-new-card.md``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MICROBENCH = REPO / "tests/data/microbench/gpgpusim/SM7_QV100.microbench.json"
METHODS = ("stem", "pka")
SAMPLED_CARDS = ("tuned", "reference")
VISUALIZER = ("-O", "-visualizer_enabled=1", "-O", "-gpgpu_runtime_stat=500")
DSE_VARY = ("sm_count=x2", "l2_size=x2", "l1_latency=x0.5", "dram_latency=x0.5")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hilsim.cli.main", *args]


class Steps:
    """Runs and times steps; ``--reuse`` skips those whose output exists."""

    def __init__(self, out: Path, reuse: bool) -> None:
        self.out, self.reuse = out, reuse
        self.path = out / "steps.json"
        self.times: dict[str, dict[str, float | bool]] = (
            json.loads(self.path.read_text()) if reuse and self.path.exists() else {})

    def _record(self, name: str, wall: float, cpu: float, reused: bool = False) -> None:
        old = self.times.get(name, {})
        if reused and old:
            print(f"[{name}] reused (recorded {old.get('wall_s')} s wall, "
                  f"{old.get('cpu_s')} CPU s)", flush=True)
            return
        self.times[name] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
        self.path.write_text(json.dumps(self.times, indent=1) + "\n")
        print(f"[{name}] {wall:.1f} s wall, {cpu:.1f} CPU s" + (" (reused)" if reused else ""),
              flush=True)

    def run(self, name: str, args: list[str], done: Path | None = None) -> str:
        """Run one command (one-line exit on failure); skipped when ``done`` exists."""
        if self.reuse and done is not None and done.exists():
            self._record(name, 0.0, 0.0, reused=True)
            return ""
        started, cpu = time.monotonic(), _cpu()
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        text = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            sys.exit(f"[{name}] failed: {text.splitlines()[-1] if text else proc.returncode}")
        self._record(name, time.monotonic() - started, _cpu() - cpu)
        print(text, flush=True)
        return text

    def parallel(self, jobs: list[tuple[str, list[str], Path]], width: int) -> None:
        """Run independent commands, ``width`` at a time (each timed on its own)."""
        todo = [j for j in jobs if not (self.reuse and j[2].exists())]
        for name in {j[0] for j in jobs} - {j[0] for j in todo}:
            self._record(name, 0.0, 0.0, reused=True)
        running: list[tuple[str, subprocess.Popen, float, Path]] = []
        while todo or running:
            while todo and len(running) < max(width, 1):
                name, args, _ = todo.pop(0)
                log = self.out / f"{name}.out"
                handle = log.open("w")
                running.append((name, subprocess.Popen(args, stdout=handle, stderr=handle),
                                time.monotonic(), log))
            time.sleep(2)
            for item in list(running):
                name, proc, started, log = item
                if proc.poll() is None:
                    continue
                running.remove(item)
                text = log.read_text().strip()
                if proc.returncode != 0:
                    sys.exit(f"[{name}] failed: {text.splitlines()[-1] if text else ''}")
                cpu = _sim_cpu(self.out / f"{name.split(':')[1]}.bundle")
                self._record(name, time.monotonic() - started, cpu)
                print(text, flush=True)


def _sim_cpu(bundle: Path) -> float:
    manifest = json.loads((bundle / "manifest.json").read_text())
    return float(manifest["workload"].get("cpu_s") or 0.0)


def reduced_timing(src: Path, dst: Path) -> None:
    """The tuned timing config on the reduced card: 4 SMs, (almost) no launch latency.

    ``hilsim tune`` describes the 80-SM QV100 the microbenchmarks ran on; the simulations
    run it with ``-gpgpu_n_clusters 4 -gpgpu_kernel_launch_latency 0`` (REDUCED_QV100), so
    the model for ``hilsim dse`` gets the same two changes (1 cycle: the config's minimum).
    """
    d = json.loads(src.read_text())
    d["name"] = f"{d['name']} reduced to 4 SMs"
    d["core"]["sm_count"] = {"value": 4, "unit": "SMs", "source": {
        "kind": "derived", "detail": "reduced card: -gpgpu_n_clusters 4"}}
    d["core"]["launch_latency_cycles"] = {"value": 1.0, "unit": "cycles", "source": {
        "kind": "derived", "detail": "reduced card: -gpgpu_kernel_launch_latency 0"}}
    dst.write_text(json.dumps(d, indent=1) + "\n")


def _gzip(src: Path, dst: Path, slim=None) -> None:
    """``src`` gzip-compressed into ``dst`` (``slim``: keep only the lines hilsim reads)."""
    from hilsim.simmodel.gpgpusim.simlog import read_log_text, slim_log

    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    text = (slim or slim_log)(read_log_text(src))
    with gzip.GzipFile(tmp, "wb", compresslevel=9, mtime=0) as fout:
        fout.write(text.encode("utf-8"))
    tmp.replace(dst)


def from_example(example: Path, out: Path) -> None:
    """Seed ``out`` with a shipped example's full runs, as the loop leaves them."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("reference", "rtx3070"):
        if not (out / f"{name}.bundle").exists():
            shutil.copytree(example / f"{name}.bundle", out / f"{name}.bundle")
    (out / "tuned").mkdir(exist_ok=True)
    shutil.copyfile(example / "tuned-gpgpusim.config", out / "tuned" / "gpgpusim.config")
    for card in ("reference", "tuned"):
        raw = out / f"{card}-raw"
        raw.mkdir(exist_ok=True)
        # gzip-compressed slim log under the loop's name (the readers sniff the gzip magic)
        shutil.copyfile(example / "logs" / f"{card}-full.sim.log.gz", raw / "sim.log")
    if not (out / "tuned.bundle").exists():
        subprocess.run(_cmd("import", str(out / "tuned-raw" / "sim.log"), "-o",
                            str(out / "tuned.bundle")), check=True, capture_output=True)
    for m in METHODS:
        shutil.copyfile(example / "plans" / f"{m}.json", out / f"{m}.json")
    shutil.copyfile(example / "tuned-timing.json", out / "tuned-timing-4sm.json")
    provenance = json.loads((example / "provenance.json").read_text())
    times = {k: v for k, v in provenance.get("steps_wall", {}).items()
             if k.startswith(("compile", "tune", "full:", "plan:"))}
    (out / "steps.json").write_text(json.dumps(times, indent=1) + "\n")


def ship(out: Path, dest: Path, figures: dict) -> None:
    """Copy the example's files into ``dest`` (see ``analyzer/simexample.py``)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, src in (("reference", "reference"), ("rtx3070", "rtx3070")):
        target = dest / f"{name}.bundle"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(out / f"{src}.bundle", target)
    shutil.copyfile(out / "tuned-timing-4sm.json", dest / "tuned-timing.json")
    shutil.copyfile(out / "tuned" / "gpgpusim.config", dest / "tuned-gpgpusim.config")
    (dest / "plans").mkdir(exist_ok=True)
    for m in METHODS:
        shutil.copyfile(out / f"{m}.json", dest / "plans" / f"{m}.json")
        for card in SAMPLED_CARDS:
            sim, folder = out / f"{m}-{card}-sim", dest / "sims" / f"{m}-{card}"
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            for log in ("sampled.log", "cold.log"):
                if (sim / log).exists():
                    _gzip(sim / log, folder / f"{log}.gz")
            shutil.copyfile(sim / "samples.csv", folder / "samples.csv")
            summary = json.loads((sim / "simulate.json").read_text())
            for key in ("plan", "log", "launch_list"):  # this machine's paths: names only
                summary[key] = Path(summary[key]).name
            (folder / "simulate.json").write_text(json.dumps(summary, indent=2) + "\n")
    old_logs = dest / "logs"
    for stale in old_logs.glob("*.sampled.log.gz"):
        stale.unlink()
    for card in ("reference", "tuned"):
        _gzip(out / f"{card}-raw" / "sim.log", dest / "logs" / f"{card}-full.sim.log.gz")
    pkp = dest / "pkp-stem-tuned"
    if pkp.exists():
        shutil.rmtree(pkp)
    pkp.mkdir()
    _gzip(out / "stem-tuned-sim" / "sampled.log", pkp / "sim.log.gz")
    from hilsim.simmodel.gpgpusim.visualizer import find_visualizer_log, slim_visualizer

    _gzip(find_visualizer_log(out / "stem-tuned-sim"), pkp / "gpgpusim_visualizer_.log.gz",
          slim_visualizer)
    provenance = {k: figures[k] for k in ("workload_steps", "options", "cards", "build",
                                          "steps_wall") if k in figures}
    provenance["regenerate"] = ("python benchmarks/gpgpusim_loop.py --out OUT --ship "
                                "analyzer/examples/simulated-v100")
    (dest / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=36)
    ap.add_argument("--reuse", action="store_true", help="skip steps whose output exists")
    ap.add_argument("--jobs", type=int, default=1, help="full runs at once")
    ap.add_argument("--ship", type=Path, default=None, help="copy the example's files here")
    ap.add_argument("--from-example", type=Path, default=None,
                    help="reuse this shipped example's full runs (implies --reuse)")
    args = ap.parse_args()
    if args.from_example is not None:
        from_example(args.from_example.resolve(), args.out.resolve())
        args.reuse = True
    from hilsim.simmodel.gpgpusim.build import find_build
    from hilsim.simmodel.gpgpusim.workloads import REDUCED_QV100, build_transformer_step

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    steps = Steps(out, args.reuse)
    opts = [x for k, v in REDUCED_QV100.items() for x in ("-O", f"{k}={v}")]
    build = find_build()
    figures: dict[str, object] = {"workload_steps": args.steps, "options": opts,
                                  "build": build.key if build else None}
    program = out / "transformer_step"
    if not (args.reuse and program.exists()):
        started = time.monotonic()
        build_transformer_step(program)
        steps._record("compile", time.monotonic() - started, 0.0)
    command = ["--", str(program), "--steps", str(args.steps)]
    steps.run("tune", _cmd("tune", str(MICROBENCH), "--convention", "gpgpusim", "-o",
                           str(out / "tuned"), "--force"), out / "tuned" / "gpgpusim.config")
    if (out / "tuned" / "timing.json").exists():  # (--from-example: the shipped one, reduced)
        reduced_timing(out / "tuned" / "timing.json", out / "tuned-timing-4sm.json")
    cards = {"reference": "SM7_QV100", "tuned": str(out / "tuned" / "gpgpusim.config"),
             "rtx3070": "SM86_RTX3070"}
    figures["cards"] = {k: (v if k != "tuned" else "hilsim tune output (tuned/)")
                        for k, v in cards.items()}
    steps.parallel([
        (f"full:{name}", _cmd("agent", "profile", "--backend", "gpgpusim", "--card", card,
                              *opts, "--keep-raw", str(out / f"{name}-raw"), "--force",
                              "-o", str(out / f"{name}.bundle"), *command),
         out / f"{name}.bundle" / "manifest.json")
        for name, card in cards.items()], args.jobs)
    ref = str(out / "reference.bundle")
    for m in METHODS:
        steps.run(f"plan:{m}", _cmd("plan", ref, "-m", m, "-o", str(out / f"{m}.json")),
                  out / f"{m}.json")
        for card in SAMPLED_CARDS:
            sim = out / f"{m}-{card}-sim"
            steps.run(f"simulate:{m}:{card}",
                      _cmd("simulate", str(out / f"{m}.json"), "--card", cards[card], *opts,
                           *VISUALIZER, "--warmup", "auto", "--profile", ref, "--force",
                           "-o", str(sim), *command), sim / "simulate.json")
            summary = json.loads((sim / "simulate.json").read_text())
            figures[f"simulate:{m}:{card}"] = {
                k: summary[k] for k in ("launches_simulated", "samples", "sampled_cycles",
                                        "simulated_cycles", "full_cycles", "cycle_fraction",
                                        "simulated_time_speedup", "estimate_cycles",
                                        "estimate_error_signed", "interval_cycles",
                                        "warmup", "state", "sim_cpu_s", "sim_wall_s",
                                        "cpu_time_speedup")}
            report = out / f"validate-{m}-{card}"
            steps.run(f"validate:{m}:{card}",
                      _cmd("validate", "--silicon", ref, "--plan", str(out / f"{m}.json"),
                           "--sim", str(sim), "--sim-full", str(out / f"{card}-raw/sim.log"),
                           "-o", str(report)), report.with_suffix(".json"))
            d = json.loads(report.with_suffix(".json").read_text())["plans"][0]
            figures[f"validate:{m}:{card}"] = {
                k: d["decomposition"]["totals"][k]
                for k in ("configuration_error", "sampling_error", "total_error")}
            if card == "tuned":
                figures[f"configuration_error_per_kernel:{m}"] = {
                    r["kernel"]: r["configuration_error"]
                    for r in d["decomposition"]["per_kernel"]}
    steps.run("pkp", _cmd("pkp", ref, "--plan", str(out / "stem.json"), "--gpgpusim-log",
                          str(out / "stem-tuned-sim"), "--relative", "-o",
                          str(out / "pkp.json")), out / "pkp.json")
    pkp = json.loads((out / "pkp.json").read_text())
    figures["pkp"] = {k: pkp[k] for k in ("projection_error", "simulated_fraction",
                                          "n_projected", "n_launches")}
    steps.run("compare", _cmd("compare", ref, "-o", str(out / "compare")),
              out / "compare" / "compare.json")
    figures["compare"] = str(out / "compare" / "compare.csv")
    # PKA's two-level variant (section 3.1): counters for the first 100 launches only
    # (a tenth of a shorter run, at least 10)
    n = json.loads((out / "reference.bundle" / "manifest.json").read_text())["n_launches"]
    first = min(100, max(10, n // 10))
    steps.run("pka-two-level", _cmd("evaluate", ref, "-m", "pka", "-p", f"detailed_first={first}",
                                    "-o", str(out / "pka-two-level.json")),
              out / "pka-two-level.json")
    for m in METHODS:
        path = out / f"portability-{m}.json"
        steps.run(f"portability:{m}", _cmd("portability", "--plan", str(out / f"{m}.json"),
                                           "--source", ref, "--bundle",
                                           str(out / "rtx3070.bundle"), "-o", str(path)), path)
        p = json.loads(path.read_text())
        figures[f"portability:{m}"] = {"error_on_b": p["error"], "error_on_a": p["error_on_a"],
                                       "speedup_b_over_a": p["speedup_b_over_a"]}
    vary = [x for v in DSE_VARY for x in ("--vary", v)]
    steps.run("dse", _cmd("dse", ref, "--plan", str(out / "stem.json"), "--config",
                          str(out / "tuned-timing-4sm.json"), *vary, "-o",
                          str(out / "dse.json")), out / "dse.json")
    if args.ship is not None:
        started = time.monotonic()
        figures["steps_wall"] = steps.times
        ship(out, args.ship, figures)
        steps._record("ship", time.monotonic() - started, 0.0)
        steps.run("quickstart", _cmd("quickstart", "--example", "simulated-v100", "-o",
                                     str(out / "quickstart")))
    figures["steps_wall"] = steps.times
    (out / "loop.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
