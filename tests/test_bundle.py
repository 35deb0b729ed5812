import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hilsim.core.bundle import Bundle, manifest_digest, read_bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches


def small_bundle() -> Bundle:
    frame = pd.DataFrame(
        {
            "name": ["void k<int>(int)", "g", "void k<int>(int)"],
            "duration_ns": [10, 20, 30],
            "grid_x": [4, 1, 4],
            "start_ns": [0, 100, 200],
        }
    )
    metrics = pd.DataFrame({"launch_id": [0, 2], "smsp__inst_executed.sum": [1e6, 2e6]})
    return Bundle(normalize_launches(frame, "t"), metrics=metrics)


def test_roundtrip_keeps_tables_and_digests(tmp_path) -> None:
    bundle = small_bundle()
    path = write_bundle(bundle, tmp_path / "b")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["schema"] == "hilsim.bundle/1"
    assert set(manifest["files"]) == {"launches.parquet", "metrics.parquet"}
    back = read_bundle(path)
    assert back.launches["name"].astype(str).tolist() == [
        "void k<int>(int)",
        "g",
        "void k<int>(int)",
    ]
    assert back.launches["kernel"].astype(str).tolist() == ["k", "g", "k"]
    assert back.launches["grid_x"].tolist() == [4, 1, 4]
    assert back.metrics["smsp__inst_executed.sum"].tolist() == [1e6, 2e6]
    assert back.sequence_digest() == bundle.sequence_digest()
    assert not list(tmp_path.glob(".b.*")), "no temporary folder left behind"


def test_tampered_file_is_reported(tmp_path) -> None:
    path = write_bundle(small_bundle(), tmp_path / "b")
    with open(path / "metrics.parquet", "ab") as handle:
        handle.write(b"x")
    with pytest.raises(HilsimError, match=r"metrics\.parquet: sha256 differs"):
        read_bundle(path)


def test_existing_bundle_is_not_overwritten(tmp_path) -> None:
    path = write_bundle(small_bundle(), tmp_path / "b")
    before = (path / "manifest.json").read_text()
    with pytest.raises(HilsimError, match="already exists"):
        write_bundle(small_bundle(), path)
    assert (path / "manifest.json").read_text() == before


def test_failed_write_leaves_nothing(tmp_path, monkeypatch) -> None:
    import hilsim.core.bundle as module

    def boom(frame, path):
        raise OSError("disk full")

    monkeypatch.setattr(module, "write_table", boom)
    with pytest.raises(OSError):
        write_bundle(small_bundle(), tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


def _rewrite_launches(path, mutate) -> None:
    """Change launches.parquet and fix its digest, to test the validator itself."""
    frame = pq.read_table(path / "launches.parquet").to_pandas()
    frame = mutate(frame)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path / "launches.parquet")
    import hashlib

    manifest = json.loads((path / "manifest.json").read_text())
    digest = hashlib.sha256((path / "launches.parquet").read_bytes()).hexdigest()
    manifest["files"]["launches.parquet"]["sha256"] = digest
    manifest["files"]["launches.parquet"]["bytes"] = (path / "launches.parquet").stat().st_size
    manifest["n_launches"] = len(frame) or manifest["n_launches"]
    manifest["digest"] = manifest_digest(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.assign(launch_id=[0, 0, 2]), r"row 1: duplicate launch_id 0"),
        (lambda f: f.assign(duration_ns=np.array([1, -5, 3])), r"row 1: negative duration_ns"),
        (lambda f: f.drop(columns=["kernel"]), r"missing column\(s\) kernel"),
        (lambda f: f.iloc[:0], r"empty profile"),
    ],
)
def test_validator_names_file_and_row(tmp_path, mutate, message) -> None:
    path = write_bundle(small_bundle(), tmp_path / "b")
    _rewrite_launches(path, mutate)
    with pytest.raises(HilsimError, match=message) as info:
        read_bundle(path)
    assert "launches.parquet" in str(info.value) and "\n" not in str(info.value)


def test_wrong_schema_and_not_a_bundle(tmp_path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(HilsimError, match="not a hilsim bundle"):
        read_bundle(tmp_path / "x")
    (tmp_path / "x" / "manifest.json").write_text('{"schema": "other/2", "files": {}}')
    with pytest.raises(HilsimError, match="expected 'hilsim.bundle/1'"):
        read_bundle(tmp_path / "x")
    (tmp_path / "x" / "manifest.json").write_text('{"schema": ')
    with pytest.raises(HilsimError, match="not valid JSON"):
        read_bundle(tmp_path / "x")


def test_metrics_for_unknown_launch_rejected(tmp_path) -> None:
    bundle = small_bundle()
    bundle.metrics = pd.DataFrame({"launch_id": [0, 7], "m": [1.0, 2.0]})
    path = write_bundle(bundle, tmp_path / "b")
    with pytest.raises(HilsimError, match=r"metrics\.parquet: row 1: launch_id 7 has no launch"):
        read_bundle(path)


def _launches_with_nulls() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "name": ["a", "b", "a", "c"],
            "duration_ns": [10, 20, 30, 40],
            "grid_x": pd.array([4, None, 4, 2], dtype="Int64"),
            "stream": pd.array([None, None, None, None], dtype="Int64"),
            "start_ns": [0, 100, 200, 300],
            "region": ["r", None, "r/s", None],
        }
    )
    return normalize_launches(frame, "t")


