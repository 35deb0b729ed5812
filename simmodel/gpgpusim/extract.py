"""Extract a source tarball so that nothing is written outside the destination folder.

This does not rely on ``tarfile``'s ``data`` filter, whose check resolves each member with
``os.path.realpath`` and is only as safe as the Python it runs on (on 3.11.7 a chain of
symbolic links longer than ``PATH_MAX`` stops the resolution and a later member is written
through the links, CVE-2025-4517). Instead:

* **No link is ever created.** A hard link to an earlier regular member, or a symbolic
  link that resolves (inside the archive's names) to a regular member, is written as a copy
  of that member's bytes; a symbolic link to anything else (a folder, a member that is not
  there) is skipped and reported through ``note``. A GPGPU-Sim source tree holds no links.
* **No link is ever followed.** Every folder on the way to a member is created and opened
  one component at a time relative to its parent's descriptor with ``O_NOFOLLOW``, and the
  file itself is opened with ``O_NOFOLLOW``: a link found on disk (placed there by another
  process meanwhile) is an error, never a way out.
* **Guards before anything is written.** A first pass reads every header and checks the
  member count (``max_archive_members``), the bytes the members declare, copies included
  (``max_archive_bytes``), and the bytes decompressed per byte of the file
  (``max_decompression_ratio``, checked before each header is read); names (relative, no
  ``..``, no NUL) and types (files, folders, links as above; devices and FIFOs refused).
  Only then does the second pass write.

Every refusal is one :class:`~hilsim.core.errors.HilsimError` line naming the tarball and
the member.
"""

from __future__ import annotations

import contextlib
import lzma
import math
import os
import posixpath
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from hilsim.core import limits
from hilsim.core.errors import HilsimError

_CHUNK = 1 << 20
#: symbolic links followed (inside the archive's names) before a chain counts as a loop
_MAX_HOPS = 32
#: modification times outside [0, 2^33) s are not set (the file keeps the time of extraction)
_MAX_MTIME = 1 << 33
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


def _member_path(tarball: Path, name: str) -> tuple[str, ...]:
    """A member's name as path components; refuses names that would land outside."""
    if "\x00" in name:
        raise HilsimError(f"{tarball}: member {name!r} has a NUL byte in its name")
    if name.startswith("/") or name.startswith("\\"):
        raise HilsimError(f"{tarball}: member {name!r} would land outside the destination")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise HilsimError(f"{tarball}: member {name!r} would land outside the destination")
    return parts


def _link_target(tarball: Path, member: tarfile.TarInfo, parts: tuple[str, ...]) -> str:
    """The archive name a link points to (lexically, relative to the archive's root)."""
    target = member.linkname
    if "\x00" in target or target.startswith("/"):
        raise HilsimError(
            f"{tarball}: link {member.name!r} -> {target!r} points outside the destination"
        )
    base = parts[:-1] if member.issym() else ()
    joined = posixpath.normpath(posixpath.join(*base, target) if base else target)
    if joined == ".." or joined.startswith("../"):
        raise HilsimError(
            f"{tarball}: link {member.name!r} -> {target!r} points outside the destination"
        )
    return "" if joined == "." else joined


class _Plan:
    """What the first pass found, by member name in archive order (a later member of a
    name replaces an earlier one, as extraction in order would)."""

    def __init__(self) -> None:
        #: name -> ("file", member) | ("dir", member) | ("hard", target) | ("sym", target)
        self.entries: dict[str, tuple[str, tarfile.TarInfo | str]] = {}
        self.skipped: list[str] = []

    def put(self, name: str, kind: str, what: tarfile.TarInfo | str) -> None:
        self.entries.pop(name, None)
        self.entries[name] = (kind, what)

    def file(self, name: str) -> tarfile.TarInfo | None:
        kind, what = self.entries.get(name, ("", ""))
        return what if kind == "file" and isinstance(what, tarfile.TarInfo) else None


def _read_headers(tar: tarfile.TarFile, tarball: Path) -> _Plan:
    """First pass: every header, with the guards of the module doc."""
    max_members = limits.value("max_archive_members")
    max_bytes = limits.value("max_archive_bytes")
    inflation = limits.Inflation(tarball, tarball.stat().st_size)
    plan = _Plan()
    count = declared = 0
    while True:
        inflation.check(tar.offset)  # what reading the next header decompresses up to
        member = tar.next()
        if member is None:
            break
        count += 1
        if count > max_members:
            raise limits.exceeded(
                tarball, "max_archive_members", f"more than {max_members} members"
            )
        parts = _member_path(tarball, member.name)
        name = "/".join(parts)
        size = member.size if isinstance(member.size, int) else -1
        if size < 0:
            raise HilsimError(
                f"{tarball}: member {member.name!r} declares a size of {member.size!r}"
            )
        if member.isdir():
            plan.put(name, "dir", member)
            continue
        if not parts:
            raise HilsimError(f"{tarball}: member {member.name!r} has no name")
        if member.isreg():
            declared += size
            plan.put(name, "file", member)
        elif member.islnk():
            target = _link_target(tarball, member, parts)
            earlier = plan.file(target)
            if earlier is None:
                raise HilsimError(
                    f"{tarball}: hard link {member.name!r} -> {member.linkname!r}: no "
                    "earlier file of that name in the archive"
                )
            declared += earlier.size
            plan.put(name, "hard", target)
        elif member.issym():
            plan.put(name, "sym", _link_target(tarball, member, parts))
        else:
            raise HilsimError(f"{tarball}: member {member.name!r} is a device or fifo")
        if declared > max_bytes:
            raise limits.exceeded(
                tarball, "max_archive_bytes", f"members declare more than {max_bytes} bytes"
            )
    return plan


