"""Atomic file and directory writes: write to a temporary sibling, then rename.

A crash or an error part-way leaves the old content (or nothing) in place, never
a half-written file. The rules (``docs/limits.md``, "Writes"):

* **Exclusive create.** Without ``overwrite`` a finished folder is moved into place with
  ``renameat2(RENAME_NOREPLACE)`` (a plain ``rename`` where the kernel lacks it, which
  still fails on a non-empty folder): of two writers racing to one output, exactly one
  succeeds and the other reports that the output already exists.
* **Crash-safe replacement.** With ``overwrite`` the new folder and the old one are
  swapped in one ``renameat2(RENAME_EXCHANGE)``: at every instant the path holds the
  complete old bundle or the complete new one. Where the exchange is not available the
  old folder is moved aside first and, should the process die before the new one is in
  place, the next writer (or reader through :func:`recover`) moves it back.
* **Leftovers.** Temporary siblings are named ``.<name>.<pid>.<random>.tmp`` (``.old``
  for a replaced folder); the next write to the same output removes those whose process
  is gone.
* **Permissions.** Files and folders get the permissions a plain ``open``/``mkdir``
  would give under the user's umask (``0666 & ~umask``, ``0777 & ~umask``), not the
  0600 of ``mkstemp``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _libc_renameat2() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    text, number = ctypes.c_char_p, ctypes.c_int
    function.argtypes = [number, text, number, text, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_renameat2_fn = _libc_renameat2()


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(source, target, flags)``; False where the system does not support it."""
    if _renameat2_fn is None:
        return False
    result = _renameat2_fn(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(target))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder."""
    with open_atomic(path, "wb") as handle:
        handle.write(data)
    return Path(path)


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; it becomes ``path`` on success.

    For streamed writes (one line at a time); on an exception the temporary file is
    removed and ``path`` is untouched. ``mode`` is ``"w"`` (UTF-8 text) or ``"wb"``.
    The file gets ``0666 & ~umask`` (as ``open`` would create it).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent
    )
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(path: str | os.PathLike[str]) -> None:
    """Clean up after writers of ``path`` that were killed (see the module doc).

    A folder moved aside by an interrupted replacement is moved back when nothing is at
    ``path``; temporary siblings of dead processes are removed. Siblings of live
    processes (a concurrent writer) are left alone.
    """
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        return
    prefix = f".{target.name}."
    for item in sorted(parent.iterdir()):
        name = item.name
        if not name.startswith(prefix) or not name.endswith((".tmp", ".old")):
            continue
        pid_text = name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        previous = item / "previous"
        if name.endswith(".old") and previous.is_dir() and not target.exists():
            with contextlib.suppress(OSError):
                os.rename(previous, target)
        _remove(item)


def _remove(item: Path) -> None:
    if item.is_dir() and not item.is_symlink():
        shutil.rmtree(item, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            item.unlink()


def _move_into_place(tmp: Path, target: Path, overwrite: bool) -> None:
    """The commit step: exclusive create, or a crash-safe swap with ``overwrite``."""
    if not overwrite or not (target.exists() or target.is_symlink()):
        try:
            if not _renameat2(tmp, target, _RENAME_NOREPLACE):
                os.rename(tmp, target)  # fails on a non-empty folder: the same rule
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
            if not overwrite:
                raise FileExistsError(str(target)) from exc
            # (appeared meanwhile: replace it below)
    if _renameat2(tmp, target, _RENAME_EXCHANGE):
        _remove(tmp)  # tmp holds the old content now
        return
    old = Path(
        tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".old", dir=target.parent)
    )
    os.replace(target, old / "previous")
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``path`` when the block succeeds.

    On an exception the temporary directory is removed and ``path`` is untouched.
    With ``overwrite`` an existing directory at ``path`` is replaced only after the
    new one is complete, in one atomic exchange; without it, an output that exists (or
    appears while this one is written) raises :class:`FileExistsError`.
    """
    target = Path(path)
    recover(target)
    if (target.exists() or target.is_symlink()) and not overwrite:
        raise FileExistsError(str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    )
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        _move_into_place(tmp, target, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
