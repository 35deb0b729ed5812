"""The silicon kit's own tools (``benchmarks/silicon/``), run here without a GPU: the
CuPy-cache cubin extraction on a real NVRTC cubin in CuPy's cache layout, and the list of
native programs the loop runs on both sides."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from hilsim.microbench import sass
from hilsim.microbench.sources import all_sources

from hilsim.core.errors import HilsimError

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "benchmarks" / "silicon"
REQUIRE_SASS = os.environ.get("HILSIM_REQUIRE_SASS") == "1"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _cubin_sm90(source: str) -> bytes:
    """A real cubin of one suite source, compiled as CuPy compiles it for the H100."""
    try:
        sass.nvrtc_version()
    except HilsimError as exc:
        if REQUIRE_SASS:
            pytest.fail(f"HILSIM_REQUIRE_SASS=1: {exc}")
        pytest.skip(str(exc))
    if sass.find_nvdisasm(90) is None:
        if REQUIRE_SASS:
            pytest.fail("HILSIM_REQUIRE_SASS=1: no nvdisasm for sm_90")
        pytest.skip("no nvdisasm for sm_90")
    return sass.compile_cubin(all_sources()[source], 90, f"{source}.cu")


def test_cubins_are_cut_from_cupy_cache_files_and_disassembled(tmp_path, capsys):
    """Each cache file is a hash of the binary, then the binary (CuPy's cache layout); the
    cubin from the ELF magic on is what nvdisasm reads: its kernels are those of the
    cubin itself. A PTX file is listed as skipped."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cubin = _cubin_sm90("compute.ops")
    digest = hashlib.sha1(cubin, usedforsecurity=False).hexdigest().encode()
    (cache / "8f3a_2_compute_ops.cubin").write_bytes(digest + cubin)
    (cache / "9b1c_2_other.ptx").write_bytes(digest + b"//\n.version 8.0\n.target sm_90\n")
    cubins = _module(KIT / "cubins.py", "silicon_cubins")
    out = tmp_path / "out"
    assert cubins.main([str(cache), "-o", str(out),
                        "--nvdisasm", sass.find_nvdisasm(90)]) == 0, capsys.readouterr().err
    index = json.loads((out / "index.json").read_text())
    by_file = {e["file"]: e for e in index["files"]}
    kept = by_file["8f3a_2_compute_ops.cubin"]
    assert (out / kept["cubin"]).read_bytes() == cubin
    expected = {name: len(k.instrs) for name, k in sass.disassemble(cubin, 90).items()}
    assert kept["kernels"] == expected and len(expected) >= 1
    assert "skipped" in by_file["9b1c_2_other.ptx"]
    assert "1 of 2 cached modules disassembled" in capsys.readouterr().out


def test_a_cache_file_with_a_stray_magic_is_not_a_cubin():
    cubins = _module(KIT / "cubins.py", "silicon_cubins")
    assert cubins.cubin_of(b"0" * 40 + b"\x7fELF\x01" + b"\0" * 80) is None  # 32-bit class
    assert cubins.cubin_of(b"0" * 40 + b"\x7fELF") is None  # no header after it
    assert cubins.cubin_of(b"0" * 40 + b"\x7fELF\x02" + b"\1" * 80)[:5] == b"\x7fELF\x02"


@pytest.mark.parametrize("case", ["missing", "empty"])
def test_cubins_without_a_cache_is_one_line(tmp_path, capsys, case):
    cache = tmp_path / "cache"
    if case == "empty":
        cache.mkdir()
    cubins = _module(KIT / "cubins.py", "silicon_cubins")
    assert cubins.main([str(cache), "-o", str(tmp_path / "o"), "--nvdisasm", "/bin/true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cache) in err[0]


def test_every_listed_program_has_a_build_on_both_sides():
    """The loop's programs: each a workload with a simulator build function or a Rodinia
    app of the suite's table, with arguments; the kit and the analysis read one list."""
    from hilsim.simmodel.gpgpusim import workloads

    native = _module(KIT / "native" / "programs.py", "silicon_programs")
    listed = native.programs()
    assert len(listed) >= 4
    apps = native.rodinia_apps()
    for program in listed:
        assert program.argv, program
        if program.kind == "workload":
            assert callable(getattr(workloads, f"build_{program.name}"))
        else:
            assert program.name in apps


def test_a_malformed_program_line_names_its_file_and_line(tmp_path):
    native = _module(KIT / "native" / "programs.py", "silicon_programs")
    path = tmp_path / "programs.tsv"
    path.write_text("# comment\ngaussian\trodinia\t-s 8\nsrad_v2 rodinia 64 64\n")
    with pytest.raises(ValueError, match=r"programs.tsv:3: expected"):
        native.programs(path)


def test_keep_fixtures_keeps_the_loop_stage_whole(tmp_path):
    """A ``loop`` run folder as the kit leaves it, made of the H100 session's real files
    (a bundle, its CUPTI records and ncu CSV): bundles whole, raw files gzipped under the
    run's name, cubins and logs kept; the kept bundle reads back."""
    import gzip
    import shutil
    import subprocess

    from hilsim.core.bundle import read_bundle

    h100 = ROOT / "tests" / "data" / "silicon" / "H100"
    run = tmp_path / "hilsim-loop"
    shutil.copytree(h100 / "bundles" / "transformer-cupti", run / "loop-transformer_step")
    raw = run / "loop-transformer_step-raw"
    raw.mkdir()
    (raw / "light.cupti.jsonl").write_bytes(
        gzip.decompress((h100 / "raw" / "transformer.cupti.jsonl.gz").read_bytes()))
    (raw / "detailed.csv").write_bytes(
        gzip.decompress((h100 / "raw" / "transformer.ncu-raw.csv.gz").read_bytes()))
    (run / "logs").mkdir()
    (run / "logs" / "loop-transformer_step.log").write_text("wrote ...\n")
    (run / "paths.tsv").write_text("step\trc\tseconds\nloop-transformer_step\t0\t31.2\n")
    shutil.copy2(h100 / "microbench.json", run / "microbench.json")
    (run / "cubins").mkdir()
    (run / "cubins" / "index.json").write_text('{"files": []}')
    (run / "cubins" / "a.sass").write_text("\t.text.k:\n")
    out = tmp_path / "kept"
    done = subprocess.run([sys.executable, str(KIT / "keep_fixtures.py"), str(run), "-o",
                           str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    kept = read_bundle(out / "bundles" / "loop-transformer_step")
    assert kept.n_launches == read_bundle(h100 / "bundles" / "transformer-cupti").n_launches
    for name, source in (("light.cupti.jsonl", "transformer.cupti.jsonl.gz"),
                         ("detailed.csv", "transformer.ncu-raw.csv.gz")):
        assert gzip.decompress((out / "raw" / f"loop-transformer_step.{name}.gz").read_bytes()) \
            == gzip.decompress((h100 / "raw" / source).read_bytes())
    assert (out / "paths-loop.tsv").is_file() and (out / "microbench.json").is_file()
    assert (out / "logs" / "loop" / "loop-transformer_step.log").is_file()
    assert (out / "cubins-index.json").is_file() and (out / "cubins" / "a.sass.gz").is_file()


def _sass_text(cubin: bytes) -> str:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        return subprocess.run([sass.find_nvdisasm(90), "-hex", "-c", str(path)],
                              capture_output=True, text=True, check=True).stdout


def test_sass_diff_finds_no_difference_in_the_same_build_and_names_a_changed_one(tmp_path,
                                                                               capsys):
    """The same NVRTC build is ``same`` kernel by kernel; a build of the same source with
    device debug (``-G``: other instructions, other scheduling) is named with its counts;
    a kernel that is not the suite's is listed as such."""
    import gzip

    cubin = _cubin_sm90("latency.chase")
    diff = _module(KIT / "sass_diff.py", "silicon_sass_diff")
    kept = tmp_path / "same"
    kept.mkdir()
    (kept / "a.sass").write_text(_sass_text(cubin))
    result = diff.diff_folder(kept, 90)
    suite = [r for r in result["kernels"].values() if r["suite"]]
    assert suite and all(r["same"] for r in suite)

    debug = sass.nvrtc_compile(all_sources()["latency.chase"], [*sass.cupy_options(90), "-G"],
                               "latency.chase.cu", "CUBIN")
    foreign = sass.compile_cubin('extern "C" __global__ void not_ours(float* x) { x[0] = 1; }',
                                 90, "other.cu")
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "a.sass.gz").write_bytes(gzip.compress(_sass_text(debug).encode()))
    (changed / "b.sass").write_text(_sass_text(foreign))
    assert diff.main([str(changed), "--json", str(tmp_path / "d.json")]) == 0
    result = json.loads((tmp_path / "d.json").read_text())
    rows = result["kernels"]
    assert rows["not_ours"] == {"file": "b.sass", "suite": False}
    differing = [r for r in rows.values() if r["suite"] and not r["same"]]
    assert differing and all(r["source"] == "latency.chase" for r in differing)
    assert any(r["instructions"][0] != r["instructions"][1] for r in differing)
    out = capsys.readouterr().out
    assert "not_ours: not a kernel of the suite" in out and "instructions" in out


def test_sass_diff_without_files_is_one_line(tmp_path, capsys):
    diff = _module(KIT / "sass_diff.py", "silicon_sass_diff")
    assert diff.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no .sass files" in err[0]


@pytest.mark.parametrize(("release", "shim"), [("11.8", False), ("13.0", True)])
def test_rodinia_builds_take_the_cuda13_shim_only_from_cuda13(tmp_path, monkeypatch, release,
                                                              shim):
    """CUDA 13 removed runtime API the apps use (cudaThreadSynchronize, two cudaDeviceProp
    fields): its builds force-include the shim that puts them back; older ones, whose
    headers still declare them, must not (a second definition)."""
    nvcc = tmp_path / "nvcc"
    calls = tmp_path / "calls.txt"
    nvcc.write_text("#!/bin/sh\n"
                    f'if [ "$1" = --version ]; then echo "Cuda compilation tools, release '
                    f'{release}, V{release}.1"; exit 0; fi\n'
                    f'echo "$@" >> {calls}\n'
                    'while [ $# -gt 1 ]; do [ "$1" = -o ] && touch "$2"; shift; done\n')
    nvcc.chmod(0o755)
    monkeypatch.setenv("NVCC", str(nvcc))
    native = _module(KIT / "native" / "programs.py", "silicon_programs")
    built = native.build_rodinia(tmp_path / "tree", tmp_path / "out", ["gaussian", "srad_v2"])
    assert [p.name for p in built] == ["gaussian_sm90", "srad_v2_sm90"]
    lines = calls.read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert ("-include " + str(native.CUDA13_COMPAT) in line) is shim
        assert "-gencode arch=compute_90,code=sm_90" in line
