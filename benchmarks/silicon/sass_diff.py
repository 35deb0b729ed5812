"""The machine code the GPU host's CuPy built, against the SASS the test tier reads here.

``python benchmarks/silicon/sass_diff.py KEPT [--arch 90] [--json OUT]``

``KEPT`` is the folder of ``.sass`` (or ``.sass.gz``) files that ``cubins.py`` wrote on the
GPU host (``nvdisasm -hex -c`` of each cubin CuPy compiled there: its NVRTC and ptxas, CUDA
13 on the lent machines) and ``keep_fixtures.py`` kept. For every kernel in them that is a
kernel of the suite (:func:`hilsim.microbench.sources.kernel_names`), its source is
compiled here as CuPy compiles it (NVRTC 12.x, :func:`hilsim.microbench.sass.compile_cubin`)
and both are decoded (:func:`hilsim.microbench.sass.parse_nvdisasm`). Printed per kernel:
the instruction counts, the opcodes (without modifiers) whose counts differ, and the
stall cycles summed over each (the scheduling the compiler chose, Jia et al. 2018,
Section 2.3); the same as JSON with ``--json``. A kernel that is not the suite's is listed
as such. Identical code prints ``same``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def read_sass(path: Path) -> str:
    """The text of a kept ``.sass`` or ``.sass.gz`` file."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def kernel_summary(kernel: Any) -> dict[str, Any]:
    """Instruction count, opcode counts and summed stall cycles of a decoded kernel."""
    return {"instructions": len(kernel.instrs),
            "opcodes": dict(Counter(ins.base for ins in kernel.instrs)),
            "stall_cycles": int(sum(ins.stall for ins in kernel.instrs))}


def compare(host: dict[str, Any], here: dict[str, Any]) -> dict[str, Any]:
    """What differs between two kernel summaries (empty ``opcodes`` and equal counts: same)."""
    ops = sorted(set(host["opcodes"]) | set(here["opcodes"]))
    changed = {op: [here["opcodes"].get(op, 0), host["opcodes"].get(op, 0)] for op in ops
               if here["opcodes"].get(op, 0) != host["opcodes"].get(op, 0)}
    return {"instructions": [here["instructions"], host["instructions"]],
            "stall_cycles": [here["stall_cycles"], host["stall_cycles"]],
            "opcodes": changed,
            "same": not changed and here["instructions"] == host["instructions"]
            and here["stall_cycles"] == host["stall_cycles"]}


def diff_folder(kept: Path, arch: int) -> dict[str, Any]:
    """Every kernel of the kept SASS against the same kernel compiled here."""
    from hilsim.microbench import sass
    from hilsim.microbench.sources import all_sources, kernel_names

    source_of = {k: name for name, kernels in kernel_names().items() for k in kernels}
    files = sorted([*kept.glob("*.sass"), *kept.glob("*.sass.gz")])
    if not files:
        raise FileNotFoundError(f"{kept}: no .sass files (cubins.py's output)")
    here_cache: dict[str, dict[str, Any]] = {}
    rows: dict[str, Any] = {}
    for path in files:
        for name, kernel in sass.parse_nvdisasm(read_sass(path)).items():
            source = source_of.get(name)
            if source is None:
                rows[name] = {"file": path.name, "suite": False}
                continue
            if source not in here_cache:
                cubin = sass.compile_cubin(all_sources()[source], arch, f"{source}.cu")
                here_cache[source] = sass.disassemble(cubin, arch)
            row = compare(kernel_summary(kernel), kernel_summary(here_cache[source][name]))
            rows[name] = {"file": path.name, "suite": True, "source": source, **row}
    return {"arch": arch, "nvrtc_here": list(sass.nvrtc_version()), "kernels": rows}


def print_table(result: dict[str, Any]) -> None:
    """One line per kernel: here vs host."""
    print(f"sm_{result['arch']}: here NVRTC {'.'.join(map(str, result['nvrtc_here']))} "
          "vs the GPU host's build (instructions, stall cycles: here -> host)")
    for name, row in sorted(result["kernels"].items()):
        if not row["suite"]:
            print(f"  {name}: not a kernel of the suite ({row['file']})")
            continue
        if row["same"]:
            print(f"  {row['source']}:{name}: same")
            continue
        (n_here, n_host), (s_here, s_host) = row["instructions"], row["stall_cycles"]
        ops = ", ".join(f"{op} {a}->{b}" for op, (a, b) in row["opcodes"].items())
        print(f"  {row['source']}:{name}: {n_here}->{n_host} instructions, "
              f"{s_here}->{s_host} stall cycles" + (f"; {ops}" if ops else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", type=Path)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from hilsim.core.errors import HilsimError

    try:
        result = diff_folder(args.kept, args.arch)
    except (OSError, HilsimError) as exc:
        print(f"sass_diff: {exc}", file=sys.stderr)
        return 2
    print_table(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
