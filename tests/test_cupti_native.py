"""The CUPTI injection library (agent/native/), built with gcc here, no GPU.

* it builds against every CUPTI found (the nvidia-cuda-cupti-cu12 wheel of the test
  extra, a CUDA 13 toolkit when present) and loads; ``InitializeInjection`` fails in one
  line without a GPU and leaves a records file saying why;
* replay: its record code, compiled into ``replay_harness`` and fed the CUPTI records of
  the in-process backend's H100 run (``tests/data/silicon/H100/raw/transformer.cupti
  .jsonl.gz``, 8,803 kernels, their launching calls and 30 NVTX ranges) as activity
  records, writes a file that imports to the same launches and regions; mutants of that
  code (a field written from the wrong member, a range end lost, a filter dropped) fail;
* a stand-in program (``tests/native/cupti_standin.c``: CUPTI's functions defined there)
  drives the library's exit and SIGINT/SIGTERM paths, chaining to the program's handler.

Without CUPTI headers, cuda.h or gcc these tests skip; HILSIM_REQUIRE_CUPTI_BUILD=1 (CI)
makes that a failure.
"""

from __future__ import annotations

import ctypes.util
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hilsim.agent.cupti_build import (
    NATIVE,
    build_injection,
    compile_c,
    cupti_candidates,
    include_dirs,
    launch_header,
)

from hilsim.core.errors import HilsimError
from hilsim.formats.cupti_format import write_cupti_records
from hilsim.formats.cupti_records import bundle_from_cupti_records, read_cupti_records

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "data" / "silicon" / "H100" / "raw" / "transformer.cupti.jsonl.gz"
STANDIN = HERE / "native" / "cupti_standin.c"
REQUIRE = os.environ.get("HILSIM_REQUIRE_CUPTI_BUILD") == "1"
COMPILER = shutil.which(os.environ.get("CC") or "gcc")
KERNEL_FIELDS = ("start", "end", "correlation_id", "device_id", "stream_id", "context_id",
                 "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                 "registers_per_thread", "static_shared_memory", "dynamic_shared_memory")


def _installs() -> list:
    try:
        return [i for i in cupti_candidates() if i.cuda_include is not None]
    except HilsimError:
        return []


INSTALLS = _installs()


def _unavailable() -> None:
    reason = ("no CUPTI headers with cuda.h, or no gcc: pip install -e '.[test]' brings the "
              "nvidia-cuda-cupti-cu12 wheel; cuda.h comes with a CUDA toolkit")
    if REQUIRE:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module", params=INSTALLS or [None],
                ids=lambda i: f"cupti{i.api_version}" if i is not None else "no-cupti")
def install(request):
    if request.param is None or COMPILER is None:
        _unavailable()
    return request.param


@pytest.fixture(scope="module")
def first_install():
    if not INSTALLS or COMPILER is None:
        _unavailable()
    return INSTALLS[0]


@pytest.fixture(scope="module")
def library_cache(tmp_path_factory) -> Path:
    """One build cache for the module (the library is compiled once per CUPTI)."""
    return tmp_path_factory.mktemp("cupti-cache")


def build_program(install, sources: list[Path], out: Path, native: Path = NATIVE) -> Path:
    """A program from ``sources`` and the record code's headers (no libcupti)."""
    generated = out.parent / f"{out.name}-gen"
    generated.mkdir(parents=True, exist_ok=True)
    (generated / "hs_launch_cbids.h").write_text(launch_header(install.include))
    dirs = [native if d == NATIVE else d for d in include_dirs(install, generated)]
    compile_c(COMPILER, sources, out, dirs, shared=False)
    return out


# ------------------------------------------------------------------------- build and load

