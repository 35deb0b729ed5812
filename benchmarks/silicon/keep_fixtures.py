"""Keep what a silicon session measured as test fixtures (runs here, no GPU).

``python benchmarks/silicon/keep_fixtures.py GPU1_DIR [GPU2_DIR] -o tests/data/silicon/H100``
``python benchmarks/silicon/keep_fixtures.py LOOP_DIR [NATIVE_DIR] -o tests/data/silicon/H100/loop``
``python benchmarks/silicon/keep_fixtures.py --loop GPU2_DIR -o tests/data/silicon/H200/loop``

``UNPACKED_GPUn`` is a ``/tmp/hilsim-gpuN`` folder unpacked from the tarballs that
``run_on_device.sh`` returned. Kept, small enough for the repository:

* ``probe.json``, ``microbench.json``, ``paths-gpuN.tsv``, every step's log (``logs/``);
* bundles (``bundles/NAME``) of the CuPy workload, the transformer loop and ResNet-50
  under the cupti and torch backends, the transformer's second run; only the manifests
  (``manifests/NAME.json``) of the rest;
* real tool output for the importers' tests (``raw/``): the transformer's CUPTI records
  (gzip), ncu's raw CSV of the first 200 launches of both workloads (gzip), the header
  line of every CUPTI records file, and the transformer's Kineto trace cut to the events
  up to the end of its third ``train_step`` (the events' own text, unparsed, so every
  number keeps its digits);
* ``ncu-metrics-sm90.txt.gz``: the first column (metric base names) of
  ``ncu --query-metrics`` on the device.

From the ``loop`` and ``native`` stages (:func:`keep_loop`): the quick suite's
``microbench.json``, ``paths-STAGE.tsv`` and every log; every bundle whole (the native
programs' ``loop-NAME`` with ncu on every launch, the CuPy workload's ``cupy-ncu-none`` /
``cupy-ncu-all``, the transformer loop's); ``overhead-*.json``; the disassembled cubins
(``cubins/``: index, SASS text and cubins, gzip); and per profiled run its raw files
gzipped under ``raw/`` (CUPTI records, ncu's CSV) for the importers' tests.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
from pathlib import Path

BUNDLES = ("cupy-cupti", "cupy-torch", "transformer-cupti", "transformer-torch",
           "transformer-cupti-run2", "resnet-cupti", "resnet-torch")
KINETO_STEPS = 3


def _gzip(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as src, gzip.GzipFile(target, "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)


def _event_chunks(text: str) -> tuple[str, list[str], str]:
    """(text before the first event, each event's text, text after the last event)."""
    head, sep, rest = text.partition('"traceEvents": [')
    if not sep:
        raise SystemExit("not a Kineto trace: no traceEvents")
    body, tail_sep, tail = rest.rpartition("\n  ]")
    chunks = [c for c in re.split(r"\n  \},?(?=\n)", body) if c.strip()]
    # the last event keeps its closing brace (no comma follows it): one form for all
    return head + sep, [c.rstrip().removesuffix("\n  }") + "\n  }" for c in chunks], tail_sep + tail


def cut_kineto(source: Path, target: Path, steps: int) -> int:
    """Write the events up to the end of the ``steps``-th ``train_step`` annotation."""
    head, chunks, tail = _event_chunks(source.read_text(encoding="utf-8"))
    events = [json.loads(c) for c in chunks]
    ends = sorted(e["ts"] + e.get("dur", 0) for e in events
                  if e.get("cat") == "user_annotation" and e.get("name") == "train_step")
    if len(ends) < steps:
        raise SystemExit(f"{source}: fewer than {steps} train_step annotations")
    cutoff = ends[steps - 1]
    kept = [c for c, e in zip(chunks, events, strict=True)
            if e.get("ph") == "M" or (isinstance(e.get("ts"), int | float) and e["ts"] <= cutoff)]
    target.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(target, "wt", encoding="utf-8") as handle:
        handle.write(head + "\n" + ",\n".join(k.lstrip("\n") for k in kept) + tail)
    return len(kept)


def _logs(run: Path, stage: str, out: Path) -> None:
    shutil.copy2(run / "paths.tsv", out / f"paths-{stage}.tsv")
    for log in sorted((run / "logs").glob("*.log")):
        target = out / "logs" / stage / log.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(log, target)


#: raw files of a profiled run worth replaying, gzipped under raw/NAME.<file>.gz
RAW_FILES = ("light.cupti.jsonl", "detailed.csv", "injection.cupti.jsonl.gz")


def keep_loop(runs: list[Path], out: Path) -> None:
    """The ``loop`` / ``native`` stages' results (module doc) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for run in runs:
        stage = run.name.removeprefix("hilsim-")
        _logs(run, stage, out)
        for name in ("microbench.json", "probe.json"):
            if (run / name).is_file():
                shutil.copy2(run / name, out / name)
        for result in sorted(run.glob("overhead-*.json")):
            shutil.copy2(result, out / result.name)
        for bundle in sorted(p for p in run.iterdir() if (p / "manifest.json").is_file()):
            target = out / "bundles" / bundle.name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(bundle, target)
        for raw in sorted(run.glob("*-raw")):
            for name in RAW_FILES:
                source = raw / name
                if not source.is_file():
                    continue
                target = out / "raw" / f"{raw.name.removesuffix('-raw')}.{name}"
                if name.endswith(".gz"):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, target)
                else:
                    _gzip(source, target.with_name(target.name + ".gz"))
        cubins = run / "cubins"
        if cubins.is_dir():
            shutil.copy2(cubins / "index.json", out / "cubins-index.json")
            for path in sorted(cubins.glob("*.sass")) + sorted(cubins.glob("*.cubin")):
                _gzip(path, out / "cubins" / f"{path.name}.gz")
    print(f"kept in {out}: {sorted(p.name for p in (out / 'bundles').iterdir())}"
          if (out / "bundles").is_dir() else f"kept in {out}: no bundles")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--loop", action="store_true",
                        help="keep as the loop stage does (a gpu2 run of loop-* steps, e.g. "
                             "on the second lent kind); implied for hilsim-loop/-native")
    args = parser.parse_args()
    out: Path = args.output
    if args.loop or args.runs[0].name in ("hilsim-loop", "hilsim-native"):
        keep_loop(args.runs, out)
        return
    out.mkdir(parents=True, exist_ok=True)
    gpu1 = args.runs[0]
    for name in ("probe.json", "microbench.json"):
        shutil.copy2(gpu1 / name, out / name)
    for run in args.runs:
        stage = run.name.removeprefix("hilsim-")
        _logs(run, stage, out)
        for bundle in sorted(p for p in run.iterdir() if (p / "manifest.json").is_file()):
            name = bundle.name if stage == "gpu1" else f"{bundle.name}-{stage}"
            if bundle.name in BUNDLES and not (out / "bundles" / bundle.name).exists():
                shutil.copytree(bundle, out / "bundles" / bundle.name)
            else:
                (out / "manifests").mkdir(exist_ok=True)
                shutil.copy2(bundle / "manifest.json", out / "manifests" / f"{name}.json")
        for records in sorted(run.glob("*-raw/light.cupti.jsonl")):
            header = records.open(encoding="utf-8").readline()
            (out / "raw").mkdir(exist_ok=True)
            name = records.parent.name.removesuffix("-raw")
            (out / "raw" / f"{name}-{stage}.cupti-header.json").write_text(header)
    raw = gpu1
    _gzip(raw / "transformer-cupti-raw/light.cupti.jsonl",
          out / "raw/transformer.cupti.jsonl.gz")
    for workload in ("transformer", "cupy"):
        _gzip(raw / f"{workload}-cupti-raw/detailed.csv", out / f"raw/{workload}.ncu-raw.csv.gz")
    kept = cut_kineto(raw / "transformer-torch-raw/light.pt.trace.json",
                      out / "raw/transformer.pt.trace.json.gz", KINETO_STEPS)
    names = sorted({line.split()[0] for line in (raw / "ncu-query-metrics.txt").open()
                    if line[:1].strip() and not line.startswith(("-", "Device", "Metric"))})
    with gzip.GzipFile(out / "ncu-metrics-sm90.txt.gz", "wb", mtime=0) as handle:
        handle.write(("\n".join(names) + "\n").encode())
    print(f"kept in {out}: Kineto events {kept}, ncu metric names {len(names)}")


if __name__ == "__main__":
    main()
