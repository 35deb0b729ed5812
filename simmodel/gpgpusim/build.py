"""Build GPGPU-Sim into a cache folder keyed by commit + gcc + CUDA version, and find it.

Layout of the cache (``$HILSIM_GPGPUSIM_CACHE``, default ``~/.cache/hilsim/gpgpusim``)::

    <key>/                      e.g. 667834c-p1a2b3c4d-gcc12.2.0-cuda11080
        hilsim-build.json       provenance: source, sha256, commit, gcc, cuda, build time
        build.log               setup_environment + make output
        gpgpu-sim/              the built source tree (lib/gcc-*/cuda-*/release/libcudart.so)
    <key>.lock                  flock: one build per key at a time
    .<key>.tmp-*/               a build in progress (renamed to <key>/ only when complete)

The key's ``p<digest>`` part is the sha256 of the patches in ``patches/`` (applied in name
order with ``patch -p1`` after extraction): a changed patch set is a different build.
Each patch says in its header what it changes and why (e.g. ``%smid`` reads the shader core
id instead of aborting, so that per-SM throughput kernels run as written).

A killed build leaves only a ``.tmp`` folder, which the next build of that key removes;
nothing that looks finished. ``$HILSIM_GPGPUSIM_HOME`` (a source tree already built by
``source setup_environment release && make``) overrides the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.extract import safe_extract
from hilsim.simmodel.gpgpusim.toolchain import SCRIPT, Toolchain, find_toolchain

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.inputs import check_file

PROVENANCE = "hilsim-build.json"
PROVENANCE_SCHEMA = "hilsim.gpgpusim-build/1"
TREE = "gpgpu-sim"
LOG = "build.log"
# setup_environment exports these for PTX mode (CUDA >= 6); without them the simulator
# aborts in pruneSectionList (measured by hand when the pinned tarball was vendored).
PTX_ENV = {
    "PTX_SIM_USE_PTX_FILE": "1.ptx",
    "PTX_SIM_KERNELFILE": "_1.ptx",
    "CUOBJDUMP_SIM_FILE": "jj",
}
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_TARBALL_COMMIT = re.compile(r"-([0-9a-f]{7,40})\.(?:tar\.gz|tgz|tar\.xz|tar\.bz2|tar)$")
# The build itself: a constant script; the job count is a positional argument, so no user
# text is ever interpreted by the shell.
_BUILD_SCRIPT = 'source setup_environment release && make -j"$1"'
PATCH_DIR = Path(__file__).with_name("patches")


def patch_files() -> list[Path]:
    """The simulator patches hilsim applies, in the order they apply (file name order)."""
    return sorted(PATCH_DIR.glob("*.patch"))


def patch_digest(patches: list[Path] | None = None) -> str:
    """First 8 hex digits of the sha256 over the patches' names and bytes ('' if none)."""
    patches = patch_files() if patches is None else patches
    if not patches:
        return ""
    h = hashlib.sha256()
    for p in patches:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:8]


