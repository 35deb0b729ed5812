"""Checks every registered profile format must pass (``hilsim.formats.BUILTIN``).

In the manner of ``tests/test_methods_common.py`` for sampling methods: one list of
properties, run over every format of the registry with its real fixture, so a new format
gets them by adding its entry and its fixture (a registry entry without one fails here).

* the fixture sniffs as its format, and every other format's sniff refuses it;
* it reads: a timeline format into a bundle whose launches ``normalize_launches`` leaves
  unchanged and whose manifest names the format, which writes and reads back unchanged;
  a metrics format (ncu) into its table, while ``hilsim import`` refuses it in one line;
* a format that streams gives, chunk by chunk, the bundle the in-memory import gives;
* a truncated copy and an empty file are one ``HilsimError`` line naming the file (a
  format whose layout cannot show a cut says why, and then reads fewer launches);
* ``hilsim import --format`` offers exactly the registry's importable formats, and its
  ``--help`` loads no pandas;
* ``docs/formats.md`` has a section for every format.

Real data: the fixtures below, each with its provenance in its folder's README. One
format has no public real output: ``nsys-kern-exec-csv`` (``tests/data/nsys/README.md``);
its sample is written by :func:`_kern_exec_from_sqlite` from the documented header and the
real launches of the Nsight Systems SQLite fixture.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from hilsim.cli.import_ import import_cmd
from hilsim.core.bundle import read_bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches
from hilsim.formats import BUILTIN, FORMATS, IMPORTABLE, load
from hilsim.formats.detect import Head, sniff_format
from hilsim.formats.nsys_sqlite import bundle_from_nsys_sqlite
from hilsim.formats.read import import_profile, read_format
from hilsim.formats.streaming import stream_import
from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[1]

#: format -> its real fixture in tests/data
FIXTURES: dict[str, Path] = {
    "cupti-records": DATA / "silicon" / "H100" / "raw" / "transformer.cupti.jsonl.gz",
    "sqlite": DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite",
    "kineto-json": DATA / "kineto" / "hta-v100-ns-resolution.trace.json.gz",
    "gpgpusim-log": DATA / "gpgpusim" / "transformer_step1.SM7_QV100-4sm.log",
    "nsys-gpu-trace-csv": DATA / "nsys" / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv",
    "ncu-csv-long": DATA / "ncu" / "xplacer_cfd_097K_details_2020.log",
    "ncu-csv-raw": DATA / "ncu" / "decodebench_flashinfer_b1_ctx4k_raw_2025.csv",
    "wide-durations-csv": DATA / "casio" / "casio-kernel-durations.csv",
}
#: fixtures stored gzip'd for a format whose files are plain text (the test gunzips them)
STORED_GZIPPED = {"cupti-records"}


def _kern_exec_from_sqlite(out: Path) -> Path:
    """A ``cuda_kern_exec_trace`` CSV in the layout ``nsys stats`` documents for it
    (``docs/formats.md``), holding the real launches of the SQLite fixture: no real output
    of this report is public."""
    launches = bundle_from_nsys_sqlite(FIXTURES["sqlite"]).launches
    lines = ["API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
             "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
             "Kernel Name"]
    for row in launches.itertuples():
        api = int(row.start_ns) - 4_000
        total = int(row.start_ns) + int(row.duration_ns) - api
        grid = f"{row.grid_x:5d}{row.grid_y:5d}{row.grid_z:5d}"
        block = f"{row.block_x:5d}{row.block_y:5d}{row.block_z:5d}"
        name = str(row.name).replace('"', '""')
        lines.append(f'{api},2500,,,{row.start_ns},{row.duration_ns},{total},1,1,'
                     f'{row.device},cudaLaunchKernel,{grid},{block},"{name}"')
    out.write_text("\n".join(lines) + "\n")
    return out


#: formats without a real fixture -> the function writing their sample (and why: its
#: docstring)
BUILT: dict[str, Callable[[Path], Path]] = {"nsys-kern-exec-csv": _kern_exec_from_sqlite}
#: formats whose layout cannot show that a file was cut, and why: a cut copy then reads
#: as fewer launches
CUT_UNSEEN: dict[str, str] = {
    "wide-durations-csv": "columns are ragged by design: a cut row is a shorter column",
    "gpgpusim-log": "a cut between two kernels' statistics blocks reads as a shorter run "
                    "(the closing 'exit detected' line is not required)",
}

NAMES = [f.name for f in BUILTIN]


@pytest.fixture
def sample(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The format's fixture as a plain file in ``tmp_path`` (gunzipped where stored so,
    written by :data:`BUILT` where no real one exists)."""
    name = request.param
    if name in BUILT:
        return BUILT[name](tmp_path / f"{name}.csv")
    path = FIXTURES[name]
    if name in STORED_GZIPPED:
        out = tmp_path / path.name.removesuffix(".gz")
        out.write_bytes(gzip.decompress(path.read_bytes()))
        return out
    return path


