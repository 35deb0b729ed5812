"""The nsys CSV readers (Arrow's columnar reader, pandas' C parser, the exact reader and
the streaming import) give the same launches, or the same refusal, on the same content;
so do the ``\\n``, ``\\r\\n`` and lone ``\\r`` copies of one file. Hypothesis drives
:func:`tests.csv_agreement.assert_readers_agree` over generated files in the fuzz tier
(``tests/fuzz/test_fuzz_importers.py``); here, the cases the readers once split on."""

from __future__ import annotations

from pathlib import Path

import pytest

from hilsim.formats import nsys_stats
from tests.csv_agreement import assert_line_breaks_agree, assert_readers_agree
from tests.fuzz.csv_files import THOR

KERNEL = 3  # the first kernel row of the Thor fixture (0-based line)


def _edited(tmp_path: Path, column: int, value: str, copies: int = 1) -> Path:
    """The Thor fixture with cell ``column`` of its first kernel row set to ``value``, its
    rows written ``copies`` times (later copies later)."""
    lines = THOR.read_text(encoding="utf-8").splitlines()
    fields = lines[KERNEL].split(",", 20)
    fields[column] = value
    lines[KERNEL] = ",".join(fields)
    body = [f"{int(r.split(',', 1)[0]) + c * 10**8},{r.split(',', 1)[1]}"
            for c in range(copies) for r in lines[1:]]
    path = tmp_path / "edited_cuda_gpu_trace.csv"
    path.write_text("\n".join([lines[0], *body]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "column,value",
    [
        (1, "0x10"),  # a duration Arrow would read as hexadecimal 16
        (3, "0xFFFFFFFFFFFFFFFF"),  # a grid size Arrow would read as -1
        (10, "nan"),  # a static shared memory size: the other readers refuse "nan"
        (3, "99999999999999999999"),  # a grid size past int64 (a float cast would wrap)
        (1, "9007199254740993"),  # 2^53 + 1: exact as an integer, not as a float
        (16, "NVIDIA Thor (18446744073709551617)"),  # a device number a cast would wrap to 1
        (16, "NVIDIA Thor (9007199254740993)"),
    ],
    ids=["hex-duration", "hex-grid", "nan-size", "grid-past-int64", "past-2^53",
         "device-past-int64", "device-past-2^53"],
)
def test_each_reader_reads_the_cell_as_the_exact_reader(tmp_path, column, value):
    path = _edited(tmp_path, column, value, copies=3)
    assert_readers_agree(path, block_bytes=200)


def test_quoted_line_break_across_a_block_cut(tmp_path, monkeypatch):
    """A quoted name holding a line break, cut into two blocks right after the break: no
    reader makes a launch of the name's remainder (a name holding a line break is
    refused, by every reader alike)."""
    name = '"vernier::kernel(\nfloat)"'
    path = _edited(tmp_path, 20, name, copies=40)
    data = path.read_bytes()
    cut = data.index(b"(\nfloat)") + 2  # the byte after the line break
    monkeypatch.setattr(nsys_stats, "_ARROW_BLOCK_BYTES", cut - data.index(b"\n") - 1)
    exact = assert_readers_agree(path, block_bytes=cut)
    assert exact[0] == "refused" and "line break" in str(exact[1]), exact
    for block in (cut - 1, cut + 1, 97, 500):
        assert_readers_agree(path, block_bytes=block)


def test_quoted_line_break_before_a_whole_row_across_a_block_cut(tmp_path, monkeypatch):
    """The remainder of a quoted name after its line break looks like a whole row of 21
    fields: a reader cutting blocks at that break without seeing the quote would make it a
    launch of its own."""
    lines = THOR.read_text(encoding="utf-8").splitlines()
    row_like = ",".join(lines[KERNEL].split(",", 20)[:20]) + ",tail"
    path = _edited(tmp_path, 20, f'"vernier::kernel(\n{row_like}"', copies=40)
    data = path.read_bytes()
    cut = data.index(b"(\n") + 2
    monkeypatch.setattr(nsys_stats, "_ARROW_BLOCK_BYTES", cut - data.index(b"\n") - 1)
    for block in (cut, 97, 500):
        exact = assert_readers_agree(path, block_bytes=block)
        assert exact[0] == "refused" and "line break" in str(exact[1]), exact


@pytest.mark.parametrize("character", ["\u2028", "\x0b", "\x0c", "\x1c", "\x85"])
def test_characters_python_but_no_csv_parser_breaks_lines_at(tmp_path, character):
    """``str.splitlines`` breaks lines at these; pandas and Arrow read them as text of a
    cell: the exact reader must too."""
    path = _edited(tmp_path, 20, f'"kernel{character}name(int)"', copies=2)
    exact = assert_readers_agree(path, block_bytes=300)
    assert exact[0] == "launches", exact
    assert f"kernel{character}name(int)" in set(exact[1][0]["name"].astype(str))


def test_truncated_last_row_is_named_alike_whatever_the_line_breaks(tmp_path):
    text = _edited(tmp_path, 2, "128", copies=3).read_text(encoding="utf-8")
    assert_line_breaks_agree(tmp_path / "cut_cuda_gpu_trace.csv", text[: text.rindex(",13,")])


@pytest.mark.parametrize(
    "column,value",
    [(1, "0x10"), (10, "nan"), (3, "99999999999999999999"), (20, "plain_kernel"), (2, "")],
    ids=["hex", "nan", "past-int64", "unquoted-name", "no-corr-id"],
)
def test_line_break_styles_import_alike(tmp_path, column, value):
    text = _edited(tmp_path, column, value, copies=3).read_text(encoding="utf-8")
    assert_line_breaks_agree(tmp_path / "styles_cuda_gpu_trace.csv", text)
