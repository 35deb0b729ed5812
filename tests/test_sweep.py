"""hilsim sweep: a real Dask scheduler and two workers on 127.0.0.1 run a
sweep of the shipped examples; an embedded LocalCluster gives the same results; reruns
skip finished tasks; a failing task is a row; bad specs are one line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hilsim.analyzer.sweep import RESULTS, build_tasks, load_spec, read_results, write_results

from hilsim.cli.main import main

SPEC = """
seeds = 2
[[workloads]]
example = "casio-durations"
[[workloads]]
name = "nerf"
path = "{nerf}"
[[methods]]
name = "stem"
params = {{ epsilon = [0.05, 0.1], confidence = 0.95 }}
[[methods]]
name = "random"
params = {{ fraction = 0.002 }}
[[workloads]]
name = "broken"
path = "broken.csv"
[[methods]]
name = "first-n"
"""

#: what the tasks computed (not when, where or how long)
SAME = [
    "task_key",
    "workload",
    "method",
    "label",
    "params",
    "seed",
    "status",
    "message",
    "error",
    "speedup",
    "n_samples",
    "n_clusters",
    "n_launches",
    "truth_ns",
    "estimate_ns",
]


def _spec(tmp_path: Path) -> Path:
    from hilsim.analyzer.examples import EXAMPLES

    nerf = EXAMPLES[1].path(EXAMPLES[1].profile)
    path = tmp_path / "sweep.toml"
    # a profile that is not one: every task of it fails on the worker that reads it
    (tmp_path / "broken.csv").write_text("Start (ns),Duration (ns)\n1,2,3\n")
    path.write_text(SPEC.format(nerf=nerf.as_posix()))
    return path


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
    for proc in reversed(procs):
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory):
    """`dask scheduler` + two `dask worker` processes on loopback; always stopped."""
    folder = tmp_path_factory.mktemp("dask")
    scheduler_file = folder / "scheduler.json"
    common = ["--no-dashboard"]
    procs: list[subprocess.Popen] = []
    log = open(folder / "dask.log", "wb")  # noqa: SIM115 - closed in the finalizer
    try:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--scheduler-file",
                    str(scheduler_file),
                    *common,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=folder,
            )
        )
        deadline = time.monotonic() + 40
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert scheduler_file.exists(), (folder / "dask.log").read_text()
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        "--scheduler-file",
                        str(scheduler_file),
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--name",
                        f"w{i}",
                        "--memory-limit",
                        "0",
                        *common,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=folder,
                )
            )
        from dask.distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
            address = client.scheduler.address
        assert address.startswith("tcp://127.0.0.1:")
        yield address
    finally:
        _stop(procs)
        log.close()


@pytest.mark.slow
def test_sweep_on_scheduler_equals_embedded_and_resumes(dask_cluster, tmp_path, capsys):
    spec = _spec(tmp_path)
    remote, local = tmp_path / "remote", tmp_path / "local"
    assert main(["sweep", str(spec), "-o", str(remote), "--scheduler", dask_cluster]) == 0
    text = capsys.readouterr().out
    assert f"Dask cluster {dask_cluster} (2 workers)" in text
    rows = read_results(remote)
    # 3 workloads x (stem 2 grid points x 2 seeds + random 2 seeds + first-n)
    assert len(rows) == 3 * (4 + 2 + 1)
    assert rows["task_key"].is_unique
    failed = rows[rows["status"] == "failed"]
    # the unreadable profile fails each of its tasks, as rows with the reader's one line,
    # and the sweep went on with the others
    assert set(failed["workload"]) == {"broken"} and len(failed) == 7
    message = failed["message"].iloc[0]
    assert "broken.csv" in message and "\n" not in message
    ok = rows[rows["status"] == "ok"]
    assert len(ok) == 14
    assert (ok["error"] >= 0).all() and (ok["speedup"] >= 1).all()
    assert ok["hilsim_version"].notna().all() and ok["workload_digest"].str.len().eq(64).all()
    stem = ok[ok["method"] == "stem"]
    assert set(stem["label"]) == {"stem(epsilon=0.05)", "stem(epsilon=0.1)"}
    summary = pd.read_csv(remote / "summary.csv")
    assert set(summary["workload"]) == {"casio-durations", "nerf"}
    for workload in ("casio-durations", "nerf"):
        assert (remote / workload / "pareto.png").stat().st_size > 0
        assert (remote / workload / "compare.json").is_file()
    assert "broken.csv" in (remote / "broken" / "compare.json").read_text()

    # the embedded LocalCluster computes the same rows
    assert main(["sweep", str(spec), "-o", str(local), "--workers", "2"]) == 0
    assert "embedded LocalCluster (2 workers)" in capsys.readouterr().out
    pd.testing.assert_frame_equal(read_results(local)[SAME], rows[SAME])

    # a rerun skips every finished task (failed included) and keeps the table as it was
    before = (remote / RESULTS).read_bytes()
    assert main(["sweep", str(spec), "-o", str(remote), "--scheduler", dask_cluster]) == 0
    assert "0 task(s) run (0 failed), 21 already done" in capsys.readouterr().out
    assert read_results(remote).equals(pd.read_parquet(pd.io.common.BytesIO(before)))

    # an interrupted sweep (rows missing) runs only the missing tasks
    dropped = rows[rows["method"] == "random"]["task_key"]
    write_results(remote, rows[~rows["task_key"].isin(dropped)])
    assert main(["sweep", str(spec), "-o", str(remote), "--scheduler", dask_cluster]) == 0
    assert "6 task(s) run (2 failed), 15 already done" in capsys.readouterr().out
    pd.testing.assert_frame_equal(read_results(remote)[SAME], rows[SAME])
    # --retry-failed runs the failed task again (and it fails the same way)
    assert (
        main(["sweep", str(spec), "-o", str(remote), "--scheduler", dask_cluster, "--retry-failed"])
        == 0
    )
    assert "7 task(s) run (7 failed), 14 already done" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("seeds = 2\nbogus = 1\n", "unknown key(s) bogus"),
        ("seeds = 0\n", "seeds: expected a count"),
        ('[[workloads]]\npath = "nope.csv"\n[[methods]]\nname = "stem"\n', "does not exist"),
        (
            '[[workloads]]\nexample = "casio-durations"\n[[methods]]\nname = "nope"\n',
            "unknown method 'nope'",
        ),
        (
            '[[workloads]]\nexample = "casio-durations"\n[[methods]]\nname = "stem"\n'
            "params = { epsilon = [] }\n",
            "empty list",
        ),
        (
            '[[workloads]]\nexample = "casio-durations"\n[[methods]]\nname = "stem"\n'
            "params = { nope = 1 }\n",
            "methods[0]",
        ),
        (
            'simulate = true\n[[workloads]]\nexample = "casio-durations"\n[[methods]]\n'
            'name = "stem"\n',
            "workloads[0]: simulate = true needs 'program'",
        ),
        (
            'simulate = true\n[[workloads]]\nexample = "casio-durations"\nprogram = ["ls"]\n'
            '[[methods]]\nname = "stem"\n',
            "workloads[0]: simulate = true needs 'card' (or the top-level 'cards')",
        ),
        ("seeds = [\n", "not valid TOML"),
    ],
)
def test_bad_spec_is_one_line(tmp_path, capsys, body, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(body)
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(spec) in err
    assert not (tmp_path / "out" / RESULTS).exists()


@pytest.mark.slow
def test_grid_labels_and_task_keys(tmp_path):
    spec = load_spec(_spec(tmp_path))
    stem = spec.methods[0]
    assert [label for label, _ in stem.settings()] == ["stem(epsilon=0.05)", "stem(epsilon=0.1)"]
    assert all(p["confidence"] == 0.95 for _, p in stem.settings())
    tasks = build_tasks(spec)
    assert len({t.key for t in tasks}) == len(tasks) == 21
    assert [t.key for t in build_tasks(spec)] == [t.key for t in tasks]  # stable


def test_importing_the_sweep_leaves_dask_unloaded() -> None:
    """Spec, tasks, summaries and the runner import without dask: it loads when a sweep
    runs on a cluster."""
    code = (
        "import sys; import hilsim.analyzer.sweep; "
        "print('LOADED', [m for m in ('dask', 'distributed') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout


def test_the_report_says_what_was_simulated_and_what_ran(tmp_path: Path) -> None:
    """The lines ``hilsim sweep`` prints after the tables come from the report: one per
    simulated (workload, card, grid point), then what the sweep ran and wrote."""
    import pandas as pd
    from hilsim.analyzer.sweep import SweepOutcome
    from hilsim.analyzer.sweep.report import SweepReport

    simulated = pd.DataFrame([{
        "workload": "ts1", "card": "SM7_QV100", "label": "stem", "runs": 2, "failed": 1,
        "first_failure": "boom", "sim_launches": 3.0, "sim_error": 0.0123,
        "profile_error": float("nan"), "sim_wall_seconds": 12.34}])
    outcome = SweepOutcome(pd.DataFrame(), ran=2, failed=1, skipped=3, workers=1,
                           wall_seconds=5.0, where="here")
    assert SweepReport(outcome, tmp_path, [], simulated).lines() == [
        "simulated ts1 / SM7_QV100 / stem: 2 run(s), 1 failed (boom); 3.0 launches; "
        "error 1.23% simulated vs - on the profile; simulator 12.3 s",
        f"sweep: 2 task(s) run (1 failed), 3 already done, on here, in 5.0 s; "
        f"wrote {tmp_path / RESULTS}",
    ]
    assert SweepReport(outcome, tmp_path, []).lines()[0].startswith("sweep: 2 task(s) run")
