"""The native programs of the silicon loop (``programs.tsv``), and their GPU builds.

``python benchmarks/silicon/native/programs.py list``
    one line per program: ``NAME<TAB>ARGUMENTS`` (what the kit's bash loop reads).

``python benchmarks/silicon/native/programs.py rodinia --source RODINIA.tar.gz --out .native``
    here, before a GPU session: the Rodinia apps' sources the list names copied to
    ``.native/rodinia-src/`` (extracted safely from the pinned tarball; carried, so the
    GPU host can rebuild them), each compiled unmodified for the H100 (``-gencode
    arch=compute_90,code=sm_90``, the static CUDA runtime nvcc links by default) into
    ``.native/<app>_sm90``, with the includes and result switches of
    ``benchmarks/rodinia.py``'s table (the same the simulator's build uses).

``python3 benchmarks/silicon/native/programs.py rodinia --tree .native/rodinia-src --out DIR``
    on the GPU host, when the binaries built here do not run there: the same apps with
    its own nvcc (``--suffix S`` names them ``<app>_sm90S``).

The compiler is ``$NVCC`` (default ``nvcc``). A missing compiler, source or failed build
is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hilsim.simmodel.gpgpusim.toolchain import nvcc_version

from hilsim.core.errors import HilsimError

HERE = Path(__file__).resolve().parent
PROGRAMS_TSV = HERE / "programs.tsv"
#: the GPU target of the silicon builds
GENCODE = "arch=compute_90,code=sm_90"
#: the runtime API CUDA 13 removed and the apps use, put back (forced include)
CUDA13_COMPAT = HERE / "cuda13_compat.h"


@dataclass(frozen=True)
class NativeProgram:
    """One program of the loop: its name, where it comes from and its arguments."""

    name: str
    kind: str  # "workload" (simmodel/gpgpusim/workloads/NAME.cu) or "rodinia"
    argv: tuple[str, ...]


def programs(path: Path = PROGRAMS_TSV) -> list[NativeProgram]:
    """The programs of ``programs.tsv`` in order (``#`` lines are comments)."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or fields[1] not in ("workload", "rodinia"):
            raise ValueError(f"{path}:{number}: expected NAME<TAB>workload|rodinia<TAB>ARGS")
        out.append(NativeProgram(fields[0], fields[1], tuple(fields[2].split())))
    return out


def rodinia_apps() -> dict:
    """``benchmarks/rodinia.py``'s table of apps (sources, includes, switches)."""
    sys.path.insert(0, str(HERE.parent.parent))  # benchmarks/: rodinia.py's table
    from rodinia import APPS

    return APPS


def copy_sources(source: Path, tree: Path, names: list[str]) -> Path:
    """The folders of ``names``' sources and includes, from the tarball ``source`` (safe
    extraction) into ``tree/cuda/``; returns ``tree``."""
    from hilsim.simmodel.gpgpusim.extract import safe_extract

    apps = rodinia_apps()
    with tempfile.TemporaryDirectory(prefix="rodinia-") as tmp:
        root = safe_extract(source, tmp)
        for name in names:
            app = apps[name]
            folders = {str(Path(s).parent) for s in app.sources} | set(app.includes)
            for folder in sorted(folders):
                src = root / "cuda" / folder
                if not src.is_dir():
                    raise FileNotFoundError(f"{source}: no cuda/{folder} (app {name})")
                dest = tree / "cuda" / folder
                if dest.exists():
                    shutil.rmtree(dest)
                shutil.copytree(src, dest)
    return tree


def build_rodinia(tree: Path, out: Path, names: list[str], suffix: str = "") -> list[Path]:
    """Each app of ``names`` compiled from ``tree`` for sm_90 into ``out/<app>_sm90<suffix>``;
    with CUDA 13 or later, through ``cuda13_compat.h`` (what CUDA 13 removed, put back)."""
    apps = rodinia_apps()
    nvcc = os.environ.get("NVCC", "nvcc")
    if shutil.which(nvcc) is None:
        raise FileNotFoundError(f"{nvcc} not found")
    release = nvcc_version(Path(shutil.which(nvcc) or nvcc))
    if release is None:
        raise RuntimeError(f"{nvcc} --version: no release line")
    compat = ["-include", str(CUDA13_COMPAT)] if release >= (13, 0) else []
    out.mkdir(parents=True, exist_ok=True)
    built = []
    for name in names:
        app = apps[name]
        cuda = tree / "cuda"
        exe = out / f"{name}_sm90{suffix}"
        argv = [nvcc, "-O2", "-gencode", GENCODE, *compat,
                *(f"-I{cuda / inc}" for inc in app.includes), *app.defines,
                *(str(cuda / s) for s in app.sources), "-o", str(exe)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        (out / f"{exe.name}.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            errors = [ln for ln in done.stderr.splitlines() if "error" in ln.lower()]
            raise RuntimeError(f"{exe.name}: nvcc exit {done.returncode}: "
                               + (errors[0] if errors else done.stderr.strip()[-200:]))
        print(f"built {exe} ({exe.stat().st_size} bytes)")
        built.append(exe)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="NAME<TAB>ARGUMENTS per program")
    r = sub.add_parser("rodinia", help="the list's Rodinia apps built for sm_90")
    r.add_argument("--source", type=Path, help="rodinia-cuda-<sha>.tar.gz (sources copied)")
    r.add_argument("--tree", type=Path, help="sources copied before (OUT/rodinia-src)")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--suffix", default="")
    args = parser.parse_args(argv)
    try:
        listed = programs()
        if args.command == "list":
            for program in listed:
                print(f"{program.name}\t{' '.join(program.argv)}")
            return 0
        names = [p.name for p in listed if p.kind == "rodinia"]
        if (args.source is None) == (args.tree is None):
            raise ValueError("give exactly one of --source or --tree")
        tree = args.tree or copy_sources(args.source, args.out / "rodinia-src", names)
        build_rodinia(tree, args.out, names, args.suffix)
    except (OSError, ValueError, RuntimeError, HilsimError) as exc:
        print(f"programs.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