def _params(names: list[str]) -> list:
    return [pytest.param(n, id=n) for n in names]


def _read(path: Path, name: str):
    """What the format's reader gives: through ``import_profile`` for a timeline, the
    registry's reader for a metrics format."""
    entry = FORMATS[name]
    if entry.refusal is None:
        return import_profile(path, fmt=name)
    return load(entry.reader)(path)


_WHOLE: dict[tuple[str, int], pd.DataFrame] = {}


def _whole(path: Path, name: str) -> pd.DataFrame:
    """The launches (or ncu launches) of the whole sample, read once per format."""
    key = (name, path.stat().st_size)
    if key not in _WHOLE:
        _WHOLE[key] = _read(path, name).launches
    return _WHOLE[key]


def _one_line_naming(exc: HilsimError, path: Path) -> str:
    message = str(exc)
    assert "\n" not in message, message
    assert str(path) in message, message
    return message


# ----------------------------------------------------------------------------- registry


def test_every_format_has_a_fixture() -> None:
    assert set(FIXTURES) | set(BUILT) == set(FORMATS)
    assert not set(FIXTURES) & set(BUILT)
    for name, path in FIXTURES.items():
        assert path.is_file(), (name, path)


def test_each_name_is_declared_once() -> None:
    assert len(NAMES) == len(set(NAMES)) == len(FORMATS)


@pytest.mark.parametrize("name", _params(NAMES))
def test_registry_paths_resolve(name: str) -> None:
    entry = FORMATS[name]
    assert entry.sniff is not None, f"{name}: no sniff, so --format auto never finds it"
    assert callable(load(entry.sniff)) and callable(load(entry.reader))
    assert entry.title


def test_cli_choices_are_the_registry() -> None:
    (option,) = [p for p in import_cmd.params if p.name == "fmt"]
    assert list(option.type.choices) == ["auto", *IMPORTABLE]
    assert set(IMPORTABLE) == {f.name for f in BUILTIN if f.refusal is None}


