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
* **Only regular files and folders are replaced.** An output path that holds a device
  node, a FIFO, a socket or a symbolic link (``-o /dev/null``) is refused in one line
  before anything is written, and checked again just before the rename; a file output
  never replaces a folder, a folder output never replaces a file. An output whose parent
  path runs through a file (``-o FILE/sub``) is refused naming that file.
* **Leftovers.** Temporary siblings are named ``.<name>.<pid>.<random>.tmp`` (``.old``
  for a replaced folder); the next write to the same output (file or folder) removes
  those whose process is gone, and so does the next reader of a bundle.
* **Folder locks.** :func:`folder_lock` holds an exclusive ``flock`` on a folder that
  several runs write into over time (a sweep's output), :func:`output_lock` one on an
  output folder replaced whole (``simulate -o``): a second run refuses at once.
* **Permissions.** Files and folders get the permissions a plain ``open``/``mkdir``
  would give under the user's umask (``0666 & ~umask``, ``0777 & ~umask``), not the
  0600 of ``mkstemp``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hilsim.core.errors import HilsimError

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


def _what(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_output(path: str | os.PathLike[str], folder: bool = False) -> Path:
    """Refuse an output path that must not be replaced (see the module doc): one that
    holds anything but a regular file (``folder``: a real folder), or whose parent path
    runs through a file. Returns ``path``."""
    target = Path(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        mode = None  # a parent is not a folder: named below
    if mode is not None:
        wanted = stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)
        if not wanted:
            expected = "a folder" if folder else "a regular file"
            raise HilsimError(
                f"{target}: is {_what(mode)}; an output replaces only {expected} "
                "(choose another path)"
            )
        return target
    for parent in target.parents:
        try:
            parent_mode = os.stat(parent).st_mode
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue
        if not stat.S_ISDIR(parent_mode):
            raise HilsimError(
                f"{target}: {parent} is {_what(parent_mode)}, not a folder: cannot create "
                "the output inside it"
            )
        break
    return target


def _make_parent(target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        check_output(target)  # names the file on the way
        raise


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
    The file gets ``0666 & ~umask`` (as ``open`` would create it). ``path`` may hold
    only a regular file (:func:`check_output`, before writing and again before the
    rename); temporary files of killed writers of ``path`` are removed first.
    """
    target = check_output(path)
    _make_parent(target)
    recover(target)
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
        check_output(target)  # (a device node may have appeared meanwhile)
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
    if not target.name or not parent.is_dir():
        return
    prefix = f".{target.name}."
    try:
        items = sorted(parent.iterdir())
    except OSError:  # a folder we may read from but not list: nothing to clean
        return
    for item in items:
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
    check_output(target, folder=True)  # never swap a device node or a file into tmp
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
    check_output(target, folder=True)
    _make_parent(target)
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


#: folders this process holds a :func:`folder_lock` on: resolved path -> (fd, depth)
_LOCKED: dict[str, list[int]] = {}
LOCK_NAME = ".hilsim.lock"


@contextlib.contextmanager
def folder_lock(path: str | os.PathLike[str], what: str = "run") -> Iterator[Path]:
    """Hold an exclusive lock on folder ``path`` (created if missing) for the block.

    The lock is an ``flock`` on ``path/.hilsim.lock``, which records the holder's pid; a
    second process refuses at once in one line naming that pid. Re-entrant within one
    process (a library call inside a command that already holds it). The lock file stays
    (empty of meaning once released: the kernel drops the lock when its holder exits, also
    after kill -9).
    """
    folder = check_output(path, folder=True)
    _make_parent(folder / LOCK_NAME)
    key = str(folder.resolve())
    held = _LOCKED.get(key)
    if held is not None:
        held[1] += 1
        try:
            yield folder
        finally:
            held[1] -= 1
        return
    with _held(folder / LOCK_NAME, folder, what) as fd:
        _LOCKED[key] = [fd, 1]
        try:
            yield folder
        finally:
            del _LOCKED[key]


@contextlib.contextmanager
def _held(lock: Path, shown: Path, what: str) -> Iterator[int]:
    """An exclusive ``flock`` on the file ``lock`` (created), recording this pid; one line
    naming ``shown`` and the holder's pid when another process holds it."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666 & ~_umask())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            raise HilsimError(
                f"{shown}: another {what} (pid {holder}) is writing into this folder; wait "
                "for it to finish or choose another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield fd
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str], what: str = "run") -> Iterator[Path]:
    """Hold an exclusive lock on the output ``path`` (a folder that is replaced whole, so
    the lock cannot live inside it): an ``flock`` on the sibling ``.<name>.lock`` (which
    stays, as :func:`folder_lock`'s does). A second process refuses at once in one line."""
    target = check_output(path, folder=True)
    _make_parent(target)
    with _held(target.parent / f".{target.name}.lock", target, what):
        yield target


def cache_root(*parts: str) -> Path:
    """hilsim's cache folder (``$HILSIM_CACHE``, else ``$XDG_CACHE_HOME/hilsim``, else
    ``~/.cache/hilsim``), joined with ``parts``: compiled programs and libraries kept
    between runs."""
    base = os.environ.get("HILSIM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hilsim")
    return Path(base).joinpath(*parts)
