"""read_nsys_sqlite on a real Nsight Systems SQLite export, plus synthetic NVTX cases.

Fixture (tests/data/nsys-sqlite/README.md): the CASIO NeRF workload on an
A100-PCIE-40GB, exported by nsys 2021.5.2 (export schema 2.7.0). Its NVTX ranges
are cuBLAS-domain push/pop ranges (``cublasSgemmEx``) on the main thread.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hilsim.core.errors import HilsimError
from hilsim.core.schema import LAUNCH_COLUMNS, REGION_COLUMNS
from hilsim.formats import nsys_sqlite
from hilsim.formats.nsys_sqlite import (
    _depth_and_path,
    _innermost,
    _nest,
    bundle_from_nsys_sqlite,
    read_nsys_sqlite,
)

DATA = Path(__file__).parent / "data" / "nsys-sqlite"
NERF = DATA / "casio-nerf-a100.nsys.sqlite"
PID = 0x100177E000000  # globalPid of the python process in the fixture


@pytest.fixture(scope="module")
def nerf():
    return read_nsys_sqlite(NERF)


def _one_line_error(path: Path) -> str:
    with pytest.raises(HilsimError) as info:
        read_nsys_sqlite(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


# --------------------------------------------------------------------------- real file


def test_real_launches(nerf) -> None:
    launches = nerf.launches
    assert len(launches) == 1106
    assert list(launches.columns) == list(LAUNCH_COLUMNS)
    assert list(launches["launch_id"]) == list(range(1106))
    starts = launches["start_ns"].to_numpy(dtype=np.int64)
    assert np.all(np.diff(starts) >= 0)
    assert launches["duration_ns"].dtype == np.int64
    assert (launches["duration_ns"] > 0).all()
    assert (launches["device"] == 0).all()
    assert launches["grid_x"].notna().all() and launches["regs"].notna().all()
    assert launches["correlation_id"].is_unique
    assert not launches["name"].astype(str).str.len().eq(0).any()


def test_first_kernel_matches_sql(nerf) -> None:
    with sqlite3.connect(f"file:{NERF}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, "
            "k.registersPerThread, k.streamId, k.start, k.end - k.start, k.correlationId "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
            "ORDER BY k.start LIMIT 1"
        ).fetchone()
    first = nerf.launches.iloc[0]
    assert str(first["name"]) == row[0]
    assert row[0].startswith("void Eigen::internal::EigenMetaKernel<")
    assert str(first["kernel"]) == "EigenMetaKernel"
    got = [first[c] for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")]
    assert got == list(row[1:7]) == [9, 1, 1, 1024, 1, 1]
    assert first["regs"] == row[7] == 26
    assert first["stream"] == row[8]
    assert first["start_ns"] == row[9]
    assert first["duration_ns"] == row[10] == 8512
    assert first["correlation_id"] == row[11]


def test_real_device_and_versions(nerf) -> None:
    device = nerf.device
    assert "A100" in device["name"]
    assert device["sm_count"] == 108
    assert device["compute_capability"] == "8.0"
    assert device["chip"] == "GA100"
    assert device["memory_bytes"] == 42358472704
    assert device["memory_bandwidth"] == 1555200000000
    # CUDA ordinal 0 is the GPU at bus 01:00.0 (TARGET_INFO_GPU.cuDevice == 0, not id 0)
    assert device["uuid"] == "993b9340-8585-3f5c-4cb4-bb2f7de5b8c5"
    assert nerf.schema_version == "2.7.0"
    assert nerf.tool == {
        "name": "nsys",
        "version": "2021.5.2.53",
        "product": "NVIDIA Nsight Systems",
    }


def test_real_regions_and_attribution(nerf) -> None:
    regions = nerf.regions
    assert regions is not None
    assert list(regions.columns) == list(REGION_COLUMNS)
    assert len(regions) == 107
    assert list(regions["region_id"]) == list(range(107))
    assert (regions["depth"] >= 0).all()
    assert (regions["start_ns"] <= regions["end_ns"]).all()
    assert np.all(np.diff(regions["start_ns"].to_numpy()) >= 0)
    assert set(regions["name"]) == {"cublasSgemmEx"}
    region = nerf.launches["region"]
    assert isinstance(region.dtype, pd.CategoricalDtype)
    assert region.notna().sum() == 143
    assert set(region.dropna().astype(str)) == {"cublasSgemmEx"}


def test_real_attribution_matches_brute_force(nerf) -> None:
    """The vectorised rule equals a direct SQL statement of it on the real file."""
    with sqlite3.connect(f"file:{NERF}?mode=ro", uri=True) as conn:
        expected = {
            corr
            for (corr,) in conn.execute(
                "SELECT DISTINCT k.correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
                "AND (r.globalTid & ~16777215) = k.globalPid "
                "JOIN NVTX_EVENTS n ON n.eventType = 59 AND n.globalTid = r.globalTid "
                "AND n.start <= r.start AND r.end <= n.end"
            )
        }
    launches = nerf.launches
    got = set(launches.loc[launches["region"].notna(), "correlation_id"].astype(int))
    assert got == expected


def test_bundle(nerf) -> None:
    bundle = bundle_from_nsys_sqlite(NERF)
    assert bundle.n_launches == 1106
    assert bundle.regions is not None and len(bundle.regions) == 107
    manifest = bundle.manifest
    assert manifest["schema"] == "hilsim.bundle/1"
    assert manifest["device"]["sm_count"] == 108
    (profiler,) = manifest["profilers"]
    assert profiler["name"] == "nsys"
    assert profiler["version"] == "2021.5.2.53"
    assert profiler["export_schema_version"] == "2.7.0"
    assert manifest["source"]["format"] == "sqlite"


def test_bundle_round_trip(tmp_path: Path) -> None:
    from hilsim.core.bundle import read_bundle, write_bundle

    bundle = bundle_from_nsys_sqlite(NERF)
    back = read_bundle(write_bundle(bundle, tmp_path / "b"))
    assert back.n_launches == 1106
    assert back.regions is not None and len(back.regions) == 107
    assert back.launches["region"].notna().sum() == 143


# --------------------------------------------------------------------------- bad inputs


def test_not_sqlite(tmp_path: Path) -> None:
    bad = tmp_path / "profile.sqlite"
    bad.write_text("Start (ns),Duration (ns),Name\n1,2,k\n")
    assert "not a SQLite file" in _one_line_error(bad)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in _one_line_error(tmp_path / "absent.sqlite")


def test_truncated_to_half(tmp_path: Path) -> None:
    data = NERF.read_bytes()
    cut = tmp_path / "half.sqlite"
    cut.write_bytes(data[: len(data) // 2])
    assert "truncated" in _one_line_error(cut)


def test_truncated_without_page_count(tmp_path: Path) -> None:
    """When the header's page count is not trusted SQLite itself finds the damage."""
    data = bytearray(NERF.read_bytes()[: len(NERF.read_bytes()) // 2])
    data[92:96] = b"\xff\xff\xff\xff"  # version-valid-for != change counter
    cut = tmp_path / "half.sqlite"
    cut.write_bytes(bytes(data))
    assert "cannot read SQLite database" in _one_line_error(cut)


def test_sqlite_from_another_tool(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
        conn.execute("INSERT INTO notes VALUES (1, 'hello')")
    conn.close()
    message = _one_line_error(other)
    assert "no kernel launches recorded" in message
    assert "not an Nsight Systems SQLite export" in message


def test_nsys_export_without_kernel_table(tmp_path: Path) -> None:
    db = tmp_path / "cpu-only.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    conn.close()
    assert "no kernel launches recorded" in _one_line_error(db)


# --------------------------------------------------------------------------- synthetic NVTX

_STRINGS = {1: "kA", 2: "kB", 3: "outer", 4: "inner"}


def _make_export(path: Path, kernels, runtime, nvtx) -> Path:
    """A minimal nsys-like export: kernels (start, end, corr, pid), runtime, NVTX rows."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", _STRINGS.items())
        conn.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, "
            "deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
            "demangledName INTEGER, shortName INTEGER, mangledName INTEGER, "
            "registersPerThread INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, "
            "blockX INTEGER, blockY INTEGER, blockZ INTEGER, staticSharedMemory INTEGER, "
            "dynamicSharedMemory INTEGER)"
        )
        conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
            "(?, ?, 0, 7, ?, ?, ?, ?, NULL, 32, 1, 1, 1, 128, 1, 1, 0, 0)",
            kernels,
        )
        conn.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, "
            "globalTid INTEGER, correlationId INTEGER, nameId INTEGER)"
        )
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 0)", runtime)
        conn.execute(
            "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, "
            "text TEXT, globalTid INTEGER, textId INTEGER)"
        )
        conn.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)", nvtx)
    conn.close()
    return path


def test_synthetic_nesting_and_attribution(tmp_path: Path) -> None:
    pid, other_pid = 5 << 24 | 1 << 48, 9 << 24 | 1 << 48
    t1, t2, t9 = pid | 5, pid | 6, other_pid | 9
    kernels = [  # start, end, correlationId, globalPid, demangledName, shortName
        (1000, 1010, 1, pid, 1, 1),  # call on t1 inside outer/inner
        (1020, 1030, 2, pid, 2, 2),  # call on t1 inside outer only
        (1040, 1050, 3, pid, 1, 1),  # call on t2: no push/pop there -> start/end "phase"
        (1060, 1070, 4, pid, 1, 1),  # no runtime row -> no region
        (1080, 1090, 1, other_pid, 2, 2),  # same corr id, other process, call outside ranges
        (990, 995, 5, pid, 1, 1),  # call on t1 after every range (starts first on GPU)
    ]
    runtime = [  # start, end, globalTid, correlationId
        (20, 25, t1, 1),
        (70, 75, t1, 2),
        (30, 31, t2, 3),
        (500, 501, t9, 1),
        (900, 910, t1, 5),
    ]
    nvtx = [  # start, end, eventType, text, globalTid, textId
        (0, 100, 59, None, t1, 3),  # outer (registered string)
        (10, 50, 59, None, t1, 4),  # outer/inner
        (60, 65, 59, "leaf", t1, None),  # outer/leaf, ends before call 2
        (15, 40, 60, "phase", t1, None),  # start/end range of pid (any thread)
        (1, 2, 34, "mark", t1, None),  # marker: ignored
        (200, None, 59, "unclosed", t1, None),  # never popped: ignored
    ]
    db = _make_export(tmp_path / "synthetic.sqlite", kernels, runtime, nvtx)
    profile = read_nsys_sqlite(db)
    regions = profile.regions
    assert list(regions["path"]) == ["outer", "outer/inner", "phase", "outer/leaf"]
    assert list(regions["depth"]) == [0, 1, 0, 1]
    launches = profile.launches
    by_corr = {
        (int(c), int(s)): r
        for c, s, r in zip(
            launches["correlation_id"], launches["start_ns"], launches["region"], strict=True
        )
    }
    assert by_corr[(1, 1000)] == "outer/inner"
    assert by_corr[(2, 1020)] == "outer"
    assert by_corr[(3, 1040)] == "phase"
    assert pd.isna(by_corr[(4, 1060)])
    assert pd.isna(by_corr[(1, 1080)])
    assert pd.isna(by_corr[(5, 990)])
    assert list(launches["start_ns"]) == sorted(s for s, *_ in kernels)
    assert profile.schema_version is None
    assert profile.device == {"cuda_device": 0}


def test_empty_kernel_table(tmp_path: Path) -> None:
    db = _make_export(tmp_path / "empty.sqlite", [], [], [])
    assert "no kernel launches recorded" in _one_line_error(db)


def _random_stack_ranges(rng: np.random.Generator, n_threads: int, n_events: int):
    """Properly nested push/pop ranges per thread from a random push/pop walk."""
    group, start, end = [], [], []
    for thread in range(n_threads):
        stack: list[int] = []
        t = 0
        for _ in range(n_events):
            t += int(rng.integers(0, 3))  # ties happen
            if stack and rng.random() < 0.5:
                begin = stack.pop()
                group.append(thread)
                start.append(begin)
                end.append(t)
            else:
                stack.append(t)
        while stack:
            group.append(thread)
            start.append(stack.pop())
            end.append(t + 1)
    return np.array(group), np.array(start), np.array(end)


def test_vectorised_rule_equals_brute_force() -> None:
    rng = np.random.default_rng(7)
    group, start, end = _random_stack_ranges(rng, n_threads=3, n_events=300)
    n = len(start)
    q_group = rng.integers(0, 4, 2000)  # group 3 has no ranges
    q_start = rng.integers(0, int(end.max()) + 2, 2000)
    q_end = q_start + rng.integers(0, 4, 2000)
    got = _innermost(group, start, end, q_group, q_start, q_end)
    for q in range(len(q_start)):
        inside = np.flatnonzero((group == q_group[q]) & (start <= q_start[q]) & (q_end[q] <= end))
        if len(inside) == 0:
            assert got[q] == -1
        else:
            # innermost: latest start, then shortest; identical ranges may tie
            best = inside[np.lexsort((end[inside], -start[inside]))[0]]
            assert got[q] >= 0
            assert (start[got[q]], end[got[q]]) == (start[best], end[best])
    parent = _nest(group, start, end)
    for i in range(n):
        # containers of i other than ranges identical to it (a twin may be either's parent)
        others = np.flatnonzero(
            (group == group[i])
            & (start <= start[i])
            & (end[i] <= end)
            & ((start != start[i]) | (end != end[i]))
        )
        if parent[i] < 0:
            assert len(others) == 0
        else:
            p = parent[i]
            assert group[p] == group[i] and start[p] <= start[i] and end[i] <= end[p]
            assert not np.any(
                (start[others] > start[p]) | ((start[others] == start[p]) & (end[others] < end[p]))
            )


def test_depth_and_path_follow_parent_chain() -> None:
    group, start, end = _random_stack_ranges(np.random.default_rng(3), n_threads=2, n_events=400)
    parent = _nest(group, start, end)
    names = np.array([f"r{i}" for i in range(len(start))], dtype=object)
    depth, path = _depth_and_path(names, parent)
    assert depth.max() > 3
    for i in range(len(start)):
        chain, j = [], i
        while j >= 0:
            chain.append(names[j])
            j = parent[j]
        assert depth[i] == len(chain) - 1
        assert path[i] == "/".join(reversed(chain))


# --------------------------------------------------------------------------- readers
# Kernel rows are read as integers (names as StringIds ids, resolved once) by ADBC's SQLite
# driver straight into Arrow columns, or through sqlite3 and pandas when a column is not
# all integers: both readers must give the same table.


def _sqlite3_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsys_sqlite, "_adbc_frames", lambda *args: None)


def test_columnar_and_sqlite3_readers_give_the_same_profile(monkeypatch, nerf) -> None:
    assert nsys_sqlite._adbc_frames(NERF, "SELECT 1 AS one", None) is not None  # installed
    _sqlite3_only(monkeypatch)
    by_sqlite3 = read_nsys_sqlite(NERF)
    pd.testing.assert_frame_equal(nerf.launches, by_sqlite3.launches)
    pd.testing.assert_frame_equal(nerf.regions, by_sqlite3.regions)
    assert nerf.device == by_sqlite3.device


def test_names_resolve_as_the_joined_coalesce_did(tmp_path: Path) -> None:
    # demangled name empty, unknown or NULL -> the short name; the oracle is the SQL join
    # the importer used to run per row
    pid = 5 << 24
    db = _make_export(tmp_path / "names.sqlite", [
        (10, 20, 1, pid, 1, 2),  # kA
        (30, 40, 2, pid, 7, 2),  # demangled "" -> kB
        (50, 60, 3, pid, 99, 1),  # demangled unknown id -> kA
        (70, 80, 4, pid, None, 2),  # demangled NULL -> kB
    ], [], [])
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO StringIds VALUES (7, '')")
        oracle = [row[0] for row in conn.execute(
            "SELECT COALESCE(NULLIF(CAST(s0.value AS TEXT), ''), NULLIF(CAST(s1.value AS TEXT), "
            "'')) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s0 ON s0.id = "
            "k.demangledName LEFT JOIN StringIds s1 ON s1.id = k.shortName ORDER BY k.start"
        )]
    conn.close()
    assert oracle == ["kA", "kB", "kA", "kB"]
    launches = read_nsys_sqlite(db).launches
    assert list(launches["name"].astype(str)) == oracle
    assert list(launches["name"].cat.categories) == ["kA", "kB"]
    with sqlite3.connect(db) as conn:  # no id names the last launch: one error naming it
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 99 WHERE start = 70")
    conn.close()
    assert "launch 3: kernel name id not found in StringIds" in _one_line_error(db)


def test_a_column_the_columnar_reader_refuses_is_read_by_sqlite3(monkeypatch, tmp_path) -> None:
    # a REAL cell in an integer column past the first batch: the columnar reader stops and
    # the rows are read again through sqlite3 (which rounds it, as it always did)
    pid = 5 << 24
    kernels = [(100 * i, 100 * i + 10 + i % 3, i, pid, 1 + i % 2, 1 + i % 2) for i in range(3000)]
    db = _make_export(tmp_path / "real_cell.sqlite", kernels, [], [])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 2.5 WHERE start = 250000")
    conn.close()
    readers = []
    original = nsys_sqlite.kernel_frames

    def spy(*args, **kwargs):
        readers.append(kwargs.get("columnar", True))
        return original(*args, **kwargs)

    monkeypatch.setattr(nsys_sqlite, "_ADBC_BATCH_ROWS", 1000)
    monkeypatch.setattr(nsys_sqlite, "kernel_frames", spy)
    both = read_nsys_sqlite(db).launches
    assert readers == [True, False]  # the columnar reader met the REAL cell, sqlite3 read it
    _sqlite3_only(monkeypatch)
    pd.testing.assert_frame_equal(both, read_nsys_sqlite(db).launches)
    assert both["grid_x"].iloc[2500] == 2 and len(both) == 3000


def _wal_mode_copy(folder: Path) -> Path:
    import shutil

    path = folder / "wal.sqlite"
    shutil.copy(NERF, path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert path.read_bytes()[18:20] == b"\x02\x02"  # WAL mode in the header
    return path


@pytest.mark.parametrize("columnar", [True, False], ids=["adbc", "sqlite3"])
def test_a_wal_mode_export_is_read_without_writing_beside_it(tmp_path: Path, columnar,
                                                              monkeypatch) -> None:
    """Opening a WAL-mode database read-only makes SQLite create ``-shm``/``-wal`` files
    beside it unless it is opened immutable: nothing may appear beside the input."""
    path = _wal_mode_copy(tmp_path)
    if not columnar:
        monkeypatch.setattr(nsys_sqlite, "_adbc_frames", lambda *a, **k: None)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert len(read_nsys_sqlite(path).launches) == 1106
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_pending_write_ahead_log_is_refused(tmp_path: Path) -> None:
    """Transactions still in ``-wal`` are not in the file: an immutable read would miss
    them, so the file is refused (one line) instead of read short."""
    path = _wal_mode_copy(tmp_path)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 2 = 0")
    writer.commit()  # kept open: the deletion lives in wal.sqlite-wal only
    try:
        assert (tmp_path / "wal.sqlite-wal").stat().st_size > 0
        message = _one_line_error(path)
        assert "write-ahead log (wal.sqlite-wal)" in message, message
    finally:
        writer.close()


@pytest.mark.parametrize(
    "schema,words",
    [
        ("ALTER TABLE StringIds RENAME TO StringIdsStored; "
         "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, stored TEXT, value TEXT GENERATED "
         "ALWAYS AS (printf('%.*c', 100000, 'x')) VIRTUAL); "
         "INSERT INTO StringIds (id, stored) SELECT id, value FROM StringIdsStored",
         "column StringIds.value is computed as it is read"),
    ],
)
def test_values_computed_as_read_are_refused(tmp_path: Path, schema: str, words: str) -> None:
    """A small export whose ``StringIds.value`` is a virtual generated column once asked
    for gigabytes per name: refused from the schema before any row is read."""
    import shutil

    path = tmp_path / "computed.sqlite"
    shutil.copy(NERF, path)
    with sqlite3.connect(path) as conn:
        conn.executescript(schema)
    conn.close()
    assert words in _one_line_error(path)
