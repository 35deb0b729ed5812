"""Agent pieces without a GPU: probe errors, NVTX launcher, CUPTI records, nsys reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hilsim.cli.main import main
from hilsim.core.errors import HilsimError
from hilsim.formats.cupti_format import is_cupti_records, write_cupti_records
from hilsim.formats.cupti_records import bundle_from_cupti_records, read_cupti_records
from hilsim.formats.nsys_rep import export_nsys_rep

ROOT = Path(__file__).resolve().parent.parent


def test_probe_without_pynvml_and_cupy_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import -> ImportError
    monkeypatch.setitem(sys.modules, "cupy", None)
    code = main(["agent", "probe", "-o", str(tmp_path / "p.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "neither nvidia-ml-py (pynvml) nor cupy is installed" in err[0]
    assert not (tmp_path / "p.json").exists()


def test_probe_merges_nvml_and_cuda(monkeypatch, tmp_path, capsys):
    from hilsim.agent import probe

    monkeypatch.setattr(probe, "nvml_facts", lambda i, pci=None: {
        "name": "NVIDIA H100", "uuid": "GPU-1", "max_sm_clock_mhz": 1980})
    monkeypatch.setattr(probe, "cuda_facts", lambda i: {"name": "H100", "sm_count": 132,
                                                        "l2_bytes": 52428800,
                                                        "max_sm_clock_mhz": 1755.0})
    facts = probe.probe_device(0, tools=False)
    assert facts["name"] == "NVIDIA H100" and facts["sm_count"] == 132
    assert facts["max_sm_clock_mhz"] == 1980 and facts["sources"] == ["cuda", "nvml"]


def test_probe_no_gpu(monkeypatch):
    from hilsim.agent import probe

    def fail(i, pci=None):
        raise RuntimeError("NVML could not start (Driver Not Loaded): no NVIDIA driver or GPU")

    def missing(i):
        raise ImportError("cupy")

    monkeypatch.setattr(probe, "nvml_facts", fail)
    monkeypatch.setattr(probe, "cuda_facts", missing)
    with pytest.raises(HilsimError, match="no usable NVIDIA GPU.*Driver Not Loaded"):
        probe.probe_device(0, tools=False)


# ---------------------------------------------------------------- NVTX launcher

def _module(tmp_path: Path) -> Path:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(textwrap.dedent("""
        def step(x):
            return x + 1

        class Net:
            def forward(self, x):
                return x * 2
    """))
    (tmp_path / "script.py").write_text(textwrap.dedent("""
        import sys
        from mypkg.train import Net, step
        print("result", step(1), Net().forward(3), sys.argv[1:],
              getattr(step, "__wrapped__", None) is not None)
    """))
    return tmp_path / "script.py"


def test_nvtx_launcher_wraps_without_nvtx_package(tmp_path):
    script = _module(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    probe = subprocess.run([sys.executable, "-c", "import nvtx"], capture_output=True, env=env)
    done = subprocess.run(
        [sys.executable, "-m", "hilsim.agent.launch", "--nvtx", "mypkg.train:step",
         "--nvtx", "mypkg.train:Net.forward", "--", str(script), "a", "b"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "result 2 6 ['a', 'b'] True" in done.stdout
    if probe.returncode != 0:  # nvtx absent here: no-op with a warning
        assert "'nvtx' package is not installed" in done.stderr


def test_nvtx_launcher_bad_spec_is_one_line(tmp_path):
    script = _module(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "hilsim.agent.launch", "--nvtx", "mypkg.train:nope", "--",
         str(script)],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 2 and "'nope' not found" in done.stderr


def test_annotate_hooks_and_decorator(monkeypatch):
    import hilsim.agent.nvtx as nv

    monkeypatch.setitem(sys.modules, "nvtx", None)
    events: list[str] = []

    class Hook:
        def push(self, name: str) -> None:
            events.append(f"+{name}")

        def pop(self) -> None:
            events.append("-")

    hook = Hook()
    nv.add_range_hook(hook)
    try:
        @nv.annotate("outer")
        def f(x):
            with nv.annotate("inner"):
                return x

        @nv.annotate
        def g():
            return 7

        with pytest.warns(RuntimeWarning) if not nv._warned else _nullcontext():
            assert f(3) == 3
        assert g() == 7
    finally:
        nv.remove_range_hook(hook)
    assert events == ["+outer", "+inner", "-", "-", f"+{g.__qualname__}", "-"]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------- CUPTI records

def _synthetic_records(tmp_path: Path, complete: bool = True) -> Path:
    """Synthetic records (no GPU here) written by the backend's own writer."""
    kernels = [
        {"kind": "kernel", "name": "_Z6vecAddPfS_S_i", "start": 1000 + 100 * i,
         "end": 1050 + 100 * i, "correlation_id": 10 + i, "device_id": 0, "stream_id": 7,
         "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1,
         "registers_per_thread": 16, "static_shared_memory": 0, "dynamic_shared_memory": 0}
        for i in range(4)
    ]
    kernels.reverse()  # buffers may arrive out of order
    calls = [{"kind": "runtime", "start": 990 + 100 * i, "end": 995 + 100 * i,
              "correlation_id": 10 + i, "thread_id": 555, "process_id": 1} for i in range(4)]
    ranges = [
        {"kind": "range", "name": "step", "start": 980, "end": 1200, "thread_id": 555,
         "thread_ident": 1, "source": "annotate"},
        {"kind": "range", "name": "forward", "start": 985, "end": 1100, "thread_id": 555,
         "thread_ident": 1, "source": "annotate"},
    ]
    header = {"tool": {"name": "cupti-python", "version": "13.0.0"}, "argv": ["x.py"],
              "complete": complete, "reason": None if complete else "stopped by SIGINT"}
    path = tmp_path / "r.cupti.jsonl"
    write_cupti_records(path, header, [*kernels, *calls, *ranges])
    return path