def test_import_help_lists_the_registry_without_pandas() -> None:
    code = (
        "import sys; from hilsim.cli.main import main; rc = main(['import', '--help']); "
        "print('HEAVY', [m for m in ('pandas', 'numpy', 'pyarrow') if m in sys.modules]); "
        "sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
    listed = done.stdout.replace("\n", "").replace(" ", "")
    assert f"[auto|{'|'.join(IMPORTABLE)}]" in listed


def test_docs_describe_every_format() -> None:
    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    headings = {line for line in text.splitlines() if line.startswith("## ")}
    for name in NAMES:
        assert any(f"`{name}`" in h for h in headings), f"docs/formats.md: no section {name}"


# ----------------------------------------------------------------------------- each format


@pytest.mark.parametrize("sample", _params(NAMES), indirect=True)
def test_fixture_sniffs_as_its_format_and_no_other(sample: Path, request) -> None:
    name = request.node.callspec.params["sample"]
    assert sniff_format(sample) == name
    head = Head.read(sample)
    others = [f.name for f in BUILTIN if f.name != name and load(f.sniff)(head)]
    assert others == [], f"{name}'s fixture is also accepted by {others}"


@pytest.mark.parametrize("sample", _params(NAMES), indirect=True)
def test_fixture_reads_and_round_trips(sample: Path, request, tmp_path: Path) -> None:
    name = request.node.callspec.params["sample"]
    entry = FORMATS[name]
    if entry.refusal is not None:
        with pytest.raises(HilsimError) as info:
            read_format(sample, name)
        assert entry.refusal in _one_line_naming(info.value, sample)
        table = load(entry.reader)(sample)
        assert len(table.launches) > 0 and table.metrics.shape[1] > 0
        return
    bundle = import_profile(sample)  # auto: sniffed, then the registry's reader
    launches = bundle.launches
    assert len(launches) > 0
    pd.testing.assert_frame_equal(_texts_as_objects(normalize_launches(launches, str(sample))),
                                  _texts_as_objects(launches))
    assert bundle.manifest["source"]["format"] == name
    back = read_bundle(write_bundle(bundle, tmp_path / "b"))
    pd.testing.assert_frame_equal(_texts_as_objects(back.launches), _texts_as_objects(launches))
    for table in ("metrics", "regions"):
        ours, theirs = getattr(bundle, table), getattr(back, table)
        assert (ours is None) == (theirs is None), table
        if ours is not None:
            pd.testing.assert_frame_equal(_texts_as_objects(theirs),
                                          _texts_as_objects(ours.reset_index(drop=True)))
    assert back.manifest["source"] == bundle.manifest["source"]


def _texts_as_objects(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its text columns (categorical or string) as Python objects: a Parquet
    read gives dictionary-encoded text back as categoricals of pandas' string dtype, the
    same texts in the same rows."""
    out = frame.copy()
    for column in out.columns:
        dtype = out[column].dtype
        if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype):
            out[column] = out[column].astype(object)
    return out


@pytest.mark.parametrize("sample", _params([f.name for f in BUILTIN if f.streams]),
                         indirect=True)
def test_streaming_gives_the_in_memory_bundle(sample: Path, request, tmp_path: Path) -> None:
    name = request.node.callspec.params["sample"]
    # about five chunks: boundaries fall inside the file, each chunk costs a parse
    size = sample.stat().st_size
    result = stream_import(sample, name, tmp_path / "s", block_bytes=size // 5 + 1,
                           chunk_rows=max(len(_whole(sample, name)) // 5, 1))
    assert result is not None, f"{name}: streams, but stream_import fell back"
    streamed = read_bundle(tmp_path / "s")
    in_memory = read_bundle(write_bundle(import_profile(sample, fmt=name), tmp_path / "m"))
    pd.testing.assert_frame_equal(streamed.launches, in_memory.launches)
    assert streamed.manifest["source"] == in_memory.manifest["source"]


def _cut(data: bytes, share: float) -> bytes:
    """``data`` cut at ``share`` of its length, moved off a line end (a cut record)."""
    cut = int(len(data) * share)
    while data[cut - 1 : cut] == b"\n":
        cut += 1
    return data[:cut]


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("sample", _params(NAMES), indirect=True)
def test_cut_copy_is_one_line_naming_the_file(sample: Path, request, tmp_path: Path,
                                              share: float) -> None:
    name = request.node.callspec.params["sample"]
    whole = len(_whole(sample, name))
    cut = tmp_path / f"cut-{sample.name}"
    cut.write_bytes(_cut(sample.read_bytes(), share))
    try:
        read = _read(cut, name)
    except HilsimError as exc:
        _one_line_naming(exc, cut)
        return
    assert name in CUT_UNSEEN, f"{name}: a copy cut at {share:.0%} reads without an error"
    assert len(read.launches) < whole


@pytest.mark.parametrize("sample", _params(NAMES), indirect=True)
def test_empty_file_is_one_line_naming_the_file(sample: Path, request, tmp_path: Path) -> None:
    name = request.node.callspec.params["sample"]
    empty = tmp_path / f"empty-{sample.name}"
    empty.write_bytes(b"")
    with pytest.raises(HilsimError) as info:
        _read(empty, name)
    _one_line_naming(info.value, empty)
    with pytest.raises(HilsimError) as info:  # guessed: nothing to recognise
        sniff_format(empty)
    assert "empty file" in _one_line_naming(info.value, empty)