def test_library_builds_and_fails_cleanly_without_a_gpu(install, tmp_path, library_cache):
    library = build_injection(cache=library_cache / "cupti-inject", install=install)
    assert library.path.is_file()
    again = build_injection(cache=library_cache / "cupti-inject", install=install)
    assert not again.built_now and again.path == library.path  # cached by content
    code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
            "print('exported hs_write:', hasattr(lib, 'hs_write')); "
            "print('rc', lib.InitializeInjection())")
    env = {**os.environ, "HILSIM_CUPTI_OUT": str(tmp_path / "r.%p.jsonl")}
    env.pop("NVTX_INJECTION64_PATH", None)
    done = subprocess.run([sys.executable, "-c", code, str(library.path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "exported hs_write: False" in done.stdout  # only InitializeInjection is exported
    assert "rc 0" in done.stdout
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hilsim-cupti: error: CUPTI could not start")
    (written,) = tmp_path.glob("r.*.jsonl")
    header = json.loads(written.read_text().splitlines()[0])
    assert header["schema"] == "hilsim.cupti-records/1" and header["complete"] is False
    assert header["error"] and header["reason"] == header["error"]
    with pytest.raises(HilsimError, match="no kernel launches recorded"):
        bundle_from_cupti_records(written)


def _cuinit_program(tmp_path: Path) -> Path:
    source = tmp_path / "cuinit.c"
    source.write_text(
        '#include <dlfcn.h>\n#include <stdio.h>\n'
        'int main(void) {\n'
        '  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);\n'
        '  if (!cuda) { fprintf(stderr, "cuinit: no libcuda.so.1\\n"); return 5; }\n'
        '  int (*init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");\n'
        '  int status = init ? init(0) : -1;\n'
        '  fprintf(stderr, "cuinit: cuInit returned %d\\n", status);\n'
        '  return status == 0 ? 0 : 3;\n}\n')
    program = tmp_path / "cuinit"
    compile_c(COMPILER, [source], program, [], shared=False)
    return program


def test_the_cuda_driver_loads_it_at_cuinit(first_install, tmp_path, library_cache):
    """Where a libcuda is installed (this machine: Debian's, no GPU), cuInit loads the
    library named by CUDA_INJECTION64_PATH and calls InitializeInjection: its records file
    appears, here saying why CUPTI could not start."""
    if ctypes.util.find_library("cuda") is None:
        pytest.skip("no libcuda.so.1 on this machine")
    library = build_injection(cache=library_cache / "cupti-inject", install=first_install)
    program = _cuinit_program(tmp_path)
    env = {**os.environ, "CUDA_INJECTION64_PATH": str(library.path),
           "HILSIM_CUPTI_OUT": str(tmp_path / "r.%p.jsonl")}
    done = subprocess.run([str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert "cuInit returned" in done.stderr
    (written,) = tmp_path.glob("r.*.jsonl")
    header = json.loads(written.read_text().splitlines()[0])
    assert header["tool"]["name"] == "hilsim-cupti-inject"
    assert header["argv"] == [str(program)]
    if done.returncode != 0:  # no GPU: CUPTI refused, one line, the program ran on
        assert "error" in header and "hilsim-cupti: error: CUPTI could not start" in done.stderr


def test_agent_profile_of_a_native_program_stops_in_one_line(first_install, tmp_path,
                                                            library_cache, monkeypatch, capsys):
    from hilsim.cli.main import main

    monkeypatch.setenv("HILSIM_CACHE", str(library_cache))
    program = _cuinit_program(tmp_path)
    code = main(["agent", "profile", "--backend", "cupti", "--no-probe", "-o",
                 str(tmp_path / "b"), "--", str(program)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("hilsim: error")]
    assert code == 2 and len(err) == 1
    assert ("CUPTI could not start in the program" in err[0]
            or "wrote no records" in err[0]), err
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------------------- replay

def _fixture() -> list[dict]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _launch_ids(install) -> dict[str, set[int]]:
    text = launch_header(install.include)
    return {api: {int(x) for x in re.search(
        rf"HS_{api.upper()}_LAUNCH_CBIDS\[\] = {{([^}}]*)}}", text).group(1).split(",")}
        for api in ("runtime", "driver")}


def replay_input(records: list[dict], launch: dict[str, set[int]]) -> str:
    """The fixture's records as harness lines, plus records the library must drop."""
    lines, markers = [], []
    for r in records:
        if r["kind"] == "kernel":
            lines.append("K " + " ".join(str(r[f]) for f in KERNEL_FIELDS) + " " + r["name"])
        elif r["kind"] == "runtime":
            api = "R" if r["cbid"] in launch["runtime"] else "D"
            assert r["cbid"] in launch["runtime" if api == "R" else "driver"]
            lines.append(f"A {api} {r['cbid']} {r['start']} {r['end']} {r['process_id']} "
                         f"{r['thread_id']} {r['correlation_id']}")
        elif r["kind"] == "range" and r.get("source") == "marker":
            ident = 1000 + len(markers)
            domain = r.get("domain") or "-"
            markers.append((r["start"], 1, f"M 2 {ident} {r['start']} {r['thread_id']} "
                                           f"{domain} {r['name']}"))
            markers.append((r["end"], 0, f"M 4 {ident} {r['end']} {r['thread_id']} - -"))
    noise = [
        "K 0 0 999999 0 7 1 1 1 1 32 1 1 16 0 0 incomplete_kernel",  # dropped_incomplete
        "A D 1 5 9 1 1 999998",  # cuInit: not a launch API, skipped
        "A R 211 5 9 1 1 999997",  # a launch without a kernel: not written
        "M 4 424242 7 1 - -",  # an END without its START
    ]
    ordered = [m[2] for m in sorted(markers, key=lambda m: (m[0], m[1]))]
    return "\n".join([*noise[:2], *lines, *noise[2:], *ordered]) + "\n"


def _expected_file(records: list[dict], path: Path) -> Path:
    """The fixture without its ``annotate`` ranges (recorded by the in-process launcher's
    Python wrappers, which the injection library has no part in)."""
    kept = [r for r in records[1:] if not (r["kind"] == "range" and r["source"] == "annotate")]
    header = {k: v for k, v in records[0].items() if k not in ("schema", "kind")}
    write_cupti_records(path, header, kept)
    return path


def _replay(harness: Path, text: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(harness), str(out), "1795743710000000000", "1"], input=text,
                          capture_output=True, text=True, timeout=120)


def _same_import(expected: Path, written: Path) -> None:
    want, got = bundle_from_cupti_records(expected), bundle_from_cupti_records(written)
    pd.testing.assert_frame_equal(got.launches, want.launches)
    pd.testing.assert_frame_equal(got.regions, want.regions)
    header = read_cupti_records(written)[0]
    assert header["counts"] == {"kernel": 8803, "runtime": 8803, "range": 30}
    assert (header["dropped_incomplete"], header["api_records_skipped"]) == (1, 1)
    assert header["unclosed_ranges"] == 0 and header["complete"] is True


@pytest.fixture(scope="module")
def fixture_records() -> list[dict]:
    return _fixture()


@pytest.fixture(scope="module")
def harness(install, tmp_path_factory) -> Path:
    return build_program(install, [NATIVE / "cupti_records.c", HERE / "native" /
                                   "replay_harness.c"], tmp_path_factory.mktemp("h") / "replay")


def test_replay_writes_the_records_of_the_h100_run(install, harness, tmp_path, fixture_records):
    out = tmp_path / "replayed.cupti.jsonl"
    done = _replay(harness, replay_input(fixture_records, _launch_ids(install)), out)
    assert done.returncode == 0, done.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries
    expected = _expected_file(fixture_records, tmp_path / "expected.cupti.jsonl")
    _same_import(expected, out)
    launches = bundle_from_cupti_records(out).launches
    # the step ranges reach the main thread's launches (the autograd thread's have none)
    assert launches["region"].notna().sum() == 2712


MUTANTS = {
    "correlation id from the context id": (
        "text_u64(t, k->correlationId);", "text_u64(t, k->contextId);"),
    "grid_y from gridX": ("text_i64(t, k->gridY);", "text_i64(t, k->gridX);"),
    "range end lost": ("if (m->timestamp >= done.start && done.start > 0) {", "if (0) {"),
    "marker thread from the process id": ("m->objectId.pt.threadId", "m->objectId.pt.processId"),
    "calls kept without their kernel": ("if (!has_kernel(c->correlation_id)) continue;", ""),
    "non-launch APIs kept": ("if (!hs_is_launch_api(a->kind, a->cbid)) {", "if (0) {"),
}


@pytest.mark.slow  # one compile each
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_replay_catches_a_mutant(mutant, first_install, tmp_path, fixture_records):
    old, new = MUTANTS[mutant]
    native = tmp_path / "native"
    shutil.copytree(NATIVE, native)
    source = native / "cupti_records.c"
    text = source.read_text()
    assert text.count(old) == 1, mutant
    source.write_text(text.replace(old, new))
    harness = build_program(first_install, [source, HERE / "native" / "replay_harness.c"],
                            tmp_path / "replay", native=native)
    out = tmp_path / "replayed.cupti.jsonl"
    done = _replay(harness, replay_input(fixture_records, _launch_ids(first_install)), out)
    assert done.returncode == 0, done.stderr
    expected = _expected_file(fixture_records, tmp_path / "expected.cupti.jsonl")
    with pytest.raises(AssertionError):
        _same_import(expected, out)


def test_names_are_escaped_as_json(harness, tmp_path):
    names = ['quote"back\\slash', "tab\there", "caf\u00e9 \u4e2d", "bad\xffbyte"]
    text = "".join(f"K {10 + i} {20 + i} {i + 1} 0 7 1 1 1 1 32 1 1 8 0 0 {name}\n"
                   f"A R 211 {5 + i} {9 + i} 1 1 {i + 1}\n" for i, name in enumerate(names))
    text += "M 2 1 1 1 dom\"ain phase \"one\"\n"
    out = tmp_path / "r.jsonl"
    done = subprocess.run([str(harness), str(out), "100", "0", "stopped by SIGTERM"],
                          input=text.encode("utf-8", "surrogateescape")
                          .replace(b"\xc3\xbf", b"\xff"), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    header, kernels, runtime, ranges = read_cupti_records(out)
    assert kernels["name"].tolist() == [*names[:3], "bad\ufffdbyte"]
    assert header["complete"] is False and header["reason"] == "stopped by SIGTERM"
    assert ranges["name"].tolist() == ['phase "one"'] and ranges["domain"].tolist() == ['dom"ain']
    assert ranges["end"].tolist() == [100] and header["unclosed_ranges"] == 1


# ------------------------------------------------------------------------- exit and signals

@pytest.fixture(scope="module")
def standin(first_install, tmp_path_factory) -> Path:
    """The stand-in program linked with the library's own sources (no libcupti)."""
    return build_program(first_install, [STANDIN, NATIVE / "hilsim_cupti.c",
                                         NATIVE / "cupti_records.c"],
                         tmp_path_factory.mktemp("s") / "standin")


def _start(standin: Path, mode: str, out: Path) -> subprocess.Popen:
    from hilsim.agent.runner import sigint_default_in_children

    env = {**os.environ, "HILSIM_CUPTI_OUT": str(out)}
    with sigint_default_in_children():  # as hilsim starts a workload, also from `&`
        return subprocess.Popen([str(standin), mode, "10"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("mode, code, complete, reason", [
    ("exit0", 0, True, None), ("exit3", 3, False, "workload exited with code 3")])
def test_records_are_written_at_exit(standin, tmp_path, mode, code, complete, reason):
    out = tmp_path / "r.jsonl"
    process = _start(standin, mode, out)
    process.wait(timeout=60)
    assert process.returncode == code
    bundle = bundle_from_cupti_records(out)
    assert bundle.n_launches == 10 and bundle.manifest["complete"] is complete
    header = read_cupti_records(out)[0]
    assert header["reason"] == reason and header["unclosed_ranges"] == 1
    assert set(bundle.launches["region"]) == {"open phase"}  # open range closed at exit


def _ready(process: subprocess.Popen) -> None:
    assert process.stdout.readline().strip() == "ready"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_writes_the_records_then_takes_its_default_action(standin, tmp_path,
                                                                        signum):
    out = tmp_path / "r.jsonl"
    process = _start(standin, "wait", out)
    _ready(process)
    start = time.monotonic()
    process.send_signal(signum)
    process.wait(timeout=60)
    assert process.returncode == -signum  # died of the signal, as without the library
    assert time.monotonic() - start < 15
    header = read_cupti_records(out)[0]
    assert header["complete"] is False
    assert header["reason"] == f"stopped by {signal.Signals(signum).name}"
    assert header["counts"]["kernel"] == 10 and header["counts"]["runtime"] == 10


def test_a_stop_signal_reaches_the_programs_own_handler(standin, tmp_path):
    out = tmp_path / "r.jsonl"
    process = _start(standin, "own-handler", out)
    _ready(process)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    assert process.returncode == 3
    assert "program handler ran" in process.stderr.read()
    assert read_cupti_records(out)[0]["reason"] == "stopped by SIGTERM"


def test_agent_profile_takes_a_native_programs_records(standin, tmp_path, library_cache,
                                                       monkeypatch, capsys):
    """The whole backend path on a native program: build, environment, records picked by
    process, import, manifest (the stand-in records through its own copy of the library)."""
    from hilsim.cli.main import main
    from hilsim.core.bundle import read_bundle

    monkeypatch.setenv("HILSIM_CACHE", str(library_cache))
    out = tmp_path / "b"
    code = main(["agent", "profile", "--backend", "cupti", "--no-probe", "-o", str(out), "--",
                 str(standin), "exit0", "25"])
    assert code == 0, capsys.readouterr().err
    bundle = read_bundle(out)
    assert bundle.n_launches == 25
    light = bundle.manifest["profilers"][0]
    assert light["mode"] == "injection" and light["backend"] == "cupti"
    assert light["environment"]["CUDA_INJECTION64_PATH"].endswith("libhilsim_cupti.so")
    assert "other_processes" not in light


# ------------------------------------------------------------------------- the silicon kit

def _overhead_module():
    import importlib.util

    path = HERE.parent / "benchmarks" / "silicon" / "overhead.py"
    spec = importlib.util.spec_from_file_location("silicon_overhead", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_overhead_summary_by_hand():
    """Bare medians 1.1 s (process) and 0.5 s (loop); injected 2.1 s and 0.7 s over 1,000
    launches: x1.909 / 1,000 us per launch and x1.4 / 200 us per launch."""
    summary = _overhead_module().summary(
        [{"wall_s": 1.0, "loop_s": 0.5}, {"wall_s": 1.2, "loop_s": 0.4},
         {"wall_s": 1.1, "loop_s": 0.6}],
        {"injection": [{"wall_s": 2.1, "loop_s": 0.7, "launches": 1000},
                       {"wall_s": 2.0, "loop_s": 0.8, "launches": 1000},
                       {"wall_s": 2.2, "loop_s": 0.6, "launches": 1000}]})
    assert summary["bare"] == {"wall_s": 1.1, "loop_s": 0.5}
    inj = summary["injection"]
    assert (inj["wall_ratio"], inj["wall_us_per_launch"]) == (1.9091, 1000.0)
    assert (inj["loop_ratio"], inj["loop_us_per_launch"]) == (1.4, 200.0)


def test_overhead_script_runs_a_program_under_injection(standin, tmp_path, library_cache,
                                                       monkeypatch, capsys):
    """The kit's overhead step end to end on the stand-in (it records through its own copy
    of the library): warm-up, bare and injected runs in turn, every record imported."""
    monkeypatch.setenv("HILSIM_CACHE", str(library_cache))
    out = tmp_path / "o.json"
    code = _overhead_module().main(["-o", str(out), "--runs", "2", "--keep-raw",
                                    str(tmp_path / "raw"), "--", str(standin), "exit0", "30"])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert len(result["bare_runs"]) == 2 and len(result["profiled_runs"]["injection"]) == 2
    assert result["summary"]["injection"]["launches"] == 30
    assert all(r["header"]["counts"]["runtime"] == 30 for r in result["profiled_runs"]["injection"])
    assert (tmp_path / "raw" / "injection.cupti.jsonl.gz").is_file()


def test_overhead_script_without_a_gpu_is_one_line(first_install, tmp_path, library_cache,
                                                  monkeypatch, capsys):
    monkeypatch.setenv("HILSIM_CACHE", str(library_cache))
    code = _overhead_module().main(
        ["-o", str(tmp_path / "o.json"), "--", sys.executable, "-c",
         "import sys; print('no CUDA-capable device', file=sys.stderr); sys.exit(3)"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == ("overhead.py: error: warm-up bare run failed (exit code 3): "
                      "no CUDA-capable device")
