"""A bundle is read only as its manifest describes it.

Each case tampers a real bundle (imported from the nsys SQLite fixture) and, where an
attacker would, re-signs it (fresh sha256, sizes and manifest digest), then runs
``hilsim plan`` on it: exit 2, one stderr line naming the file, no plan written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hilsim.cli.main import main
from hilsim.core.bundle import manifest_digest, read_bundle, write_table
from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs
from tests.reliability_inputs import lying_row_count, lying_statistics


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bundle") / "b"
    assert main(["import", str(inputs.SQLITE), "-o", str(folder)]) == 0
    return folder


@pytest.fixture
def bundle(original, tmp_path) -> Path:
    copy = tmp_path / "b"
    shutil.copytree(original, copy)
    return copy


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def resign(folder: Path, data: dict | None = None, files: list[str] | None = None) -> None:
    """Write the manifest with the files' real sha256/size and a fresh digest."""
    data = manifest(folder) if data is None else data
    names = files if files is not None else list(data["files"])
    data["files"] = {
        name: {"sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest(),
               "bytes": (folder / name).stat().st_size}
        for name in names
    }
    data["digest"] = manifest_digest(data)
    (folder / "manifest.json").write_text(json.dumps(data))


def refused(capsys, folder: Path, *words: str) -> str:
    plan = folder.parent / "plan.json"
    code = main(["plan", str(folder), "-m", "random", "-o", str(plan)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    for word in words:
        assert word in err[0], err
    assert not plan.exists()
    return err[0]


def test_untampered_bundle_plans(capsys, bundle):
    assert main(["plan", str(bundle), "-m", "random", "-o", str(bundle.parent / "p.json")]) == 0


# --------------------------------------------- files the manifest does not list; its digest

def test_unlisted_metrics_refused(capsys, bundle):
    pq.write_table(pa.table({"launch_id": [0, 1], "m": [1.0, 2.0]}), bundle / "metrics.parquet")
    refused(capsys, bundle, "metrics.parquet", "not listed")


def test_regions_dropped_from_the_listing_refused(capsys, bundle):
    resign(bundle, files=["launches.parquet"])
    refused(capsys, bundle, "regions.parquet", "not listed")


def test_unlisted_microbench_refused(capsys, bundle):
    (bundle / "microbench.json").write_text("[]")
    refused(capsys, bundle, "microbench.json", "not listed")


def test_manifest_fact_edited_without_digest_refused(capsys, bundle):
    data = manifest(bundle)
    data["device"]["name"] = "NVIDIA H100"
    (bundle / "manifest.json").write_text(json.dumps(data))
    refused(capsys, bundle, "manifest.json", "digest differs")


def test_manifest_without_digest_refused(capsys, bundle):
    data = manifest(bundle)
    del data["digest"]
    (bundle / "manifest.json").write_text(json.dumps(data))
    refused(capsys, bundle, "manifest.json", "no digest")


# -------------------------------------------------------- row counts checked before reading

def test_tiny_file_of_millions_of_rows_refused_before_reading(capsys, bundle):
    n = 4_000_000
    table = pa.table({
        "launch_id": np.zeros(n, dtype=np.int64),
        "name": pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), ["k"]),
        "duration_ns": np.ones(n, dtype=np.int64),
    })
    pq.write_table(table, bundle / "launches.parquet", compression="zstd")
    del table
    data = manifest(bundle)
    data["n_launches"] = n
    resign(bundle, data)
    assert (bundle / "launches.parquet").stat().st_size < 200_000
    began = time.perf_counter()
    refused(capsys, bundle, "launches.parquet", "max_rows_per_byte", "--limit")
    assert time.perf_counter() - began < 5


def test_row_groups_holding_more_rows_than_the_footer_says_refused(capsys, bundle):
    """The memory guard reads the footer's row count: a file-level count below what its
    row groups hold (which the reader materialises) is refused before any row is read."""
    lying_row_count(bundle / "launches.parquet", 100)
    data = manifest(bundle)
    data["n_launches"] = 100
    resign(bundle, data)
    refused(capsys, bundle, "launches.parquet", "footer says 100 rows", "row groups hold 1106")


