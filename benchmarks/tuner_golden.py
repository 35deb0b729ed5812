"""Not a benchmark: `hilsim tune` outputs over many inputs, for a before/after diff.

usage: python benchmarks/tuner_golden.py OUTDIR

Runs the tune command in-process on the committed fixtures (the H100 silicon run with and
without its probe, the three simulated cards, Accel-Sim's TITAN V output, every preset
alone, a synthetic file) in all three conventions, and on variants of them: each
measurement dropped in turn, each probe fact dropped in turn, other memory types and
compute capabilities. Each case's four files and its output line go to OUTDIR/CASE/.
Run it before and after a change to the tuner and compare with ``diff -r``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hilsim.simmodel.tuner import CONVENTIONS

from hilsim.cli.tune import tune_cmd

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
H100 = DATA / "silicon" / "H100" / "microbench.json"
PROBE = DATA / "silicon" / "H100" / "probe.json"
SIMULATED = sorted((DATA / "microbench" / "gpgpusim").glob("*.microbench.json"))
TITANV = DATA / "accelsim" / "accelsim-ubench-output-titanv.txt"
PRESETS = ("QV100", "RTX2060", "RTX3070", "H100-SXM")
SYNTHETIC = {
    "schema": "hilsim.microbench/1",
    "device": {"name": "Synthetic Volta", "major": 7, "minor": 0, "multiProcessorCount": 10,
               "memoryBusWidth": 1024, "memoryClockRate": 1000000, "memory_type": "HBM2",
               "sharedMemPerMultiprocessor": 65536, "l2CacheSize": 1048576},
    "measurements": [
        {"name": "l1_hit_latency", "value": 30.0, "unit": "cycles", "samples": 5, "spread": 0.1},
        {"name": "l2_hit_latency", "value": 200.0, "unit": "cycles", "samples": [], "spread": 0},
        {"name": "dram_latency", "value": 400.0, "unit": "cycles", "samples": [1.0, 2.0]},
        {"name": "shared_latency", "value": 25.0, "unit": "cycles", "samples": [1, 2, 3]},
        {"name": "sm_clock_mhz", "value": 1000.0, "unit": "MHz", "samples": []},
        {"name": "launch_latency_us", "value": 5.0, "unit": "us", "samples": []},
        {"name": "fp32_throughput", "value": 120.0, "unit": "flop/clk/SM", "samples": []},
        {"name": "fp32_latency", "value": 4.2, "unit": "cycles", "samples": []},
    ],
}


def cases(work: Path) -> list[tuple[str, list[str]]]:
    """(case name, tune arguments) for every case; writes variant inputs under ``work``."""

    def write(name: str, data: object) -> str:
        path = work / name
        path.write_text(json.dumps(data))
        return str(path)

    probe = json.loads(PROBE.read_text())
    out: list[tuple[str, list[str]]] = []
    for c in CONVENTIONS:
        conv = ["--convention", c]
        out += [
            (f"h100-probe-{c}", [str(H100), "--device-facts", str(PROBE), *conv]),
            (f"h100-{c}", [str(H100), *conv]),
            (f"h100-probe-RTX3070-{c}",
             [str(H100), "--device-facts", str(PROBE), "--preset", "RTX3070", *conv]),
            (f"titanv-{c}", ["--accelsim-output", str(TITANV), *conv]),
            (f"titanv-qv100-{c}", [str(SIMULATED[1]), "--accelsim-output", str(TITANV), *conv]),
            (f"titanv-probe-{c}",
             ["--accelsim-output", str(TITANV), "--device-facts", str(PROBE), *conv]),
            (f"synthetic-{c}", [write("synthetic.json", SYNTHETIC), *conv]),
        ]
        out += [(f"preset-{p}-{c}", ["--preset", p, *conv]) for p in PRESETS]
        for s in SIMULATED:
            out += [(f"{s.stem}-{c}", [str(s), *conv]),
                    (f"{s.stem}-H100-SXM-{c}", [str(s), "--preset", "H100-SXM", *conv])]
        for src in (H100, *SIMULATED):
            data = json.loads(src.read_text())
            facts = ["--device-facts", str(PROBE)] if src == H100 else []
            for i, row in enumerate(data["measurements"]):
                name = f"drop-{src.stem}-{i}-{row['name']}"
                rows = data["measurements"][:i] + data["measurements"][i + 1:]
                out.append((f"{name}-{c}",
                            [write(f"{name}.json", {**data, "measurements": rows}), *facts, *conv]))
        for key in probe:
            facts = write(f"probe-no-{key}.json", {k: v for k, v in probe.items() if k != key})
            out.append((f"dropfact-{key}-{c}", [str(H100), "--device-facts", facts, *conv]))
        for memory, bus in (("GDDR5", 384), ("GDDR5X", 352), ("GDDR6X", 256), ("HBM3", 5120)):
            facts = write(f"probe-{memory}.json", dict(
                probe, memory_type=memory, bus_width_bits=bus, compute_capability="8.6"))
            out.append((f"memory-{memory}-{c}",
                        [str(SIMULATED[2]), "--device-facts", facts, *conv]))
        for cc in ("3.5", "5.2", "6.1", "7.5", "8.0"):
            facts = write(f"probe-cc{cc}.json", dict(probe, compute_capability=cc))
            out.append((f"cc-{cc}-{c}", [str(H100), "--device-facts", facts, *conv]))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2])
        return 2
    dest_root = Path(argv[0])
    dest_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tuner-golden."))
    runner = CliRunner()
    try:
        todo = cases(work)
        for name, args in todo:
            out = work / "out" / name
            res = runner.invoke(tune_cmd, [*args, "-o", str(out)])
            dest = dest_root / name
            dest.mkdir()
            text = f"{res.output}\nEXC: {res.exception!r}\n".replace(str(work), "<WORK>")
            (dest / "stdout.txt").write_text(text.replace(str(DATA), "<DATA>"))
            if out.exists():
                for f in out.iterdir():
                    shutil.copy(f, dest / f.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(todo)} cases in {dest_root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
