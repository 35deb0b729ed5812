"""GPGPU-Sim build cache: key derivation, safe extraction, idempotent locked builds.

The orchestration (extract, `source setup_environment release && make`, temp folder renamed
when complete, provenance, lock, failure) runs on a tiny source tree whose Makefile only
creates `lib/gcc-*/cuda-*/release/libcudart.so`; the real build is the `gpgpusim` tier.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest
from hilsim.simmodel.gpgpusim import build as B
from hilsim.simmodel.gpgpusim.toolchain import Toolchain

from hilsim.core.errors import HilsimError
from tests.reliability_inputs import tar_file, tar_link
from tests.reliability_inputs import tarball as make_tarball

TC = Toolchain(Path("/usr/bin/nvcc"), Path("/usr/bin/cuobjdump"), "11.8", "12.2.0")


@pytest.fixture(autouse=True)
def _no_shipped_patches(tmp_path_factory, monkeypatch) -> None:
    """The fake source trees below are not GPGPU-Sim: build them with an empty patch set."""
    monkeypatch.setattr(B, "PATCH_DIR", tmp_path_factory.mktemp("no-patches"))


def test_shipped_patches_are_named_in_the_key(monkeypatch) -> None:
    monkeypatch.undo()
    shipped = B.patch_files()
    assert [p.name for p in shipped][:1] == ["0001-smid-register.patch"]
    for p in shipped:  # -p1 from the top: every file diff names a/... and b/...
        olds = [ln for ln in p.read_text().splitlines() if ln.startswith("--- ")]
        news = [ln for ln in p.read_text().splitlines() if ln.startswith("+++ ")]
        assert olds and all(ln.startswith("--- a/") for ln in olds), p.name
        assert len(news) == len(olds) and all(ln.startswith("+++ b/") for ln in news), p.name
    digest = B.patch_digest(shipped)
    assert re.fullmatch(r"[0-9a-f]{8}", digest)
    assert B.build_key("667834c", "12.2.0", 11080) == f"667834c-p{digest}-gcc12.2.0-cuda11080"
    assert B.build_key("667834c", "12.2.0", 11080, "") == "667834c-gcc12.2.0-cuda11080"


def test_patches_apply_before_make_and_change_the_key(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HILSIM_GPGPUSIM_HOME", raising=False)
    check = "\tgrep -q '^# patched' Makefile\n\tmkdir -p"  # make fails unless the patch applied
    src = _fake_source(tmp_path, make=MAKEFILE.replace("\tmkdir -p", check))
    good = tmp_path / "0001-mark.patch"
    good.write_text("--- a/Makefile\n+++ b/Makefile\n@@ -1 +1,2 @@\n+# patched\n"
                    " LIB = lib/gcc-$(CC_VERSION)/cuda-$(CUDA_VERSION_NUMBER)/release\n")
    cache = tmp_path / "cache"
    built = B.ensure_build(source=src, cache_dir=cache, toolchain=TC, patches=[good])
    assert built.key == f"667834c-p{B.patch_digest([good])}-gcc12.2.0-cuda11080"
    prov = json.loads((cache / built.key / "hilsim-build.json").read_text())
    assert prov["patches"] == ["0001-mark.patch"]
    bad = tmp_path / "0002-stale.patch"
    bad.write_text("--- a/Makefile\n+++ b/Makefile\n@@ -1 +1 @@\n-no such line\n+x\n")
    with pytest.raises(HilsimError, match=r"0002-stale.patch: does not apply"):
        B.ensure_build(source=src, cache_dir=cache, toolchain=TC, patches=[good, bad])
    assert B.find_build(cache).key == built.key  # type: ignore[union-attr]


def test_build_key_and_commit_from_name() -> None:
    assert B.commit_from_tarball_name("x/gpgpu-sim_distribution-667834c.tar.gz") == "667834c"
    assert B.commit_from_tarball_name("sim-" + "a" * 40 + ".tgz") == "a" * 40
    assert B.commit_from_tarball_name("gpgpu-sim.tar.gz") is None
    assert B.build_key("667834cfe5214523edd7769aeab77f91b7137686", "12.2.0", 11080, "") == (
        "667834c-gcc12.2.0-cuda11080"
    )
    # a tarball's short sha and a clone's full sha of the same commit share the folder
    assert B.build_key("667834C", "12.2.0", 11080) == B.build_key("667834cfe52", "12.2.0", 11080)
    assert B.build_key("667834c", "11.4.0", 11080) != B.build_key("667834c", "12.2.0", 11080)
    assert B.build_key("667834c", "12.2.0", 11070) != B.build_key("667834c", "12.2.0", 11080)
    for bad in ("xyz1234", "12345", "../../etc"):
        with pytest.raises(HilsimError, match="hex git sha"):
            B.build_key(bad, "12.2.0", 11080)


@pytest.mark.parametrize(
    "member, what",
    [
        (tar_file("../escape.txt"), "outside"),
        (tar_file("/abs/escape.txt"), "outside"),
        (tar_file("top/../../escape.txt"), "outside"),
        (tar_link("top/evil", "/etc/passwd"), "points outside"),
        (tar_link("top/evil", "../../outside"), "points outside"),
        (tar_link("top/hard", "/etc/passwd", hard=True), "points outside"),
    ],
)
def test_safe_extract_refuses_escapes(tmp_path: Path, member, what: str) -> None:
    tarball = make_tarball(tmp_path / "src-667834c.tar.gz", [tar_file("top/ok.txt"), member])
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(HilsimError, match=what):
        B.safe_extract(tarball, dest)
    assert not (tmp_path / "escape.txt").exists()
    assert not (dest / "top" / "ok.txt").exists()  # refused before anything is written


def test_safe_extract_keeps_inner_links_and_returns_top(tmp_path: Path) -> None:
    tarball = make_tarball(
        tmp_path / "s.tar.gz",
        [tar_file("top/lib/libx.so", b"elf"), tar_link("top/lib/libx.so.2", "libx.so")],
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    top = B.safe_extract(tarball, dest)
    assert top == (dest / "top").resolve()
    assert (top / "lib" / "libx.so.2").read_bytes() == b"elf"


def test_safe_extract_truncated_archive_is_one_line(tmp_path: Path) -> None:
    good = make_tarball(tmp_path / "g.tar.gz", [tar_file("top/a.txt", b"y" * 5000)])
    bad = tmp_path / "bad-667834c.tar.gz"
    bad.write_bytes(good.read_bytes()[:40])
    (tmp_path / "d").mkdir()
    with pytest.raises(HilsimError, match="bad-667834c.tar.gz"):
        B.safe_extract(bad, tmp_path / "d")


MAKEFILE = """\
LIB = lib/gcc-$(CC_VERSION)/cuda-$(CUDA_VERSION_NUMBER)/release
all:
\t@test -n "$(GPGPUSIM_SETUP_ENVIRONMENT_WAS_RUN)" || (echo "setup_environment not sourced"; exit 1)
\tmkdir -p $(LIB)
\techo sim > $(LIB)/libcudart.so
\tcd $(LIB) && ln -sf libcudart.so libcudart.so.11.0
"""
SETUP = """\
export GPGPUSIM_ROOT="$( cd "$( dirname "$BASH_SOURCE" )" && pwd )"
export CC_VERSION=12.2.0
export CUDA_VERSION_NUMBER=11080
test "$1" = release || return 1
{fail}
export GPGPUSIM_SETUP_ENVIRONMENT_WAS_RUN=1
"""


def _fake_source(tmp_path: Path, name: str = "gpgpu-sim_distribution-667834c", fail: str = "",
                 make: str = MAKEFILE) -> Path:
    return make_tarball(
        tmp_path / f"{name}.tar.gz",
        [
            tar_file(f"{name}/setup_environment", SETUP.format(fail=fail).encode()),
            tar_file(f"{name}/Makefile", make.encode()),
            tar_file(f"{name}/configs/tested-cfgs/SM7_QV100/gpgpusim.config",
                     b"-gpgpu_n_clusters 80"),
        ],
    )


def test_ensure_build_builds_once_then_is_idempotent(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HILSIM_GPGPUSIM_HOME", raising=False)
    src = _fake_source(tmp_path)
    cache = tmp_path / "cache"
    built = B.ensure_build(source=src, cache_dir=cache, toolchain=TC)
    assert built.key == "667834c-gcc12.2.0-cuda11080"
    assert built.root == (cache / built.key / "gpgpu-sim").resolve()
    assert built.lib_dir == built.root / "lib/gcc-12.2.0/cuda-11080/release"
    assert (built.lib_dir / "libcudart.so.11.0").read_text() == "sim\n"  # relative link
    prov = json.loads((cache / built.key / "hilsim-build.json").read_text())
    assert prov["commit"] == "667834c" and prov["gcc"] == "12.2.0" and prov["cuda"] == "11.8"
    assert prov["source_sha256"] == B.sha256_file(src)
    assert "make" in (cache / built.key / "build.log").read_text()
    assert not list(cache.glob(".*tmp-*"))
    mtime = (cache / built.key / "hilsim-build.json").stat().st_mtime_ns
    again = B.ensure_build(source=src, cache_dir=cache, toolchain=TC)
    assert again == built
    assert (cache / built.key / "hilsim-build.json").stat().st_mtime_ns == mtime
    # find_build sees it (no toolchain match needed for a single build)
    found = B.find_build(cache)
    assert found is not None and found.key == built.key
    other_sim = "/x/lib/gcc-1/cuda-2/release"
    env = found.env({"PATH": "/usr/local/bin:/usr/bin", "LD_LIBRARY_PATH": f"{other_sim}:/y"})
    assert env["LD_LIBRARY_PATH"] == f"{built.lib_dir}:/y"
    assert env["PATH"].split(":")[0] == "/usr/bin"
    assert env["CUDA_INSTALL_PATH"] == "/usr"
    assert env["PTX_SIM_USE_PTX_FILE"] == "1.ptx" and env["CUOBJDUMP_SIM_FILE"] == "jj"
    assert env["PTX_SIM_KERNELFILE"] == "_1.ptx"


def test_ensure_build_concurrent_callers_build_once(tmp_path: Path) -> None:
    count = "\tsleep 1; echo built >> $(GPGPUSIM_ROOT)/../../count\n"
    make = MAKEFILE.replace("\tmkdir -p", count + "\tmkdir -p")
    src = _fake_source(tmp_path, make=make)
    cache = tmp_path / "cache"
    results: list[object] = []

    def go() -> None:
        results.append(B.ensure_build(source=src, cache_dir=cache, toolchain=TC))

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len({r.key for r in results}) == 1  # type: ignore[attr-defined]
    # every build appends to cache/count: exactly one ran
    key = results[0].key  # type: ignore[attr-defined]
    assert (cache / "count").read_text() == "built\n"
    assert B.find_build(cache).key == key  # type: ignore[union-attr]


def test_failed_build_leaves_nothing_finished(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HILSIM_GPGPUSIM_HOME", raising=False)
    src = _fake_source(tmp_path, make="all:\n\t@echo 'cc1plus: error: boom'; exit 3\n")
    cache = tmp_path / "cache"
    with pytest.raises(HilsimError, match=r"build failed \(make exit 2\): see .*failed.log"):
        B.ensure_build(source=src, cache_dir=cache, toolchain=TC)
    assert "boom" in (cache / "667834c-gcc12.2.0-cuda11080.failed.log").read_text()
    assert not (cache / "667834c-gcc12.2.0-cuda11080").exists()
    assert not list(cache.glob(".*tmp-*"))
    assert B.find_build(cache) is None
    # a killed build's leftovers (temp folder, folder without provenance) look unfinished
    (cache / ".667834c-gcc12.2.0-cuda11080.tmp-dead").mkdir()
    half = cache / "667834c-gcc12.2.0-cuda11080" / "gpgpu-sim/lib/gcc-1/cuda-2/release"
    half.mkdir(parents=True)
    (half / "libcudart.so").write_text("half")
    assert B.find_build(cache) is None
    (tmp_path / "ok").mkdir()
    good = _fake_source(tmp_path / "ok")
    built = B.ensure_build(source=good, cache_dir=cache, toolchain=TC)
    assert (built.lib_dir / "libcudart.so").read_text() == "sim\n"
    assert not list(cache.glob(".*tmp-*"))


def test_ensure_build_input_errors(tmp_path: Path) -> None:
    with pytest.raises(HilsimError, match="no such file"):
        B.ensure_build(source=tmp_path / "nope-667834c.tar.gz", toolchain=TC)
    (tmp_path / "gpgpu-sim.tar.gz").write_bytes(b"")
    with pytest.raises(HilsimError, match="pass --commit"):
        B.ensure_build(source=tmp_path / "gpgpu-sim.tar.gz", toolchain=TC)
    with pytest.raises(HilsimError, match="exactly one"):
        B.ensure_build(toolchain=TC)
    with pytest.raises(HilsimError, match="--commit"):
        B.ensure_build(git_url="https://example.invalid/x.git", toolchain=TC)
    not_sim = make_tarball(tmp_path / "other-667834c.tar.gz", [tar_file("top/README", b"hi")])
    with pytest.raises(HilsimError, match="not a GPGPU-Sim source tree"):
        B.ensure_build(source=not_sim, cache_dir=tmp_path / "c", toolchain=TC)
    assert not list((tmp_path / "c").glob(".*tmp-*"))


def test_home_override(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HILSIM_GPGPUSIM_HOME", str(tmp_path / "tree"))
    with pytest.raises(HilsimError, match="not a built GPGPU-Sim tree"):
        B.find_build(tmp_path / "cache")
    lib = tmp_path / "tree/lib/gcc-12.2.0/cuda-11080/release"
    lib.mkdir(parents=True)
    (lib / "libcudart.so").write_text("x")
    found = B.find_build(tmp_path / "cache")
    assert found is not None and found.root == (tmp_path / "tree").resolve()
    assert found.env({})["LD_LIBRARY_PATH"] == str(lib)
    assert os.fspath(found.configs_dir).endswith("configs/tested-cfgs")