# ------------------------------------------------ footer statistics are checked against pages

def _durations_two_values(folder: Path) -> None:
    """Every launch 1000 ns long but the odd ones, 987654 ns."""
    def mutate(frame: pd.DataFrame) -> pd.DataFrame:
        durations = np.full(len(frame), 1000, dtype=np.int64)
        durations[1::2] = 987_654
        return frame.assign(duration_ns=durations)

    frame = pq.read_table(folder / "launches.parquet").to_pandas()
    write_table(mutate(frame), folder / "launches.parquet")
    resign(folder)


def test_lying_footer_statistics_refused(capsys, bundle):
    """A footer whose statistics say a column holds one value while its pages hold others
    is one line naming the first row that differs (the column is never taken from them)."""
    _durations_two_values(bundle)
    lying_statistics(bundle / "launches.parquet", "duration_ns", 1000, 987_654)
    resign(bundle)
    refused(capsys, bundle, "launches.parquet", "row 1: column duration_ns holds 987654",
            "statistics say every row holds 1000")
    with pytest.raises(HilsimError, match="statistics"):
        read_bundle(bundle, columns=["duration_ns"])


def test_true_footer_statistics_give_the_constant_column(bundle):
    """A column the footer truthfully says is constant reads as that value (not decoded
    into the frame: a read-only broadcast view)."""
    write_table(pq.read_table(bundle / "launches.parquet").to_pandas()
                .assign(duration_ns=np.int64(1000)), bundle / "launches.parquet")
    resign(bundle)
    durations = read_bundle(bundle).launches["duration_ns"].to_numpy()
    assert (durations == 1000).all() and not durations.flags.writeable


# ---------------------------------------------------------- manifest facts and column types

def _rewrite_launches(folder: Path, mutate) -> None:
    frame = pq.read_table(folder / "launches.parquet").to_pandas()
    pq.write_table(pa.Table.from_pandas(mutate(frame), preserve_index=False),
                   folder / "launches.parquet")
    resign(folder)


def test_wrong_n_launches_refused(capsys, bundle):
    data = manifest(bundle)
    data["n_launches"] = 1000
    resign(bundle, data)
    refused(capsys, bundle, "launches.parquet", "1106 rows", "n_launches 1000")


def test_negative_bytes_refused(capsys, bundle):
    data = manifest(bundle)
    data["files"]["launches.parquet"]["bytes"] = -1
    data["digest"] = manifest_digest(data)
    (bundle / "manifest.json").write_text(json.dumps(data))
    refused(capsys, bundle, "manifest.json", "bytes >= 0")


def test_another_bundles_launches_refused(capsys, bundle, tmp_path):
    other = tmp_path / "other"
    assert main(["import", str(inputs.NSYS_CSV), "-o", str(other)]) == 0
    shutil.copyfile(other / "launches.parquet", bundle / "launches.parquet")
    resign(bundle)
    refused(capsys, bundle, "launches.parquet", "n_launches 1106")


@pytest.mark.parametrize(
    "mutate,words",
    [
        (lambda f: f.assign(launch_id=f["launch_id"].astype(float)), "launch_id must be integers"),
        (lambda f: f.assign(start_ns=f["start_ns"].astype(str)), "start_ns must be integers"),
        (lambda f: f.assign(grid_x=f["grid_x"].astype(float)), "grid_x must be integers"),
        (lambda f: f.assign(name=f["name"].cat.codes), "name must be text"),
        (lambda f: f.assign(duration_ns=f["duration_ns"].astype("uint64")),
         "duration_ns must be signed integers"),
        (lambda f: f.assign(grid_x=f["grid_x"].astype("UInt64")), "grid_x must be signed"),
        (lambda f: f.assign(launch_id=f["launch_id"].astype("uint32")),
         "launch_id must be signed"),
    ],
)
def test_column_types_checked(capsys, bundle, mutate, words):
    _rewrite_launches(bundle, mutate)
    refused(capsys, bundle, "launches.parquet", words)


