"""Fuzz tier: tampered plans through ``evaluate`` / ``export`` and tampered
bundles through ``plan``, plus a few cases through a real ``hilsim`` process."""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilsim.cli.main import main
from hilsim.core.bundle import manifest_digest, read_bundle
from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs
from tests.fuzz.promise import check_bundle, check_no_output, run_cli
from tests.fuzz.strategies import byte_mutations, fuzz_settings, json_values

pytestmark = pytest.mark.fuzz


@cache
def _made() -> tuple[Path, bytes]:
    """A real bundle (nsys SQLite fixture) and a random-sampling plan made on it."""
    folder = Path(tempfile.mkdtemp(prefix="hilsim-fuzz-made-"))
    atexit.register(shutil.rmtree, folder, True)
    bundle = folder / "bundle"
    assert main(["import", str(inputs.SQLITE), "-o", str(bundle)]) == 0
    plan = folder / "plan.json"
    assert main(["plan", str(bundle), "-m", "random", "-p", "fraction=0.04", "-o", str(plan)]) == 0
    return bundle, plan.read_bytes()


_PLAN_KEYS = ("method", "params", "source", "unit", "sampling", "clusters", "samples", "notes",
              "schema")
_SAMPLE_KEYS = ("launch_id", "weight", "cluster", "draws", "name")


@st.composite
def tampered_plans(draw, seed: bytes) -> bytes:
    if draw(st.integers(0, 3)) == 0:
        return draw(byte_mutations(seed))
    data = json.loads(seed)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "sample", "cluster", "source"]))
        value = draw(json_values)
        if where == "top":
            data[draw(st.sampled_from(_PLAN_KEYS))] = value
        elif where == "sample" and isinstance(data.get("samples"), list) and data["samples"]:
            row = draw(st.integers(0, len(data["samples"]) - 1))
            if isinstance(data["samples"][row], dict):
                data["samples"][row][draw(st.sampled_from(_SAMPLE_KEYS))] = value
        elif where == "cluster" and isinstance(data.get("clusters"), list) and data["clusters"]:
            row = draw(st.integers(0, len(data["clusters"]) - 1))
            if isinstance(data["clusters"][row], dict):
                data["clusters"][row][draw(st.sampled_from(["size", "draws", "mean_ns"]))] = value
        elif where == "source" and isinstance(data.get("source"), dict):
            data["source"][draw(st.sampled_from(["n_launches", "sequence_digest"]))] = value
    return json.dumps(data).encode()


@fuzz_settings(70)
@given(st.data(), st.sampled_from(["evaluate", "export"]))
def test_fuzz_tampered_plans(data, command):
    bundle, seed = _made()
    plan_bytes = data.draw(tampered_plans(seed))
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        plan = Path(folder) / "plan.json"
        plan.write_bytes(plan_bytes)
        output = Path(folder) / ("result.json" if command == "evaluate" else "list.g")
        argv = (["evaluate", str(bundle), "--plan", str(plan), "-o", str(output)]
                if command == "evaluate" else ["export", str(plan), "-o", str(output)])
        code, _, _ = run_cli(argv, len(plan_bytes))
        if code == 2:
            check_no_output(output)
        else:
            assert output.exists()
            if command == "evaluate":
                score = json.loads(output.read_text())["score"]
                assert "NaN" not in output.read_text() and "Infinity" not in output.read_text()
                assert score is not None


def _resign(folder: Path) -> None:
    data = json.loads((folder / "manifest.json").read_text())
    if isinstance(data, dict) and isinstance(data.get("files"), dict):
        for name in list(data["files"]):
            item = folder / str(name)
            if item.is_file() and Path(str(name)).name == name:
                data["files"][name] = {"sha256": hashlib.sha256(item.read_bytes()).hexdigest(),
                                       "bytes": item.stat().st_size}
        data["digest"] = manifest_digest(data)
    (folder / "manifest.json").write_text(json.dumps(data))


_MANIFEST_KEYS = ("schema", "device", "files", "n_launches", "profilers", "source", "digest",
                  "complete", "workload")


