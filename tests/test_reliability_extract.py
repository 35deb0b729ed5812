"""Source tarballs (``hilsim gpgpusim setup --source``): nothing is written outside the
destination whatever the links, sizes, member counts and header values, and every refusal
is one line."""

from __future__ import annotations

import io
import os
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hilsim.simmodel.gpgpusim import build as B
from hilsim.simmodel.gpgpusim.extract import safe_extract
from hilsim.simmodel.gpgpusim.toolchain import Toolchain

from hilsim.cli.main import main
from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs

TC = Toolchain(Path("/usr/bin/nvcc"), Path("/usr/bin/cuobjdump"), "11.8", "12.2.0")


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: file bytes, or 'dir' / 'link -> target'."""
    found: dict[str, bytes | str] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            key = str(path.relative_to(folder))
            if path.is_symlink():
                found[key] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                found[key] = "dir"
            else:
                found[key] = path.read_bytes()
    return found


def test_realpath_limit_attack_writes_nothing_outside(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "flag").write_text("secret")
    dest = outer / "dest"
    dest.mkdir()
    tarball = inputs.tarball_realpath_attack(tmp_path / "attack-667834c.tar.gz", dest)
    with pytest.raises(HilsimError, match="hard link 'flaglink' -> 'escape/flag'"):
        safe_extract(tarball, dest)
    assert (outer / "flag").read_text() == "secret"
    assert sorted(p.name for p in outer.iterdir()) == ["dest", "flag"]
    assert not [k for k, v in _tree(dest).items() if str(v).startswith("link")]


def test_realpath_attack_through_setup_stays_in_the_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(B, "PATCH_DIR", tmp_path / "no-patches")
    cache = tmp_path / "cache"
    key = B.build_key("667834c", TC.gcc_version, TC.cuda_version_number, "")
    # the extraction folder's path length (mkdtemp adds 8 characters)
    dest = cache / f".{key}.tmp-xxxxxxxx" / "extract"
    tarball = inputs.tarball_realpath_attack(
        tmp_path / "gpgpu-sim_distribution-667834c.tar.gz", dest, levels_up=3
    )
    (tmp_path / "flag").write_text("secret")
    monkeypatch.setattr("hilsim.cli.gpgpusim.find_toolchain", lambda: TC)
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        code = main(["gpgpusim", "setup", "--source", str(tarball), "--cache", str(cache)])
    assert code == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "hard link 'flaglink'" in lines[0], lines
    assert (tmp_path / "flag").read_text() == "secret"
    assert not (tmp_path / "newfile").exists()
    assert sorted(p.name for p in cache.iterdir()) == [f"{key}.lock"]


def test_a_link_placed_on_disk_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "top").symlink_to(outside)  # another process put a link where a folder goes
    tarball = inputs.tarball(tmp_path / "t.tar.gz", [inputs.tar_file("top/a.txt", b"a")])
    with pytest.raises(HilsimError, match="'top' on its path is not a folder"):
        safe_extract(tarball, dest)
    assert list(outside.iterdir()) == []


def test_links_inside_become_copies_never_links(tmp_path: Path) -> None:
    tarball = inputs.tarball(tmp_path / "t.tar.gz", [
        inputs.tar_file("top/lib/libx.so", b"elf"),
        inputs.tar_link("top/lib/libx.so.2", "libx.so"),
        inputs.tar_link("top/lib/libx.so.2.1", "libx.so.2"),  # a chain
        inputs.tar_link("top/hard", "top/lib/libx.so", hard=True),
        inputs.tar_link("top/dirlink", "lib"),  # a folder: skipped
        inputs.tar_link("top/dangling", "nothing"),  # missing: skipped
        inputs.tar_link("top/loop", "loop"),
    ])
    dest = tmp_path / "dest"
    dest.mkdir()
    notes: list[str] = []
    top = safe_extract(tarball, dest, notes.append)
    tree = _tree(dest)
    assert top == dest.resolve() / "top"
    assert tree["top/lib/libx.so.2"] == tree["top/lib/libx.so.2.1"] == tree["top/hard"] == b"elf"
    assert not [k for k, v in tree.items() if str(v).startswith("link")]
    assert sorted(n.split()[3] for n in notes) == ["top/dangling", "top/dirlink", "top/loop"]


def test_hard_link_to_a_missing_member_is_one_line(tmp_path: Path) -> None:
    tarball = inputs.tarball(tmp_path / "t.tar.gz", [
        inputs.tar_file("top/a"), inputs.tar_link("top/h", "top/missing", hard=True)])
    (tmp_path / "d").mkdir()
    with pytest.raises(HilsimError, match="hard link 'top/h' -> 'top/missing': no earlier file"):
        safe_extract(tarball, tmp_path / "d")
    assert _tree(tmp_path / "d") == {}


def test_pax_size_beyond_any_file_is_one_line(tmp_path: Path) -> None:
    tarball = inputs.tarball(tmp_path / "t.tar.gz", [
        inputs.tar_file("top/a"),
        inputs.tar_file("top/b", b"y" * 10, pax={"size": "100000000000000000000"}),
    ])
    (tmp_path / "d").mkdir()
    with pytest.raises(HilsimError, match="max_archive_bytes"):
        safe_extract(tarball, tmp_path / "d")
    assert _tree(tmp_path / "d") == {}


def test_pax_mtime_nan_extracts_with_the_time_of_extraction(tmp_path: Path) -> None:
    tarball = inputs.tarball(tmp_path / "t.tar.gz", [
        inputs.tar_file("top/a", b"z", pax={"mtime": "nan"}),
        inputs.tar_file("top/b", b"w", pax={"mtime": "1e300"}),
        inputs.tar_file("top/c", b"v", pax={"mtime": "1700000000.5"}),
    ])
    (tmp_path / "d").mkdir()
    before = time.time() - 5
    top = safe_extract(tarball, tmp_path / "d")
    assert (top / "a").read_bytes() == b"z" and (top / "a").stat().st_mtime > before
    assert (top / "b").stat().st_mtime > before
    assert (top / "c").stat().st_mtime == pytest.approx(1700000000.5)


def test_a_4_gib_tree_in_4_mb_writes_nothing(tmp_path: Path) -> None:
    tarball = inputs.tarball_of_zeros(tmp_path / "bomb-667834c.tar.gz", 4 << 30)
    assert tarball.stat().st_size < 5 << 20
    (tmp_path / "d").mkdir()
    started = time.monotonic()
    with pytest.raises(HilsimError, match="over the limit max_(archive_bytes|decompression_ratio)"):
        safe_extract(tarball, tmp_path / "d")
    assert time.monotonic() - started < 10
    assert _tree(tmp_path / "d") == {}


def test_many_large_members_stop_at_the_ratio_guard(tmp_path: Path) -> None:
    tarball = inputs.tarball_of_zeros(tmp_path / "bomb.tar.gz", 64 << 20, members=64)
    (tmp_path / "d").mkdir()
    with pytest.raises(HilsimError, match="over the limit max_(decompression_ratio|archive_bytes)"):
        safe_extract(tarball, tmp_path / "d")
    assert _tree(tmp_path / "d") == {}


def test_member_count_guard(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HILSIM_MAX_ARCHIVE_MEMBERS", "100")
    (tmp_path / "d").mkdir()
    safe_extract(inputs.tarball_of_empty_files(tmp_path / "ok.tar.gz", 100), tmp_path / "d")
    (tmp_path / "e").mkdir()
    with pytest.raises(HilsimError, match="more than 100 members: over the limit"):
        safe_extract(inputs.tarball_of_empty_files(tmp_path / "many.tar.gz", 101), tmp_path / "e")
    assert _tree(tmp_path / "e") == {}


def test_setup_errors_are_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(B, "PATCH_DIR", tmp_path / "no-patches")
    monkeypatch.setattr("hilsim.cli.gpgpusim.find_toolchain", lambda: TC)
    tarball = inputs.tarball(tmp_path / "other-667834c.tar.gz",
                             [inputs.tar_file("top/README", b"hi")])
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        code = main(["gpgpusim", "setup", "--source", str(tarball), "--cache",
                     str(tmp_path / "c")])
    assert code == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "not a GPGPU-Sim source tree" in lines[0], lines


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_source_that_is_not_a_file_names_what_it_is(kind: str, tmp_path: Path,
                                                       monkeypatch) -> None:
    monkeypatch.setattr("hilsim.cli.gpgpusim.find_toolchain", lambda: TC)
    source = Path("/dev/zero")
    if kind == "fifo":
        source = tmp_path / "src-667834c.tar.gz"
        os.mkfifo(source)
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["gpgpusim", "setup", "--source", str(source), "--cache",
                     str(tmp_path / "c")])
    lines = err.getvalue().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert ("FIFO" if kind == "fifo" else "character device") in lines[0], lines
    assert not (tmp_path / "c").exists()