def default_cache_dir() -> Path:
    """``$HILSIM_GPGPUSIM_CACHE`` or ``~/.cache/hilsim/gpgpusim``."""
    env = os.environ.get("HILSIM_GPGPUSIM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "hilsim" / "gpgpusim"


def commit_from_tarball_name(path: str | os.PathLike[str]) -> str | None:
    """The commit in a name like ``gpgpu-sim_distribution-667834c.tar.gz``, else None."""
    m = _TARBALL_COMMIT.search(Path(path).name)
    return m.group(1) if m else None


def build_key(
    commit: str, gcc_version: str, cuda_version_number: int, patches: str | None = None
) -> str:
    """Cache folder name: short commit + patch digest + gcc version + CUDA version number.

    ``patches`` defaults to :func:`patch_digest` of the shipped patch set; ``""`` names an
    unpatched build.
    """
    commit = commit.lower()
    if not _COMMIT.match(commit):
        raise HilsimError(f"commit {commit!r} is not a 7-40 digit hex git sha")
    if not re.fullmatch(r"\d+(\.\d+)*", gcc_version):
        raise HilsimError(f"gcc version {gcc_version!r} is not x.y.z")
    digest = patch_digest() if patches is None else patches
    part = f"-p{digest}" if digest else ""
    return f"{commit[:7]}{part}-gcc{gcc_version}-cuda{int(cuda_version_number)}"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- the build as found -------------------------------------------------------------


@dataclass(frozen=True)
class SimBuild:
    """A built GPGPU-Sim tree: where its ``libcudart.so`` is and how to run with it."""

    root: Path
    lib_dir: Path
    key: str
    cuda_home: Path
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def configs_dir(self) -> Path:
        """The shipped card configs (``configs/tested-cfgs``)."""
        return self.root / "configs" / "tested-cfgs"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The full environment a simulated run needs (``base`` defaults to ``os.environ``).

        What ``source setup_environment release`` exports for a run: the simulator's lib
        dir first on ``LD_LIBRARY_PATH`` (other GPGPU-Sim lib dirs removed),
        ``CUDA_INSTALL_PATH`` (the simulator calls ``$CUDA_INSTALL_PATH/bin/cuobjdump`` and
        ``ptxas``), ``PTXAS_CUDA_INSTALL_PATH``, ``GPGPUSIM_ROOT``, the PTX-mode variables,
        and ``PATH`` with the toolkit's ``bin`` first (the CUDA 13 wrapper trap).
        """
        env = dict(os.environ if base is None else base)
        lib = str(self.lib_dir)
        old = [
            p
            for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep)
            if p and p != lib and not re.search(r"/lib/gcc-[^/]+/cuda-\d+/(release|debug)/?$", p)
        ]
        env["LD_LIBRARY_PATH"] = os.pathsep.join([lib, *old])
        cuda_bin = str(self.cuda_home / "bin")
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != cuda_bin]
        env["PATH"] = os.pathsep.join([cuda_bin, *path])
        env["CUDA_INSTALL_PATH"] = str(self.cuda_home)
        env["PTXAS_CUDA_INSTALL_PATH"] = str(self.cuda_home)
        env["GPGPUSIM_ROOT"] = str(self.root)
        env["GPGPUSIM_CONFIG"] = "/".join(self.lib_dir.parts[-3:])
        env.update(PTX_ENV)
        return env


def _lib_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("lib/gcc-*/cuda-*/release/libcudart.so"))


def build_from_tree(
    root: str | os.PathLike[str], toolchain: Toolchain | None = None, key: str | None = None
) -> SimBuild:
    """A :class:`SimBuild` for a source tree built in place (``$HILSIM_GPGPUSIM_HOME``)."""
    tree = Path(root).expanduser().resolve()
    libs = _lib_dirs(tree)
    if not libs:
        raise HilsimError(
            f"{tree}: no lib/gcc-*/cuda-*/release/libcudart.so: not a built GPGPU-Sim tree "
            "(run `source setup_environment release && make` there, or `hilsim gpgpusim setup`)"
        )
    lib = libs[-1]
    prov: dict[str, Any] = {}
    prov_path = tree.parent / PROVENANCE
    if prov_path.is_file():
        with contextlib.suppress(OSError, ValueError):
            prov = json.loads(prov_path.read_text())
    if toolchain is not None:
        want = f"gcc-{toolchain.gcc_version}/cuda-{toolchain.cuda_version_number}"
        lib = next((p for p in libs if "/".join(p.parts[-3:-1]) == want), lib)
    cuda_home = Path(prov["cuda_home"]) if prov.get("cuda_home") else None
    if cuda_home is None:
        cuda_home = toolchain.cuda_home if toolchain else Path(
            os.environ.get("CUDA_INSTALL_PATH", "/usr")
        )
    if key is None:
        key = prov.get("key") or f"{tree.name}-{lib.parts[-3]}-{lib.parts[-2]}"
    return SimBuild(tree, lib, key, cuda_home, prov)


def _finished(folder: Path) -> SimBuild | None:
    prov_path = folder / PROVENANCE
    if not prov_path.is_file() or not _lib_dirs(folder / TREE):
        return None
    try:
        prov = json.loads(prov_path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(prov, dict) or prov.get("schema") != PROVENANCE_SCHEMA:
        return None
    return build_from_tree(folder / TREE, key=folder.name)


def find_build(cache_dir: str | os.PathLike[str] | None = None) -> SimBuild | None:
    """A usable build: ``$HILSIM_GPGPUSIM_HOME``, else the cache's build for this toolchain.

    Among finished builds in the cache, one whose gcc and CUDA versions match the toolchain
    found now is preferred (newest first); without a toolchain, the newest. None if the
    cache holds no finished build. A ``$HILSIM_GPGPUSIM_HOME`` that is not a built tree is
    an error (the user asked for it by name).
    """
    home = os.environ.get("HILSIM_GPGPUSIM_HOME")
    if home:
        try:
            tc: Toolchain | None = find_toolchain(need_build_tools=False)
        except HilsimError:
            tc = None
        return build_from_tree(home, tc)
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    if not cache.is_dir():
        return None
    builds = [b for d in sorted(cache.iterdir()) if d.is_dir() and (b := _finished(d))]
    if not builds:
        return None
    builds.sort(key=lambda b: str(b.provenance.get("built_at", "")), reverse=True)
    try:
        tc = find_toolchain(need_build_tools=False)
    except HilsimError:
        return builds[0]
    suffix = f"-gcc{tc.gcc_version}-cuda{tc.cuda_version_number}"
    patched = f"-p{patch_digest()}{suffix}" if patch_digest() else suffix
    return next(
        (b for b in builds if b.key.endswith(patched)),
        next((b for b in builds if b.key.endswith(suffix)), builds[0]),
    )


# --- getting the source -------------------------------------------------------------


def apply_patches(tree: Path, log: Path, patches: list[Path] | None = None) -> list[str]:
    """Apply ``patches`` (default: the shipped set) to ``tree``; their names, in order.

    A patch that does not apply cleanly is an error naming it and the log (the source is
    not the commit the patch was written for).
    """
    patches = patch_files() if patches is None else patches
    for p in patches:
        rc = _run_logged(["patch", "-p1", "--forward", "--batch", "-i", str(p)], tree, log)
        if rc != 0:
            raise HilsimError(f"{p.name}: does not apply to this GPGPU-Sim source: see {log}")
    return [p.name for p in patches]


def _run_logged(argv: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )
        try:
            return proc.wait()
        except BaseException:  # interrupted: stop make and its compilers, not just bash
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


def git_checkout(url: str, commit: str, dest: Path, log: Path) -> str:
    """Clone ``url`` into ``dest`` and check out ``commit``; return the full sha."""
    if url.startswith("-"):
        raise HilsimError(f"git url {url!r} must not start with '-'")
    if shutil.which("git") is None:
        raise HilsimError("git not found: install with `apt-get install git`")
    if _run_logged(["git", "clone", "--quiet", "--no-checkout", "--", url, str(dest)],
                   dest.parent, log) != 0:
        raise HilsimError(f"git clone {url} failed: see {log}")
    if _run_logged(["git", "-c", "advice.detachedHead=false", "checkout", "--quiet", commit,
                    "--"], dest, log) != 0:
        raise HilsimError(f"git checkout {commit} in a clone of {url} failed: see {log}")
    out = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=dest, capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or commit


# --- ensure_build -------------------------------------------------------------------


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_same_source(build: SimBuild, sha: str | None, tarball: Path | None) -> SimBuild:
    old = build.provenance.get("source_sha256")
    if sha and old and old != sha:
        raise HilsimError(
            f"{build.root.parent}: was built from a tarball with sha256 {old[:12]}..., "
            f"{tarball} has {sha[:12]}... for the same commit: delete that folder or use "
            "another --cache"
        )
    return build


def ensure_build(
    source: str | os.PathLike[str] | None = None,
    git_url: str | None = None,
    commit: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    jobs: int = 2,
    toolchain: Toolchain | None = None,
    progress: Any = None,
    patches: list[Path] | None = None,
) -> SimBuild:
    """The build of ``source`` (a tarball) or ``git_url`` at ``commit``; built if absent.

    Idempotent: a finished build with the same key (commit + gcc + CUDA version) is
    returned at once. Concurrent callers serialize on a per-key lock; the build runs in a
    temporary folder renamed into place when complete. ``progress(msg)`` gets status lines.
    ``patches`` (default: the shipped :func:`patch_files`) are applied before ``make``.
    """
    say = progress or (lambda _msg: None)
    if (source is None) == (git_url is None):
        raise HilsimError("gpgpusim setup: give exactly one of a source tarball or a git url")
    if git_url is not None and not commit:
        raise HilsimError("gpgpusim setup: --git needs --commit (a pinned sha)")
    tarball = Path(source).expanduser().resolve() if source is not None else None
    if tarball is not None:
        check_file(tarball, "the GPGPU-Sim source tarball")
        commit = commit or commit_from_tarball_name(tarball)
        if not commit:
            raise HilsimError(
                f"{tarball}: no commit in its name (expected ...-<sha>.tar.gz): pass --commit"
            )
    if jobs < 1:
        raise HilsimError(f"--jobs {jobs}: must be >= 1")
    assert commit is not None
    tc = toolchain or find_toolchain()
    patches = patch_files() if patches is None else list(patches)
    key = build_key(commit, tc.gcc_version, tc.cuda_version_number, patch_digest(patches))
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    final = cache / key
    sha = sha256_file(tarball) if tarball is not None else None
    if (done := _finished(final)) is not None:
        return _check_same_source(done, sha, tarball)
    cache.mkdir(parents=True, exist_ok=True)
    with _lock(cache / f"{key}.lock"):
        if (done := _finished(final)) is not None:  # another process finished it meanwhile
            return _check_same_source(done, sha, tarball)
        for stale in cache.glob(f".{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():  # a folder without provenance is not a finished build
            shutil.rmtree(final)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=cache))
        try:
            prov = _build_into(
                tmp, tarball, git_url, commit, sha, tc, key, jobs, say, final, patches
            )
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tmp.rename(final)
        (cache / f"{key}.failed.log").unlink(missing_ok=True)
    built = _finished(final)
    if built is None:
        raise HilsimError(f"{final}: build finished but no libcudart.so found")
    say(f"built in {prov['build_seconds']} s")
    return built


def _build_into(
    tmp: Path,
    tarball: Path | None,
    git_url: str | None,
    commit: str,
    sha: str | None,
    tc: Toolchain,
    key: str,
    jobs: int,
    say: Any,
    final: Path,
    patches: list[Path],
) -> dict[str, Any]:
    """Get the source into ``tmp/gpgpu-sim``, build it, write the provenance; return it."""
    log = tmp / LOG
    log.touch()
    started = time.time()
    say(f"building GPGPU-Sim {commit[:7]} into {final} (log: {log})")
    if tarball is not None:
        (tmp / "extract").mkdir()

        def note(line: str) -> None:
            with log.open("a", encoding="utf-8") as handle:
                handle.write(f"extract: {line}\n")

        extracted = safe_extract(tarball, tmp / "extract", note)
        extracted.rename(tmp / TREE)
        shutil.rmtree(tmp / "extract", ignore_errors=True)
        full_commit = commit
    else:
        assert git_url is not None
        full_commit = git_checkout(git_url, commit, tmp / TREE, log)
    tree = tmp / TREE
    if not (tree / "setup_environment").is_file():
        raise HilsimError(f"{tarball or git_url}: no setup_environment at the top: "
                          "not a GPGPU-Sim source tree")
    applied = apply_patches(tree, log, patches)
    env = {
        **os.environ,
        "CUDA_INSTALL_PATH": str(tc.cuda_home),
        "PATH": tc.path_env(),
    }
    env.pop("GPGPUSIM_ROOT", None)
    env.pop("GPGPUSIM_SETUP_ENVIRONMENT_WAS_RUN", None)
    rc = _run_logged(["bash", "-c", _BUILD_SCRIPT, "bash", str(jobs)], tree, log, env)
    if rc != 0 or not _lib_dirs(tree):
        kept = tmp.parent / f"{key}.failed.log"
        shutil.copyfile(log, kept)
        raise HilsimError(f"GPGPU-Sim build failed (make exit {rc}): see {kept}")
    prov = {
        "schema": PROVENANCE_SCHEMA,
        "key": key,
        "commit": full_commit,
        "source": str(tarball) if tarball else git_url,
        "source_sha256": sha,
        "gcc": tc.gcc_version,
        "cuda": tc.cuda_version,
        "cuda_version_number": tc.cuda_version_number,
        "cuda_home": str(tc.cuda_home),
        "nvcc": str(tc.nvcc),
        "patches": applied,
        "jobs": jobs,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.time() - started, 1),
    }
    write_text_atomic(tmp / PROVENANCE, json.dumps(prov, indent=2) + "\n")
    return prov


def build_info(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What ``hilsim gpgpusim info`` reports: the cache folder, the toolchain found (or why
    none is usable), the build found in the cache (``None`` when there is none) and the
    Debian toolchain install script."""
    info: dict[str, Any] = {"cache": str(cache_dir or default_cache_dir())}
    try:
        tc = find_toolchain()
        info["toolchain"] = {"nvcc": str(tc.nvcc), "cuda": tc.cuda_version,
                             "cuda_home": str(tc.cuda_home), "gcc": tc.gcc_version}
    except HilsimError as exc:
        info["toolchain"] = {"error": str(exc)}
    build = find_build(cache_dir)
    info["build"] = None if build is None else {
        "key": build.key, "root": str(build.root), "lib_dir": str(build.lib_dir),
        "cuda_home": str(build.cuda_home), "provenance": build.provenance,
    }
    info["toolchain_script"] = str(SCRIPT)
    return info