def test_read_gives_the_tables_pyarrow_gives(tmp_path) -> None:
    # the one-read verified path (bytes hashed, then parsed; Int64 built from values + mask)
    # returns exactly what pq.read_table(file).to_pandas() returns, nulls included
    bundle = Bundle(
        _launches_with_nulls(),
        metrics=pd.DataFrame({"launch_id": [0, 3], "m": [1.5, np.nan], "k": [1.0, 2.0]}),
        regions=pd.DataFrame(
            {
                "region_id": [0, 1],
                "name": ["r", "s"],
                "path": ["r", "r/s"],
                "depth": [0, 1],
                "start_ns": [0, 150],
                "end_ns": [400, 250],
            }
        ),
    )
    path = write_bundle(bundle, tmp_path / "b")
    back = read_bundle(path)
    unverified = read_bundle(path, verify=False)
    for name, table in (
        ("launches", back.launches),
        ("metrics", back.metrics),
        ("regions", back.regions),
    ):
        expected = pq.read_table(path / f"{name}.parquet").to_pandas()
        if name == "launches":
            for column in ("name", "kernel", "region"):
                expected[column] = expected[column].astype("category")
        pd.testing.assert_frame_equal(table, expected)
        pd.testing.assert_frame_equal(getattr(unverified, name), table)
    assert back.launches["grid_x"].isna().tolist() == [False, True, False, False]
    assert back.launches["stream"].isna().all()
    back.metrics.loc[0, "m"] = 2.5  # the tables are ordinary, writable pandas frames
    back.launches.loc[0, "grid_x"] = 8
    assert back.metrics.loc[0, "m"] == 2.5 and back.launches.loc[0, "grid_x"] == 8


def test_verify_reads_each_file_once(tmp_path, monkeypatch) -> None:
    import hilsim.core.bundle as module

    path = write_bundle(small_bundle(), tmp_path / "b")
    opened: list[str] = []
    real_read = module._read_arrow_buffer

    def read(item: Path, size: int):
        opened.append(item.name)
        return real_read(item, size)

    monkeypatch.setattr(module, "_read_arrow_buffer", read)
    monkeypatch.setattr(module, "_sha256", lambda item: pytest.fail(f"{item} read twice"))
    read_bundle(path)
    assert sorted(opened) == ["launches.parquet", "metrics.parquet"]


def test_read_some_columns_only(tmp_path) -> None:
    """columns=...: the named launch columns plus launch_id, name, kernel, duration_ns;
    the same values as the whole read; plans and scores on it are the whole read's."""
    from hilsim.analyzer import methods
    from hilsim.analyzer.evaluate import score_plan
    from hilsim.analyzer.methods.stem import STEM

    from hilsim.core.schema import LAUNCH_CONFIG_COLUMNS

    path = write_bundle(small_bundle(), tmp_path / "b")
    whole = read_bundle(path)
    some = read_bundle(path, columns=STEM.launch_columns)
    assert list(some.launches.columns) == [
        "launch_id",
        "name",
        "kernel",
        *LAUNCH_CONFIG_COLUMNS,
        "duration_ns",
    ]
    pd.testing.assert_frame_equal(some.launches, whole.launches[some.launches.columns])
    bare = read_bundle(path, columns=())
    assert list(bare.launches.columns) == ["launch_id", "name", "kernel", "duration_ns"]
    assert bare.metrics is not None and bare.sequence_digest() == whole.sequence_digest()
    for name in ("stem", "random", "first-n"):
        method = methods.create(name)
        columns = method.launch_columns
        assert columns is not None
        part = read_bundle(path, columns=columns)
        a, b = method.plan(whole), method.plan(part)
        pd.testing.assert_frame_equal(a.samples, b.samples)
        assert a.clusters == b.clusters
        assert score_plan(b, bare).error == score_plan(a, whole).error


def test_constant_columns_come_from_the_footer_statistics(tmp_path) -> None:
    """A column with one value in every row group is found from the statistics; one that is
    constant within each row group but differs between them, or holds a null, is not."""
    from hilsim.core.bundle import _constant_int_columns

    n = 1000
    table = pa.table({
        "one": pa.array(np.full(n, 7, dtype=np.int64)),
        "per_group": pa.array(np.repeat(np.arange(4, dtype=np.int64), n // 4)),
        "with_null": pa.array([5] * (n - 1) + [None], type=pa.int64()),
        "varies": pa.array(np.arange(n, dtype=np.int64)),
    })
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=n // 4)
    found = _constant_int_columns(pq.read_metadata(path), list(table.column_names))
    assert found == {"one": 7}


def test_a_bundle_read_gives_constant_columns_as_they_were_written(tmp_path) -> None:
    from hilsim.core.bundle import default_manifest

    n = 500
    frame = pd.DataFrame({
        "name": ["k"] * n, "duration_ns": np.arange(n) + 1, "start_ns": np.arange(n) * 10,
        "grid_x": np.arange(n) % 3 + 1, "grid_y": np.ones(n, dtype=np.int64),
    })
    launches = normalize_launches(frame, "t")
    write_bundle(Bundle(launches=launches, manifest=default_manifest()), tmp_path / "b")
    back = read_bundle(tmp_path / "b").launches
    pd.testing.assert_frame_equal(back, launches, check_categorical=False)
    copy = back.copy()
    copy.loc[3, "grid_y"] = 9  # a view of one value is copied on write, never written
    assert int(copy["grid_y"].iloc[3]) == 9 and int(back["grid_y"].iloc[3]) == 1
