"""`hilsim agent profile` end to end with stand-in nsys / ncu replaying real tool output.

The stand-ins (tests/data/agent/nsys, ncu) run the real workload command and replay the
recorded Nsight Systems SQLite export and Nsight Compute raw CSV; no GPU is used.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hilsim.agent import ncu as ncu_mod
from hilsim.agent.profile import choose_backend
from hilsim.agent.tools import Tool, python_target

from hilsim.cli.main import main
from hilsim.core.bundle import read_bundle
from hilsim.formats.nsys_sqlite import bundle_from_nsys_sqlite

DATA = Path(__file__).parent / "data"
SQLITE = DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
RAW_CSV = DATA / "ncu" / "decodebench_flashinfer_b1_ctx4k_raw_2025.csv"
WORKLOAD = DATA / "agent" / "workload.py"
N_LAUNCHES = 1106


def _install(bin_dir: Path, name: str) -> None:
    text = (DATA / "agent" / name).read_text()
    target = bin_dir / name
    target.write_text(f"#!{sys.executable}\n" + text.split("\n", 1)[1])
    target.chmod(0o755)


@pytest.fixture()
def fake_tools(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _install(bin_dir, "nsys")
    _install(bin_dir, "ncu")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("HILSIM_NSYS", "HILSIM_NCU", "FAKE_NSYS_NO_EXPORT", "FAKE_NSYS_EXPORT_FAIL",
                "FAKE_NCU_PERM", "FAKE_NCU_LAUNCHES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(SQLITE))
    monkeypatch.setenv("FAKE_NCU_CSV", str(RAW_CSV))
    return bin_dir


@pytest.fixture(scope="module")
def light_launches():
    return bundle_from_nsys_sqlite(SQLITE).launches


def _launch_list(launches, path: Path) -> Path:
    entries = [
        {"name": str(r.name), "grid": [int(r.grid_x), int(r.grid_y), int(r.grid_z)],
         "block": [int(r.block_x), int(r.block_y), int(r.block_z)]}
        for r in launches.itertuples()
    ]
    path.write_text(json.dumps(entries))
    return path


def profile(capsys, out: Path, *options: str, workload_args: tuple[str, ...] = ()):
    code = main(["agent", "profile", "-o", str(out), "--no-probe", *options, "--",
                 sys.executable, str(WORKLOAD), *workload_args])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.slow
def test_full_profile_with_matching_detailed_pass(fake_tools, tmp_path, capsys, light_launches,
                                                  monkeypatch):
    monkeypatch.setenv("FAKE_NCU_LAUNCHES", str(_launch_list(light_launches, tmp_path / "l.json")))
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--detailed-first", "3", "--measure-overhead")
    assert code == 0, err
    assert "light backend: nsys" in err
    assert f"{N_LAUNCHES} launches (nsys)" in err  # the real count, not "None"
    bundle = read_bundle(out)
    manifest = bundle.manifest
    assert bundle.n_launches == N_LAUNCHES and manifest["complete"] is True
    assert manifest["workload"]["argv"] == [sys.executable, str(WORKLOAD)]
    assert manifest["workload"]["exit_code"] == 0 and manifest["workload"]["wall_s"] > 0
    light, detailed = manifest["profilers"]
    assert light["name"] == "nsys" and light["backend"] == "nsys"
    assert light["command"][1:7] == ["profile", "--trace=cuda,nvtx", "--sample=none",
                                     "--cpuctxsw=none", "--cuda-graph-trace=node", "-o"]
    assert light["version"] == "2021.5.2.53"  # what the export records
    assert detailed["version"] == "2024.3.2.0"
    assert "--launch-count" in detailed["command"] and "--clock-control" in detailed["command"]
    command = detailed["command"]
    assert command[command.index("--cache-control") + 1] == "none"
    assert command[command.index("--clock-control") + 1] == "none"
    assert detailed["options"]["cache_control"] == "none"
    assert detailed["import_command"][-5:] == ["--csv", "--page", "raw", "--print-units",
                                               "base"]
    assert detailed["match"]["mismatched"] == 0 and detailed["match"]["joined"] == 3
    assert bundle.metrics is not None
    assert bundle.metrics["launch_id"].tolist() == [0, 1, 2]
    assert "gpu__time_duration.sum" in bundle.metrics.columns
    assert manifest["overhead"]["bare_wall_s"] > 0 and manifest["overhead"]["ratio"] > 0
    assert manifest["overhead"]["warm_up_wall_s"] > 0  # the ratio is against a warm run
    cost = detailed["cost"]
    assert cost["launches_profiled"] == detailed["match"]["ncu_launches"]
    assert cost["baseline_wall_s"] == manifest["overhead"]["bare_wall_s"]
    assert cost["detailed_wall_s"] == pytest.approx(detailed["run"]["wall_s"], abs=1e-6)
    per = max(0.0, cost["detailed_wall_s"] - cost["baseline_wall_s"]) / cost["launches_profiled"]
    assert cost["s_per_detailed_launch"] == pytest.approx(per, abs=1e-6)
    assert cost["detailed_all_estimate_s"] == pytest.approx(
        cost["baseline_wall_s"] + per * N_LAUNCHES, abs=1e-2)
    assert "--detailed-all would take about" in err
    assert bundle.regions is not None and len(bundle.regions) == 107  # NVTX from the export


@pytest.mark.slow
def test_detailed_mismatch_is_reported_not_joined(fake_tools, tmp_path, capsys):
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--detailed-first", "2")
    assert code == 0, err
    assert "disagree with the light pass" in err
    bundle = read_bundle(out)
    match = bundle.manifest["profilers"][1]["match"]
    assert match["mismatched"] == 2 and match["joined"] == 0
    first = match["mismatches"][0]
    assert first["launch_id"] == 0 and "PersistentVariableLengthMergeStatesKernel" in first[
        "ncu_kernel"]
    assert "EigenMetaKernel" in first["light_kernel"]
    assert bundle.metrics is None


@pytest.mark.slow
def test_detailed_launches_from_plan_keeps_only_requested(fake_tools, tmp_path, capsys,
                                                          light_launches, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_LAUNCHES", str(_launch_list(light_launches, tmp_path / "l.json")))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"samples": [{"launch_id": 5}, {"launch_id": 9}]}))
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--detailed-launches", str(plan))
    assert code == 0, err
    bundle = read_bundle(out)
    assert bundle.metrics["launch_id"].tolist() == [5, 9]
    command = bundle.manifest["profilers"][1]["command"]
    assert command[command.index("--launch-skip") + 1] == "5"
    assert command[command.index("--launch-count") + 1] == "5"


@pytest.mark.slow
def test_workload_failure_keeps_launches_marked_incomplete(fake_tools, tmp_path, capsys):
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--detailed-first", "2", workload_args=("--exit", "3"))
    assert code == 1
    assert "marked incomplete" in err
    bundle = read_bundle(out)
    assert bundle.n_launches == N_LAUNCHES
    assert bundle.manifest["complete"] is False
    assert bundle.manifest["workload"]["exit_code"] == 3
    assert bundle.manifest["profilers"][1]["skipped"] == "light pass incomplete"


@pytest.mark.slow
def test_timeout_keeps_launches_marked_incomplete(fake_tools, tmp_path, capsys):
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--timeout", "1", workload_args=("--sleep", "30"))
    assert code == 1, err
    bundle = read_bundle(out)
    work = bundle.manifest["workload"]
    assert work["timed_out"] is True and work["stopped_with"] == "SIGINT"
    assert work["wall_s"] < 20
    assert bundle.manifest["complete"] is False and bundle.n_launches == N_LAUNCHES


@pytest.mark.slow
def test_ncu_permission_error_is_one_line(fake_tools, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_PERM", "1")
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--detailed-first", "2")
    assert code == 2
    line = [ln for ln in err.splitlines() if ln.startswith("hilsim: error:")]
    assert len(line) == 1
    assert "ERR_NVGPUCTRPERM" in line[0] and "NVreg_RestrictProfilingToAdminUsers=0" in line[0]
    assert "without metrics" in line[0]
    assert read_bundle(out).metrics is None  # the light level is still written


@pytest.mark.slow
def test_nsys_export_failure_says_so(fake_tools, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_EXPORT_FAIL", "1")
    out = tmp_path / "run.bundle"
    code, err = profile(capsys, out, "--backend", "nsys")
    assert code == 2
    assert "nsys export --type sqlite' failed" in err
    assert (tmp_path / "run.bundle.nsys-rep").is_file()
    assert not out.exists()


def test_missing_ncu_is_clear(fake_tools, tmp_path, capsys):
    (fake_tools / "ncu").unlink()
    code, err = profile(capsys, tmp_path / "b", "--detailed-first", "2")
    assert code == 2 and "ncu not on PATH" in err


def test_no_gpu_is_clear_error(fake_tools, tmp_path, capsys, monkeypatch):
    from hilsim.core.errors import HilsimError

    def no_gpu(index: int = 0, tools: bool = True):
        raise HilsimError("agent probe: no usable NVIDIA GPU: nvml: NVML could not start")

    monkeypatch.setattr("hilsim.agent.probe.probe_device", no_gpu)
    code = main(["agent", "profile", "-o", str(tmp_path / "b"), "--", sys.executable,
                 str(WORKLOAD)])
    err = capsys.readouterr().err
    assert code == 2 and "no usable NVIDIA GPU" in err


# ---------------------------------------------------------------- backend selection

def _tools(nsys=True, export=True, cupti=False, torch=False, ncu=True, injection=False):
    tools = {
        "nsys": Tool("nsys", nsys, "2024.6", "/x/nsys", None if nsys else "nsys not on PATH"),
        "ncu": Tool("ncu", ncu, "2024.3", "/x/ncu"),
        "cupti": Tool("cupti", cupti or injection,
                      reason=None if cupti or injection else "cupti-python not installed"),
        "torch": Tool("torch", torch, reason=None if torch else "torch not installed"),
    }
    tools["nsys"].extra["export"] = export
    tools["cupti"].extra.update(injection=injection, in_process=cupti,
                                injection_detail="CUPTI API 130001" if injection
                                else "CUPTI not found")
    return tools


def test_auto_prefers_nsys_then_cupti_then_torch():
    py = ["python", "train.py"]
    assert choose_backend("auto", py, _tools())[0] == ["nsys", ]
    order, reason = choose_backend("auto", py, _tools(export=False, cupti=True, torch=True))
    assert order == ["cupti", "torch"] and "nsys export does not work" in reason
    assert choose_backend("auto", py, _tools(nsys=False, torch=True))[0] == ["torch"]
    assert choose_backend("auto", py, _tools(cupti=True))[0] == ["nsys", "cupti"]
    with pytest.raises(Exception, match="no usable light profiler"):
        choose_backend("auto", ["./a.out"], _tools(nsys=False, cupti=True, torch=True))
    with pytest.raises(Exception, match="needs a Python workload"):
        choose_backend("cupti", ["./a.out"], _tools(cupti=True))
    with pytest.raises(Exception, match="--backend torch: torch not installed"):
        choose_backend("torch", py, _tools())


def test_native_programs_get_the_cupti_injection_library():
    """With the injection library buildable, cupti runs native programs: asked for by name,
    and picked by auto when nsys is absent; without it, the error says what is missing."""
    native = ["./a.out", "--n", "3"]
    assert choose_backend("cupti", native, _tools(injection=True))[0] == ["cupti"]
    order, reason = choose_backend("auto", native, _tools(nsys=False, injection=True))
    assert order == ["cupti"] and "nsys not on PATH" in reason
    assert choose_backend("auto", native, _tools(injection=True))[0] == ["nsys", "cupti"]
    with pytest.raises(Exception, match="no CUPTI injection library for native programs: "
                                        "CUPTI not found"):
        choose_backend("cupti", native, _tools(cupti=True))
    with pytest.raises(Exception, match="torch: the workload is not a Python program"):
        choose_backend("auto", native, _tools(nsys=False, torch=True))


def test_cupti_mode_by_workload_and_variable(monkeypatch):
    from hilsim.agent.backends.base import ProfileOptions
    from hilsim.agent.backends.cupti import cupti_mode, injection_argv

    monkeypatch.delenv("HILSIM_CUPTI_MODE", raising=False)
    both = _tools(cupti=True, injection=True)["cupti"]
    opts = ProfileOptions(command=["python", "train.py"], out=Path("b"))
    assert cupti_mode(opts, both)[0] == "injection"
    assert cupti_mode(opts, _tools(cupti=True)["cupti"])[0] == "in-process"
    opts.nvtx_modules = ["model:step"]
    assert cupti_mode(opts, both) == ("in-process", "--nvtx-module ranges are recorded in-process")
    monkeypatch.setenv("HILSIM_CUPTI_MODE", "injection")
    with pytest.raises(Exception, match="--nvtx-module needs the in-process"):
        cupti_mode(opts, both)
    native = ProfileOptions(command=["./app"], out=Path("b"))
    monkeypatch.setenv("HILSIM_CUPTI_MODE", "in-process")
    with pytest.raises(Exception, match="in-process needs a Python workload"):
        cupti_mode(native, both)
    monkeypatch.setenv("HILSIM_CUPTI_MODE", "fast")
    with pytest.raises(Exception, match="must be one of injection, in-process"):
        cupti_mode(native, both)
    assert injection_argv(["train.py", "--lr", "1"]) == [sys.executable, "train.py", "--lr", "1"]
    assert injection_argv(["python3", "-u", "-m", "pkg", "a"])[1:] == ["-u", "-m", "pkg", "a"]
    assert injection_argv(["./app", "x"]) == ["./app", "x"]


def test_records_picked_by_process(tmp_path):
    from hilsim.agent.backends.cupti import pick_records
    from hilsim.agent.runner import RunResult

    run = RunResult(["./app"], 3, 0.1)
    with pytest.raises(Exception, match="wrote no records .*exited with code 3"):
        pick_records(tmp_path, run)
    for pid, kernels, error in ((11, 5, None), (12, 40, None), (13, 0, "CUPTI refused")):
        head = {"schema": "hilsim.cupti-records/1", "kind": "header", "pid": pid,
                "counts": {"kernel": kernels}, "error": error}
        (tmp_path / f"light.{pid}.cupti.jsonl").write_text(json.dumps(head) + "\n")
    chosen, others = pick_records(tmp_path, run)
    assert chosen.name == "light.12.cupti.jsonl"
    assert sorted(o["pid"] for o in others) == [11, 13]
    for pid in (11, 12):
        (tmp_path / f"light.{pid}.cupti.jsonl").unlink()
    with pytest.raises(Exception, match=r"could not start .*process 13, exit code 3.*refused"):
        pick_records(tmp_path, run)


@pytest.mark.slow
def test_auto_with_real_stand_ins_on_path(fake_tools, monkeypatch):
    from hilsim.agent.tools import all_tools

    tools = all_tools()
    assert tools["nsys"].usable and tools["nsys"].version == "2024.6.2.225-246235244400v0"
    assert tools["ncu"].version == "2024.3.2.0"
    assert choose_backend("auto", ["python", "x.py"], tools)[0][0] == "nsys"
    monkeypatch.setenv("FAKE_NSYS_NO_EXPORT", "1")
    tools = all_tools()
    assert tools["nsys"].extra["export"] is False
    if not (tools["cupti"].usable or tools["torch"].usable):
        with pytest.raises(Exception, match="nsys export does not work"):
            choose_backend("auto", ["python", "x.py"], tools)


def test_python_target_forms():
    t = python_target(["python3", "-u", "-X", "dev", "train.py", "--lr", "1"])
    assert (t.mode, t.target, t.args, t.interpreter_options) == (
        "script", "train.py", ["--lr", "1"], ["-u", "-X", "dev"])
    t = python_target(["python", "-m", "pkg.main", "a"])
    assert (t.mode, t.target, t.args) == ("module", "pkg.main", ["a"])
    assert python_target(["train.py"]).interpreter == sys.executable
    assert python_target(["./a.out"]) is None and python_target(["python", "-c", "x"]) is None
    argv = python_target(["python", "-m", "pkg.main", "a"]).launcher_argv(
        "hilsim.agent.cupti_launch", ["--out", "r"])
    assert argv[-6:] == ["--out", "r", "--", "-m", "pkg.main", "a"]


def test_selection_options(tmp_path):
    assert ncu_mod.selection(5, None, False).as_dict()["launch_count"] == 5
    sel = ncu_mod.selection(None, "40, 7,12", False)
    assert (sel.skip, sel.count, sel.wanted) == (7, 34, [7, 12, 40])
    assert ncu_mod.selection(None, None, True).count is None
    with pytest.raises(Exception, match="give one of"):
        ncu_mod.selection(3, None, True)
    assert "smsp__inst_executed.sum" in ncu_mod.DEFAULT_METRICS
    assert "gpu__cycles_elapsed.max" in ncu_mod.DEFAULT_METRICS
    assert len(set(ncu_mod.DEFAULT_METRICS)) == len(ncu_mod.DEFAULT_METRICS)


def test_permission_detection_on_real_message():
    text = ("==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not "
            "have permission to access NVIDIA GPU Performance Counters on the target device 0.")
    with pytest.raises(Exception) as info:
        ncu_mod.check_permission(text)
    assert "\n" not in str(info.value) and "root" in str(info.value)
    ncu_mod.check_permission("==PROF== Disconnected")


def test_shutil_which_finds_stand_ins(fake_tools):
    assert shutil.which("nsys").startswith(str(fake_tools))


def test_detailed_cost_by_hand():
    """200 launches under ncu took 110 s against a 10 s bare run: 0.5 s per launch, so
    all 50,000 launches would take 10 + 25,000 s."""
    cost = ncu_mod.detailed_cost(110.0, 10.0, 200, 50_000)
    assert cost["s_per_detailed_launch"] == 0.5
    assert cost["detailed_all_estimate_s"] == 25_010.0
    assert ncu_mod.detailed_cost(5.0, 10.0, 0, 10)["s_per_detailed_launch"] is None


def test_nsys_traces_cuda_graph_nodes() -> None:
    """A replayed CUDA graph must give one row per kernel, as ncu/CUPTI see it."""
    from hilsim.agent.backends.nsys import NSYS_PROFILE_ARGS

    assert "--cuda-graph-trace=node" in NSYS_PROFILE_ARGS


def test_ncu_keeps_the_workloads_caches_and_collects_the_warm_state_counters() -> None:
    """ncu's default (``--cache-control all``) flushes every cache before each profiled
    launch: the detailed pass passes ``none`` unless asked, and collects the counters the
    warm-state placement reads."""
    from hilsim.agent.backends.base import ProfileOptions
    from hilsim.analyzer.warmstate import MISS_METRICS

    from hilsim.core.errors import HilsimError

    sel = ncu_mod.DetailedSelection("first", 0, 3)
    argv = ncu_mod.profile_command("ncu", Path("rep"), sel, ["m"], ["prog"])
    assert argv[argv.index("--cache-control") + 1] == "none"
    assert argv[argv.index("--clock-control") + 1] == "none"
    argv = ncu_mod.profile_command("ncu", Path("rep"), sel, ["m"], ["prog"], "all")
    assert argv[argv.index("--cache-control") + 1] == "all"
    with pytest.raises(HilsimError, match="cache control"):
        ncu_mod.profile_command("ncu", Path("rep"), sel, ["m"], ["prog"], "some")
    wanted = {metric for metric, _column in MISS_METRICS}
    assert wanted == {"dram__sectors_read.sum", "lts__t_sectors_lookup_miss.sum"}
    assert wanted <= set(ncu_mod.DEFAULT_METRICS)
    assert ProfileOptions(command=["prog"], out=Path("o")).cache_control == "none"
