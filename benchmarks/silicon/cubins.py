"""The machine code CuPy compiled on the GPU host, kept for the SASS review (GPU host).

``python benchmarks/silicon/cubins.py CACHE_DIR -o OUT [--nvdisasm PATH]``

CuPy keeps every kernel it compiles in its cache folder (``CUPY_CACHE_DIR``), one file per
module: a hash of the binary, then the binary (an ELF cubin where NVRTC could build one for
the card's architecture). The kit runs the microbenchmark suite with that folder set to a
fresh one, so each file here is one of the suite's modules as the host's NVRTC and ptxas
built it. This script copies each cubin to ``OUT/<cache name>.cubin`` (from the ELF magic
on, whatever the hash before it), writes ``nvdisasm -hex -c`` of it to ``.sass`` (the
format :func:`hilsim.microbench.sass.parse_nvdisasm` reads), and an ``index.json`` of the
files, their kernels and instruction counts, and the nvdisasm version; the review compares
them with the SASS the NVRTC/SASS test tier compiles here.

A cache file without an ELF image (PTX, a file of another tool) is listed with its reason,
not copied. No cache folder, an empty one, or no nvdisasm: one line and exit code 2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ELF_MAGIC = b"\x7fELF"
#: the byte of the ELF header holding the class (2: 64-bit), a check that the magic found
#: is a header and not four bytes of something else
ELF_CLASS_64 = 2


def cubin_of(data: bytes) -> bytes | None:
    """The ELF image in a CuPy cache file (everything from the magic on), or None."""
    start = data.find(ELF_MAGIC)
    if start < 0 or len(data) < start + 64 or data[start + 4] != ELF_CLASS_64:
        return None
    return data[start:]


def kernels_of(sass_text: str) -> dict[str, int]:
    """Kernel name -> instruction count of ``nvdisasm -hex -c`` output."""
    from hilsim.microbench.sass import parse_nvdisasm

    return {name: len(kernel.instrs) for name, kernel in parse_nvdisasm(sass_text).items()}


def _nvdisasm_version(tool: str) -> str:
    done = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown"


def extract(cache: Path, out: Path, tool: str) -> dict[str, Any]:
    """Copy and disassemble every cubin of ``cache`` into ``out``; the index."""
    files = sorted(p for p in cache.rglob("*") if p.is_file())
    if not files:
        raise SystemExit(f"cubins: {cache}: no cached modules (did the suite run with "
                         "CUPY_CACHE_DIR set to it?)")
    out.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    for path in files:
        data = path.read_bytes()
        entry: dict[str, Any] = {"file": str(path.relative_to(cache)), "bytes": len(data)}
        cubin = cubin_of(data)
        if cubin is None:
            entry["skipped"] = "no ELF image (PTX or another tool's file)"
            entries.append(entry)
            continue
        stem = str(path.relative_to(cache)).replace("/", "_")  # unique, flat
        (out / f"{stem}.cubin").write_bytes(cubin)
        entry["cubin"] = f"{stem}.cubin"
        entry["sha256"] = hashlib.sha256(cubin).hexdigest()
        done = subprocess.run([tool, "-hex", "-c", str(out / f"{stem}.cubin")],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            entry["nvdisasm_error"] = last[:300]
        else:
            (out / f"{stem}.sass").write_text(done.stdout)
            entry["sass"] = f"{stem}.sass"
            try:
                entry["kernels"] = kernels_of(done.stdout)
            except Exception as exc:  # noqa: BLE001 - the text is kept; say why it did not parse
                entry["parse_error"] = f"{type(exc).__name__}: {exc}"[:300]
        entries.append(entry)
    index = {"cache": str(cache), "nvdisasm": tool, "nvdisasm_version": _nvdisasm_version(tool),
             "files": entries}
    tmp = out / "index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1))
    tmp.replace(out / "index.json")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="CuPy's kernel cache folder (CUPY_CACHE_DIR)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--nvdisasm", default=None, help="default: nvdisasm on PATH")
    args = parser.parse_args(argv)
    tool = args.nvdisasm or shutil.which("nvdisasm")
    if tool is None:
        print("cubins: nvdisasm not on PATH", file=sys.stderr)
        return 2
    if not args.cache.is_dir():
        print(f"cubins: {args.cache}: no such folder", file=sys.stderr)
        return 2
    try:
        index = extract(args.cache, args.output, tool)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    kept = [e for e in index["files"] if "sass" in e]
    print(f"{len(kept)} of {len(index['files'])} cached modules disassembled "
          f"({index['nvdisasm_version']}) into {args.output}")
    for entry in kept:
        print(f"  {entry['file']}: {', '.join(entry.get('kernels', {})) or '?'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