def test_cupti_records_round_trip(tmp_path):
    path = _synthetic_records(tmp_path)
    assert is_cupti_records(path)
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temporary left behind
    header, kernels, runtime, ranges = read_cupti_records(path)
    assert header["schema"] == "hilsim.cupti-records/1" and len(kernels) == 4
    bundle = bundle_from_cupti_records(path)
    launches = bundle.launches
    assert launches["start_ns"].tolist() == [1000, 1100, 1200, 1300]
    assert launches["duration_ns"].tolist() == [50] * 4
    assert launches["grid_x"].tolist() == [64] * 4 and launches["regs"].tolist() == [16] * 4
    regions = launches["region"].astype(object).tolist()
    assert regions[:3] == ["step/forward", "step/forward", "step"]
    assert launches["region"].isna().tolist()[3]
    assert sorted(bundle.regions["path"]) == ["step", "step/forward"]
    assert bundle.manifest["complete"] is True
    assert bundle.manifest["profilers"][0]["version"] == "13.0.0"
    names = set(launches["name"].astype(str))
    demangled = bundle.manifest["profilers"][0]["names_demangled"]
    assert names == ({"vecAdd(float*, float*, float*, int)"} if demangled
                     else {"_Z6vecAddPfS_S_i"})


def test_cupti_records_incomplete_and_errors(tmp_path):
    path = _synthetic_records(tmp_path, complete=False)
    assert bundle_from_cupti_records(path).manifest["complete"] is False
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().splitlines()[0] + "\n{\"kind\": \"kernel\", \"start\": 1}\n")
    with pytest.raises(HilsimError, match=r"line 2: kernel record has no 'name'"):
        read_cupti_records(bad)
    bad.write_text(json.dumps({"kind": "kernel"}) + "\n")
    with pytest.raises(HilsimError, match="line 1: not a hilsim CUPTI records file"):
        read_cupti_records(bad)
    empty = tmp_path / "e.jsonl"
    write_cupti_records(empty, {"complete": False, "reason": "stopped by SIGTERM"}, [])
    with pytest.raises(HilsimError, match="no kernel launches recorded.*SIGTERM"):
        bundle_from_cupti_records(empty)


# ---------------------------------------------------------------- nsys reports

def test_export_nsys_rep_without_nsys(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("HILSIM_NSYS", raising=False)
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\0")
    with pytest.raises(HilsimError, match="needs 'nsys', which is not installed"):
        export_nsys_rep(report)


def test_cupti_recorder_finish_writes_importable_records(tmp_path):
    """The backend's own writer path (CuptiRecorder.finish) without CUPTI: synthetic records."""
    from hilsim.agent.cupti_launch import CuptiRecorder

    out = tmp_path / "rec.jsonl"
    recorder = CuptiRecorder(str(out), ["train.py", "--x"])
    recorder.kernels += [{"kind": "kernel", "name": "k", "start": 10, "end": 30,
                          "correlation_id": 1}]
    recorder.calls += [{"kind": "runtime", "start": 1, "end": 2, "correlation_id": 1,
                        "thread_id": 5},
                       {"kind": "runtime", "start": 3, "end": 4, "correlation_id": 99,
                        "thread_id": 5}]
    recorder.push("outer")
    recorder.pop()
    recorder.finish(False, "stopped by SIGINT")
    recorder.finish(True)  # a later normal finish must not hide the interruption
    header, kernels, runtime, ranges = read_cupti_records(out)
    assert header["complete"] is False and header["reason"] == "stopped by SIGINT"
    assert len(runtime) == 1 and len(ranges) == 1  # only the call of a recorded kernel
    bundle = bundle_from_cupti_records(out)
    assert bundle.n_launches == 1 and bundle.manifest["complete"] is False