@fuzz_settings(50)
@given(st.data())
def test_fuzz_tampered_bundles(data):
    original, _ = _made()
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        bundle = Path(folder) / "bundle"
        shutil.copytree(original, bundle)
        target = data.draw(st.sampled_from(["manifest", "launches", "regions", "extra"]))
        if target == "manifest":
            manifest = json.loads((bundle / "manifest.json").read_text())
            manifest[data.draw(st.sampled_from(_MANIFEST_KEYS))] = data.draw(json_values)
            (bundle / "manifest.json").write_text(json.dumps(manifest))
        elif target == "extra":
            name = data.draw(st.sampled_from(["metrics.parquet", "microbench.json"]))
            (bundle / name).write_bytes(data.draw(st.binary(max_size=64)))
        else:
            path = bundle / f"{target}.parquet"
            path.write_bytes(data.draw(byte_mutations(path.read_bytes())))
        if data.draw(st.booleans()):
            _resign(bundle)  # as an attacker would
        plan = Path(folder) / "plan.json"
        size = sum(p.stat().st_size for p in bundle.iterdir())
        code, _, _ = run_cli(["plan", str(bundle), "-m", "random", "-o", str(plan)], size)
        if code == 2:
            check_no_output(plan)
        else:
            check_bundle(bundle)


_STATISTIC_COLUMNS = ("duration_ns", "grid_x", "grid_y", "block_x", "stream", "device")


@fuzz_settings(20)
@given(st.data())
def test_fuzz_lying_footers(data):
    """A launches table whose footer lies (statistics claiming one value for a column
    whose pages hold two, or a file-level row count other than its row groups') is
    refused: never read as the footer says."""
    import pyarrow.parquet as pq

    from hilsim.core.bundle import write_table

    original, _ = _made()
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        bundle = Path(folder) / "bundle"
        shutil.copytree(original, bundle)
        table = bundle / "launches.parquet"
        frame = pq.read_table(table).to_pandas()
        if data.draw(st.booleans()):
            column = data.draw(st.sampled_from(_STATISTIC_COLUMNS))
            # values whose 8 bytes occur once in the footer (no small counts or offsets)
            claimed, other = data.draw(st.lists(st.integers(1 << 40, 1 << 50), min_size=2,
                                                max_size=2, unique=True))
            values = np.full(len(frame), claimed, dtype=np.int64)
            values[data.draw(st.integers(0, len(frame) - 1))] = other
            write_table(frame.assign(**{column: values}), table)
            inputs.lying_statistics(table, column, claimed, other)
            words = "statistics say every row holds"
        else:
            # (a count whose varint is as long as the true one's: 64..8191)
            claimed = data.draw(st.integers(64, 8191).filter(lambda n: n != len(frame)))
            inputs.lying_row_count(table, claimed)
            manifest = json.loads((bundle / "manifest.json").read_text())
            manifest["n_launches"] = claimed
            (bundle / "manifest.json").write_text(json.dumps(manifest))
            words = "row groups hold"
        _resign(bundle)
        plan = Path(folder) / "plan.json"
        size = sum(p.stat().st_size for p in bundle.iterdir())
        code, lines, _ = run_cli(["plan", str(bundle), "-m", "random", "-o", str(plan)], size)
        if code == 0:  # the command read no column the footer lies about
            with pytest.raises(HilsimError, match=words):
                read_bundle(bundle)
        else:
            assert words in lines[0], lines
            check_no_output(plan)


@pytest.mark.parametrize(
    "build",
    [
        lambda folder: inputs.nsys_csv(folder, 1, "1e30"),
        lambda folder: inputs.nsys_csv(folder, double=True),
        lambda folder: inputs.kineto_trace(folder, raw='{"traceEvents": [' + "[" * 5000),
    ],
    ids=["huge-duration", "doubled-rows", "deep-json"],
)
def test_subprocess_cases_keep_the_promise(tmp_path, build):
    """The installed entry point, in its own process: exit code, one line, no traceback."""
    source = build(tmp_path)
    output = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "hilsim.cli.main", "import", str(source), "-o", str(output)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    lines = done.stderr.splitlines()
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr
    if done.returncode == 2:
        assert len(lines) == 1 and lines[0].startswith("hilsim: error: ")
        check_no_output(output)
    else:
        assert all(line.startswith("hilsim: warning: ") for line in lines)
        check_bundle(output)