def _copies(plan: _Plan, tarball: Path) -> list[tuple[str, tarfile.TarInfo, str]]:
    """Links written as copies: (name, the regular member it ends at, that member's name).

    A hard link names an earlier regular member; a symbolic link is followed through other
    symbolic links of the archive (at most ``_MAX_HOPS``) and copied when it ends at a
    regular member, else skipped (noted in ``plan.skipped``).
    """
    max_bytes = limits.value("max_archive_bytes")
    declared = 0
    copies = []
    for name, (kind, what) in plan.entries.items():
        if kind == "file":
            declared += what.size  # type: ignore[union-attr]
        if kind not in ("hard", "sym"):
            continue
        target = str(what)
        hops = 0
        while kind == "sym" and hops < _MAX_HOPS and plan.entries.get(target, ("",))[0] in (
            "sym", "hard"
        ):
            kind, nxt = plan.entries[target]
            target, hops = str(nxt), hops + 1
        origin = plan.file(target)
        if origin is None:
            plan.skipped.append(f"{name} -> {what}")
            continue
        declared += origin.size
        copies.append((name, origin, target))
    if declared > max_bytes:
        raise limits.exceeded(
            tarball, "max_archive_bytes", f"members declare more than {max_bytes} bytes"
        )
    return copies


class _Writer:
    """Creates folders and files under ``dest`` without following any link."""

    def __init__(self, dest: Path, tarball: Path) -> None:
        self.tarball = tarball
        self.root = os.open(dest, _DIR_FLAGS)
        self.umask = os.umask(0)
        os.umask(self.umask)

    def close(self) -> None:
        os.close(self.root)

    @contextlib.contextmanager
    def folder(self, parts: tuple[str, ...], name: str) -> Iterator[int]:
        """A descriptor of folder ``parts`` (created as needed, never through a link)."""
        fd = os.dup(self.root)
        try:
            for part in parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                try:
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise HilsimError(
                        f"{self.tarball}: member {name!r}: {part!r} on its path is not a "
                        f"folder ({exc.strerror})"
                    ) from None
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    def write(self, name: str, member: tarfile.TarInfo, chunks: Iterator[bytes]) -> None:
        parts = tuple(name.split("/"))
        mode = ((member.mode & 0o755) | 0o600) & ~self.umask
        with self.folder(parts[:-1], name) as parent:
            try:
                fd = os.open(parts[-1], _FILE_FLAGS, mode, dir_fd=parent)
            except OSError as exc:
                raise HilsimError(
                    f"{self.tarball}: member {name!r}: cannot create it ({exc.strerror})"
                ) from None
            try:
                with open(fd, "wb", closefd=False) as handle:
                    for chunk in chunks:
                        handle.write(chunk)
                os.fchmod(fd, mode)
                mtime = member.mtime
                if isinstance(mtime, int | float) and math.isfinite(mtime) and (
                    0 <= mtime < _MAX_MTIME
                ):
                    os.utime(fd, ns=(int(mtime * 1e9),) * 2)
            finally:
                os.close(fd)

    def read(self, name: str) -> Iterator[bytes]:
        """The bytes of a file written before (a copy's source), read without links."""
        parts = tuple(name.split("/"))
        with self.folder(parts[:-1], name) as parent:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        with open(fd, "rb") as handle:
            yield from iter(lambda: handle.read(_CHUNK), b"")


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, tarball: Path) -> Iterator[bytes]:
    """A regular member's data, exactly ``member.size`` bytes or a one-line error."""
    source = tar.extractfile(member)
    if source is None:  # pragma: no cover - regular members always have data
        raise HilsimError(f"{tarball}: member {member.name!r} has no data")
    left = member.size
    while left > 0:
        chunk = source.read(min(_CHUNK, left))
        if not chunk:
            raise HilsimError(f"{tarball}: truncated inside member {member.name!r}")
        left -= len(chunk)
        yield chunk


def safe_extract(
    tarball: str | os.PathLike[str], dest: str | os.PathLike[str],
    note: Callable[[str], None] | None = None,
) -> Path:
    """Extract ``tarball`` into the folder ``dest`` (see the module doc); return the source
    root: the archive's single top folder, else ``dest``.

    ``note(line)`` hears of symbolic links that were skipped. Every problem is one
    :class:`HilsimError` line naming the tarball (and the member).
    """
    source = Path(tarball)
    target = Path(dest).resolve()
    errors = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, ValueError, OverflowError)
    try:
        with tarfile.open(source) as tar:
            plan = _read_headers(tar, source)
            copies = _copies(plan, source)
            writer = _Writer(target, source)
            try:
                for name, (kind, member) in plan.entries.items():
                    if kind == "dir":
                        with writer.folder(tuple(name.split("/")) if name else (), name):
                            pass
                    elif kind == "file":
                        assert isinstance(member, tarfile.TarInfo)
                        writer.write(name, member, _member_bytes(tar, member, source))
                for name, origin, origin_name in copies:
                    writer.write(name, origin, writer.read(origin_name))
            finally:
                writer.close()
    except HilsimError:
        raise
    except errors as exc:
        raise HilsimError(f"{source}: truncated or not a tar archive ({exc})") from None
    except OSError as exc:
        raise HilsimError(f"{source}: cannot extract ({exc.strerror or exc})") from None
    if note is not None:
        for line in plan.skipped:
            note(f"skipped symbolic link {line} (not a file of the archive)")
    tops = list(target.iterdir())
    if len(tops) == 1 and tops[0].is_dir() and not tops[0].is_symlink():
        return tops[0]
    return target