def test_infinite_metrics_refused(capsys, bundle):
    pq.write_table(pa.table({"launch_id": np.arange(3), "m": [np.inf] * 3}),
                   bundle / "metrics.parquet")
    resign(bundle, files=[*manifest(bundle)["files"], "metrics.parquet"])
    refused(capsys, bundle, "metrics.parquet", "not finite")


# -------------------------------------------------------- malformed manifest and microbench

def test_manifest_device_list_refused(capsys, bundle):
    data = manifest(bundle)
    data["device"] = ["A100"]
    resign(bundle, data)
    refused(capsys, bundle, "manifest.json", "'device' must be a JSON object")


def test_non_utf8_microbench_refused(capsys, bundle):
    (bundle / "microbench.json").write_bytes(b'[{"name": "\xff"}]')
    resign(bundle, files=[*manifest(bundle)["files"], "microbench.json"])
    refused(capsys, bundle, "microbench.json", "not UTF-8")


def test_deeply_nested_manifest_refused(capsys, bundle):
    (bundle / "manifest.json").write_text('{"schema": ' + "[" * 50_000 + "]" * 50_000 + "}")
    refused(capsys, bundle, "manifest.json", "nested too deeply")


def test_read_back_of_a_fresh_bundle_is_unchanged(original):
    bundle = read_bundle(original)
    assert bundle.n_launches == 1106
    assert isinstance(bundle.launches["name"].dtype, pd.CategoricalDtype)


# ------------------------------------------------------------ buffers handed to Arrow

def test_parquet_bytes_are_arrow_memory(bundle, monkeypatch):
    """The verified table bytes Arrow decodes are Arrow-allocated, not a Python ``bytes``:
    Arrow's worker threads may release the last reference after the read returned, and a
    buffer wrapping a Python object takes the GIL there; during interpreter teardown (a
    command failing right after a read) that aborted the process with exit 134."""
    import hilsim.core.bundle as module

    seen: list[object] = []
    real = module._parquet_footer

    def spy(path, data, expected=None):
        seen.append(data)
        return real(path, data, expected)

    monkeypatch.setattr(module, "_parquet_footer", spy)
    read_bundle(bundle)
    assert seen and all(isinstance(d, pa.Buffer) and d.is_mutable for d in seen), seen


# ---------------------------------------------------------- memory before rows

def test_more_launches_than_memory_refused_before_reading(capsys, bundle, monkeypatch):
    """A dense bundle whose launches would not fit in the memory this process may allocate
    is one line before any row is read (instead of the kernel killing the command)."""
    from hilsim.core import limits

    n = 1_000_000
    table = pa.table({
        "launch_id": np.arange(n, dtype=np.int64),
        "name": pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), ["k"]),
        "kernel": pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), ["k"]),
        "duration_ns": np.ones(n, dtype=np.int64),
    })
    pq.write_table(table, bundle / "launches.parquet", compression="zstd")
    data = manifest(bundle)
    data["n_launches"] = n
    resign(bundle, data)
    monkeypatch.setenv("HILSIM_MAX_ROWS_PER_BYTE", "100000")
    monkeypatch.setattr(limits, "memory_available", lambda: 100 * 2**20)
    refused(capsys, bundle, "launches.parquet", "1000000 launches need about 0.1 GiB",
            "may allocate 0.1 GiB")
    monkeypatch.setattr(limits, "memory_available", lambda: 4 * 2**30)
    plan = bundle.parent / "plan.json"
    assert main(["plan", str(bundle), "-m", "random", "-o", str(plan)]) == 0


def test_memory_available_follows_the_address_space_limit() -> None:
    import subprocess
    import sys

    script = (
        "import resource\n"
        "from hilsim.core.limits import memory_available\n"
        "statm = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "cap = statm + 300 * 2**20\n"
        "resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))\n"
        "free = memory_available()\n"
        "print(free <= 300 * 2**20 and free > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "True", out.stderr
